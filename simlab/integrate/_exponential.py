r"""Exponential time differencing: ETDRK4 in Fourier space on periodic grids.

For a split model $\dot u = L u + N(t, u)$ whose linear part is diagonal in Fourier space,
$\widehat{Lu} = \lambda \hat u$, variation of constants gives the exact

$$
\hat u(t + h) = e^{h\lambda} \hat u(t)
  + \int_0^h e^{(h - s)\lambda}\, \widehat N(t + s, u(t + s))\, ds ,
$$

and ETDRK4 (Cox & Matthews, *J. Comput. Phys.* 176, 2002, eqs. 26–29) approximates the
integral with four evaluations of $N$ per step:

$$
\begin{aligned}
a &= e^{h\lambda/2} \hat u + Q\, \widehat N(\hat u, t), &
b &= e^{h\lambda/2} \hat u + Q\, \widehat N(a, t + h/2), \\
c &= e^{h\lambda/2} a + Q\,\bigl(2\widehat N(b, t + h/2) - \widehat N(\hat u, t)\bigr), &&\\
\hat u(t + h) &= e^{h\lambda} \hat u + f_1 \widehat N_u + 2 f_2 (\widehat N_a + \widehat N_b)
  + f_3 \widehat N_c ,
\end{aligned}
$$

with $z = h\lambda$ and the coefficients $Q = h\,(e^{z/2} - 1)/z$,
$f_1 = h\,(-4 - z + e^z(4 - 3z + z^2))/z^3$, $f_2 = h\,(2 + z + e^z(z - 2))/z^3$,
$f_3 = h\,(-4 - 3z - z^2 + e^z(4 - z))/z^3$. These lose every digit to
cancellation as $z \to 0$, so they are evaluated as Kassam & Trefethen (*SIAM J. Sci.
Comput.* 26, 2005) do: as the mean of the same expressions over points on a circle of
radius `contour_radius` about each $z$ (Cauchy's integral formula, by the trapezoid rule,
which converges geometrically for these entire functions).

The linear part is integrated exactly, so the step is limited by the nonlinear dynamics
only, not by the stiffness of $L$ ($\nabla^4$ of Kuramoto–Sivashinsky, fine-grid diffusion).
"""

from typing import Any, ClassVar

import equinox as eqx
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._misc import is_concrete
from .._results import RESULTS
from ._interface import AbstractIntegrator, Problem, Solution
from ._loops import fixed_steps_per_interval, repeat_step
from ._split import (
    FourierSplitVectorField,
    check_linear_part,
    check_linear_symbol,
    require_split,
)

# How each `adjoint=` runs a run-time number of steps: a checkpointed loop that reverse
# mode differentiates, or a `lax` loop that forward mode (`jax.jvp`, `jax.jacfwd`) does.
LOOP_KINDS = {None: "checkpointed", "checkpoint": "checkpointed", "forward": "lax"}


class _Coefficients(eqx.Module):
    exp_full: Array
    exp_half: Array
    stage: Array
    weight_1: Array
    weight_2: Array
    weight_3: Array


def _coefficients(
    symbol: Array, h: Array, num_points: int, radius: float, dtype: Any
) -> _Coefficients:
    """The ETDRK4 coefficients at step `h`, by Kassam and Trefethen's contour means: real
    for a real symbol (the contour points come in conjugate pairs, so the means are real),
    else in the spectrum's complex `dtype`."""
    real_symbol = not jnp.iscomplexobj(symbol)
    coefficient_dtype = jnp.finfo(dtype).dtype if real_symbol else dtype
    z = (h.astype(symbol.dtype) * symbol).astype(coefficient_dtype)
    indices = np.arange(1, num_points + 1)
    weights = np.ones(num_points)
    if real_symbol:
        # f(conj r) = conj f(r): the upper half of the circle, doubled, gives the real mean
        # (the point at angle pi, for an odd count, is its own conjugate).
        indices = np.arange(1, (num_points + 1) // 2 + 1)
        weights = np.where(2 * indices - 1 == num_points, 1.0, 2.0)
    offsets = radius * np.exp(2j * np.pi * (indices - 0.5) / num_points)
    offsets, offset_exps, half_offset_exps = (
        jnp.asarray(x, dtype) for x in (offsets, np.exp(offsets), np.exp(offsets / 2))
    )
    weights = jnp.asarray(weights, dtype=coefficient_dtype)
    exp_z, exp_half_z = jnp.exp(z), jnp.exp(z / 2)
    complex_z, complex_exp_z, complex_exp_half_z = (x.astype(dtype) for x in (z, exp_z, exp_half_z))

    def accumulate(i, sums):
        # e^r = e^z e^(r - z): the exponentials at z, once, times constants per point, and
        # one reciprocal of r per point, rather than two exponentials and four divisions.
        r = complex_z + offsets[i]
        exp_r, exp_half_r = complex_exp_z * offset_exps[i], complex_exp_half_z * half_offset_exps[i]
        inverse = 1 / r
        inverse_cube = inverse * inverse * inverse
        terms = (
            (exp_half_r - 1) * inverse,
            (-4 - r + exp_r * (4 - 3 * r + r * r)) * inverse_cube,
            (2 + r + exp_r * (-2 + r)) * inverse_cube,
            (-4 - 3 * r - r * r + exp_r * (4 - r)) * inverse_cube,
        )
        if real_symbol:
            terms = tuple(term.real for term in terms)
        return tuple(s + weights[i] * term for s, term in zip(sums, terms, strict=True))

    zeros = jnp.zeros(z.shape, coefficient_dtype)
    sums = lax.fori_loop(0, indices.size, accumulate, (zeros,) * 4)
    means = [s / num_points for s in sums]
    step = h.astype(coefficient_dtype)
    return _Coefficients(
        exp_full=exp_z,
        exp_half=exp_half_z,
        stage=step * means[0],
        weight_1=step * means[1],
        weight_2=step * means[2],
        weight_3=step * means[3],
    )


def _scaled(coefficient: Array, spectrum: Array) -> Array:
    """`coefficient * spectrum`; a real coefficient scales the real and imaginary parts (two
    real products, and half the memory traffic of a complex coefficient)."""
    if jnp.iscomplexobj(coefficient):
        return coefficient * spectrum
    return lax.complex(coefficient * spectrum.real, coefficient * spectrum.imag)


def _etdrk4_step(model: FourierSplitVectorField, coefficients: _Coefficients, t, v, h, args):
    """One ETDRK4 step of the spectrum `v` from `t` to `t + h`."""
    c = coefficients

    def nonlinear(time, spectrum):
        return model.nonlinear_spectral(time, spectrum, args)

    n_v = nonlinear(t, v)
    a = _scaled(c.exp_half, v) + _scaled(c.stage, n_v)
    n_a = nonlinear(t + h / 2, a)
    b = _scaled(c.exp_half, v) + _scaled(c.stage, n_a)
    n_b = nonlinear(t + h / 2, b)
    d = _scaled(c.exp_half, a) + _scaled(c.stage, 2 * n_b - n_v)
    n_d = nonlinear(t + h, d)
    return (
        _scaled(c.exp_full, v)
        + _scaled(c.weight_1, n_v)
        + _scaled(c.weight_2, 2 * (n_a + n_b))
        + _scaled(c.weight_3, n_d)
    ).astype(v.dtype)


@eqx.filter_jit
def _solve(
    solver: "ETDRK4",
    model: FourierSplitVectorField,
    ts,
    y0,
    args,
    steps_per_interval,
    max_steps,
    loop_kind,
):
    uniform = isinstance(steps_per_interval, int)
    spectrum0 = model.to_spectrum(y0)
    symbol = jnp.broadcast_to(jnp.asarray(model.linear_symbol()), spectrum0.shape)

    def coefficient_fn(h):
        return _coefficients(
            symbol, h, solver.num_contour_points, solver.contour_radius, spectrum0.dtype
        )

    counts = jnp.broadcast_to(jnp.asarray(steps_per_interval, jnp.int32), ts[1:].shape)

    def interval(carry, xs):
        v, coefficients, h_previous = carry
        t_start, t_end, num_steps = xs
        h = (t_end - t_start) / num_steps.astype(t_end.dtype)
        # Equal intervals (the usual case) reuse the coefficients: decided at run time.
        coefficients = lax.cond(h == h_previous, lambda: coefficients, lambda: coefficient_fn(h))

        def step(i, v):
            t = t_start + jnp.asarray(i, h.dtype) * h
            return _etdrk4_step(model, coefficients, t, v, h, args)

        # A count known only at run time (traced ts or dt0) still differentiates in reverse.
        count = steps_per_interval if uniform else num_steps
        v = repeat_step(step, count, v, max_steps=max_steps, kind=loop_kind)
        return (v, coefficients, h), model.from_spectrum(v).astype(y0.dtype)

    h0 = (ts[1] - ts[0]) / counts[0].astype(ts.dtype)
    init = (spectrum0, coefficient_fn(h0), h0)
    _, ys = lax.scan(interval, init, (ts[:-1], ts[1:], counts))
    ys = jnp.concatenate([y0[None], ys])
    total = jnp.sum(counts).astype(jnp.int32)
    result = RESULTS.where(jnp.all(jnp.isfinite(ys)), RESULTS.successful, RESULTS.nonfinite_state)
    result = RESULTS.where(total > max_steps, RESULTS.max_steps_reached, result)
    stats = {
        "num_steps": total,
        "num_accepted_steps": total,
        "num_rejected_steps": jnp.zeros((), jnp.int32),
    }
    return ys, result, stats


class ETDRK4(eqx.Module):
    r"""Fourth-order exponential time differencing Runge–Kutta (Cox–Matthews), in Fourier
    space with `jnp.fft`, for split models on periodic grids.

    The linear part $L$ is integrated exactly through its Fourier symbol, so stiff linear
    terms ($\nabla^4$, fine-grid diffusion) set no step limit; the error is fourth order
    in the step. Steps are fixed: each save interval is cut into the fewest equal steps of
    at most `dt0`, so every save time is hit exactly.

    **Arguments:**

    - `num_contour_points`: points on the circle of the Kassam–Trefethen contour means
      (default 32).
    - `contour_radius`: its radius (default 1).

    !!! example

        ```python
        import jax.numpy as jnp
        import simlab
        from simlab.integrate import ETDRK4

        grid = simlab.Grid((64,), extent=32 * jnp.pi)
        (x,) = grid.coordinates()
        model = simlab.models.KuramotoSivashinsky(grid=grid)
        ys, result, stats = ETDRK4().solve(
            model, jnp.linspace(0.0, 10.0, 11), jnp.cos(x / 16), None, dt0=0.25, max_steps=100
        )
        ```
    """

    num_contour_points: int = eqx.field(static=True, default=32)
    contour_radius: float = eqx.field(static=True, default=1.0)

    def __check_init__(self):
        if not isinstance(self.num_contour_points, int) or self.num_contour_points < 4:
            raise ValueError(
                f"ETDRK4: num_contour_points must be an integer >= 4; got "
                f"{self.num_contour_points!r}."
            )
        if not self.contour_radius > 0:
            raise ValueError(f"ETDRK4: contour_radius must be positive; got {self.contour_radius}.")

    order: ClassVar[int] = 4  # of the solution: its global error falls as h^4

    def solve(
        self,
        model: Any,
        ts: Array,
        y0: Array,
        args: Any,
        *,
        dt0: Any,
        max_steps: int,
        adjoint: str | None = None,
    ) -> tuple[Array, RESULTS, dict[str, Array]]:
        """Solves `model` from `y0` at `ts[0]`, saving at every `ts`.

        **Arguments:**

        - `model`: a split model on a periodic grid (a `FourierSplitVectorField`, such as
          every `simlab.models.AbstractSplitGridModel`).
        - `ts`: strictly increasing save times.
        - `y0`: the real initial state, of shape `model.state_shape`.
        - `args`: passed to the model's parts.
        - `dt0`: the largest step; each save interval takes equal steps of at most `dt0`.
        - `max_steps`: the most steps in all; more give `RESULTS.max_steps_reached`.
        - `adjoint`: how a step count known only at run time (traced `ts` or `dt0`) is
          differentiated: `None` or `"checkpoint"` in reverse mode (`jax.grad`),
          `"forward"` in forward mode (`jax.jvp`, `jax.jacfwd`). A static count takes both.

        **Returns:** `(ys, result, stats)`: the states at `ts` (`ys[0]` is `y0`), a
        [`simlab.RESULTS`][] status and int32 step counts (`num_steps`,
        `num_accepted_steps`, `num_rejected_steps`).
        """
        model = require_split(model, FourierSplitVectorField)
        model.require_fourier("ETDRK4")
        ts, y0 = jnp.asarray(ts), jnp.asarray(y0)
        if jnp.iscomplexobj(y0):
            raise ValueError("ETDRK4 steps real fields (rfft); got a complex y0.")
        if dt0 is None:
            raise ValueError("ETDRK4 takes fixed steps and needs the largest one: pass dt0=...")
        if is_concrete(dt0) and not float(dt0) > 0:
            raise ValueError(f"dt0 must be positive; got {dt0}.")
        check_linear_part(model, ts[0], y0, args)
        check_linear_symbol(model, ts[0], y0, args)
        steps_per_interval = fixed_steps_per_interval(ts, dt0)
        if is_concrete(steps_per_interval):
            total = int(np.sum(np.asarray(steps_per_interval) * np.ones(ts.shape[0] - 1)))
            if total > max_steps:
                raise ValueError(
                    f"{total} ETDRK4 steps of at most dt0={dt0} are needed to reach ts[-1], more "
                    f"than max_steps={max_steps}; raise max_steps or dt0."
                )
        if adjoint not in LOOP_KINDS:
            raise ValueError(f"ETDRK4: adjoint must be one of {list(LOOP_KINDS)}; got {adjoint!r}.")
        loop_kind = LOOP_KINDS[adjoint]
        return _solve(self, model, ts, y0, args, steps_per_interval, max_steps, loop_kind)


class ExponentialIntegrator(AbstractIntegrator):
    """Runs `ETDRK4` on split models with a Fourier symbol, in fixed steps."""

    name = "exponential"
    runs = "exponential integrators ('etdrk4')"
    exclusive = True
    events_advice = (
        ", nor does ETDRK4: for a stiff model with an event pass solver='rodas5p' (or "
        "'radau5', 'kvaerno5'), for a non-stiff one an explicit solver such as 'tsit5', or "
        "leave solver unset: the default solver locates events"
    )
    adaptive_steps = False
    adjoints = tuple(LOOP_KINDS)

    def accepts_solver(self, solver: Any) -> bool:
        return isinstance(solver, ETDRK4)

    def solve(self, problem: Problem) -> Solution:
        ys, status, stats = problem.solver.solve(
            problem.model,
            problem.ts,
            problem.y0,
            problem.args,
            dt0=problem.dt0,
            max_steps=problem.max_steps,
            adjoint=problem.adjoint,
        )
        return Solution(ys, status, stats)
