"""The lean integrator: explicit Runge–Kutta steps with nothing else in the loop.

`diffrax.diffeqsolve` is general (events, dense output, SDEs, checkpointed adjoints), and
under `jax.vmap` every step of that generality costs time: on XLA:CPU a vmapped solve of
small ODEs spends 20–50x longer per step than the arithmetic of the step itself (see
docs/performance.md). The integrator here keeps only what an explicit Runge–Kutta solve
needs: the stages, an embedded error estimate and an I-controller for adaptive steps, and
saving by landing steps exactly on the save times (so no interpolation). It is written for
one trajectory; `jax.vmap` batches it into the loop a hand-written ensemble code would use.
It reads the Butcher tableau of any Diffrax explicit Runge–Kutta solver, so it solves with
the same method as Diffrax, and `simulate` uses it behind its usual API.
"""

from collections.abc import Callable
from typing import Any, ClassVar

import diffrax as dfx
import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

# Diffrax's default PID controller settings, which the adaptive lean path reproduces.
SAFETY = 0.9
FACTOR_MIN = 0.2
FACTOR_MAX = 10.0

_rk4_tableau = dfx.ButcherTableau(
    c=np.array([0.5, 0.5, 1.0]),
    b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
    b_error=np.zeros(4),
    a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
)


class RK4(dfx.AbstractERK):
    """The classical fourth-order Runge–Kutta method, for fixed steps only.

    It has no embedded error estimate, so `simulate` refuses it with `adaptive=True`.
    Dense output (for save times between steps) is third-order Hermite interpolation.
    """

    tableau: ClassVar[dfx.ButcherTableau] = _rk4_tableau
    interpolation_cls: ClassVar[Callable[..., dfx.ThirdOrderHermitePolynomialInterpolation]] = (
        dfx.ThirdOrderHermitePolynomialInterpolation.from_k
    )

    def order(self, terms):
        return 4


def is_lean_solver(solver: dfx.AbstractSolver) -> bool:
    """Whether the lean integrator can run `solver`: any explicit Runge–Kutta tableau."""
    return isinstance(solver, dfx.AbstractERK) and not solver.tableau.implicit


def has_error_estimate(solver: dfx.AbstractSolver) -> bool:
    """Whether `solver` carries an embedded error estimate (needed for adaptive steps)."""
    return bool(np.any(np.asarray(solver.tableau.b_error) != 0))


def fixed_steps_per_interval(ts: Array, dt0: Any) -> Any:
    """How many equal steps of at most `dt0` each save interval takes.

    A Python int when every interval takes the same number (the scan length is then
    static, and reverse-mode autodiff works); otherwise an integer array, one per interval.
    A relative slack of 1e-9 keeps `ts` on a grid of `dt0` from gaining a step to roundoff.
    """
    ratio = jnp.diff(ts) / dt0
    counts = jnp.maximum(jnp.ceil(ratio * (1 - 1e-9)), 1).astype(jnp.int32)
    if isinstance(counts, jax.core.Tracer):
        return counts
    counts = np.asarray(counts)
    return int(counts[0]) if np.all(counts == counts[0]) else counts


def _weighted_sum(weights: np.ndarray, stages: list[Array]) -> Array:
    # Skipping zero weights keeps them out of the compiled graph.
    terms = [float(w) * k for w, k in zip(weights, stages, strict=False) if w != 0]
    return sum(terms[1:], terms[0])


def _runge_kutta_step(vector_field, tableau, t, y, f0, h):
    """One explicit Runge–Kutta step: the new state, its error estimate, and f at the end.

    `f0 = f(t, y)` is carried between steps: first-same-as-last tableaus (Tsit5, Dopri5,
    Bosh3) evaluate f at the end point as their last stage, the others spend one extra
    evaluation there, which is the next step's first stage either way.
    """
    stages = [f0]
    for c, a_row in zip(tableau.c, tableau.a_lower, strict=True):
        stages.append(vector_field(t + float(c) * h, y + h * _weighted_sum(a_row, stages)))
    y1 = y + h * _weighted_sum(tableau.b_sol, stages)
    f1 = stages[-1] if tableau.fsal else vector_field(t + h, y1)
    if not np.any(tableau.b_error != 0):
        return y1, None, f1
    return y1, h * _weighted_sum(tableau.b_error, stages), f1


def _solve_fixed(vector_field, tableau, ts, y0, steps_per_interval):
    """Equal steps inside each save interval, landing exactly on every save time."""
    uniform = isinstance(steps_per_interval, int)

    def interval(carry, xs):
        y, f = carry
        t_start, t_end, num_steps = xs if not uniform else (*xs, steps_per_interval)
        h = (t_end - t_start) / num_steps

        def step(i, state):
            y1, _, f1 = _runge_kutta_step(vector_field, tableau, t_start + i * h, *state, h)
            return y1, f1

        y, f = lax.fori_loop(0, num_steps, step, (y, f))
        return (y, f), y

    xs = (ts[:-1], ts[1:]) if uniform else (ts[:-1], ts[1:], jnp.asarray(steps_per_interval))
    _, ys = lax.scan(interval, (y0, vector_field(ts[0], y0)), xs)
    total = jnp.sum(jnp.asarray(steps_per_interval) * jnp.ones(ts.shape[0] - 1, jnp.int32))
    stats = {"num_steps": total, "num_accepted_steps": total, "num_rejected_steps": total * 0}
    return jnp.concatenate([y0[None], ys]), dfx.RESULTS.successful, stats


def _rms(x: Array) -> Array:
    return jnp.sqrt(jnp.mean(jnp.square(x)))


def _initial_step(vector_field, t0, y0, f0, error_order, rtol, atol):
    """Hairer, Nørsett & Wanner's starting step (the same rule Diffrax uses)."""
    scale = atol + jnp.abs(y0) * rtol
    d0 = _rms(y0 / scale)
    d1 = _rms(f0 / scale)
    tiny = (d0 < 1e-5) | (d1 < 1e-5)
    h0 = jnp.where(tiny, 1e-6, 0.01 * d0 / jnp.where(tiny, 1, d1))
    f1 = vector_field(t0 + h0, y0 + h0 * f0)
    d2 = _rms((f1 - f0) / scale) / h0
    largest = jnp.maximum(d1, d2)
    h1 = jnp.where(
        largest <= 1e-15,
        jnp.maximum(1e-6, h0 * 1e-3),
        (0.01 / jnp.maximum(largest, 1e-15)) ** (1 / error_order),
    )
    return lax.stop_gradient(jnp.minimum(100 * h0, h1))


def _solve_adaptive(vector_field, tableau, error_order, ts, y0, dt0, rtol, atol, max_steps):
    """Per-trajectory adaptive steps (I-controller), clipped to land on every save time."""
    num_times = ts.shape[0]
    f0 = vector_field(ts[0], y0)
    if dt0 is None:
        h0 = _initial_step(vector_field, ts[0], y0, f0, error_order, rtol, atol)
    else:
        h0 = jnp.asarray(dt0, dtype=ts.dtype)
    ys = jnp.full((num_times, *y0.shape), jnp.inf, dtype=y0.dtype).at[0].set(y0)
    zero = jnp.asarray(0, jnp.int32)
    # (t, y, f(t, y), proposed step, index of the next save time, ys, steps, rejections)
    init = (ts[0], y0, f0, h0.astype(ts.dtype), jnp.asarray(1, jnp.int32), ys, zero, zero)

    def unfinished(carry):
        next_save, num_steps = carry[4], carry[6]
        return (next_save < num_times) & (num_steps < max_steps)

    def attempt(carry):
        t, y, f, h, next_save, ys, num_steps, num_rejected = carry
        target = ts[jnp.minimum(next_save, num_times - 1)]
        clipped = h >= target - t
        h_step = jnp.where(clipped, target - t, h)
        y1, error, f1 = _runge_kutta_step(vector_field, tableau, t, y, f, h_step)
        scale = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y1))
        scaled_error = lax.stop_gradient(_rms(error / scale))
        # A non-finite candidate (a blow-up) is rejected like a too-large error.
        accept = scaled_error < 1
        factor = jnp.where(
            jnp.isfinite(scaled_error),
            SAFETY * jnp.maximum(scaled_error, 1e-30) ** (-1 / error_order),
            FACTOR_MIN,
        )
        factor = jnp.clip(
            factor, jnp.where(accept, 1.0, FACTOR_MIN), jnp.where(accept, FACTOR_MAX, SAFETY)
        )
        h_next = h_step * factor
        # A step shortened to hit a save time says little about the step size to use next.
        h_next = jnp.where(accept & clipped, jnp.maximum(h_next, h), h_next)
        saved = accept & clipped
        ys = ys.at[next_save].set(jnp.where(saved, y1, ys[next_save]))
        return (
            jnp.where(accept, jnp.where(clipped, target, t + h_step), t),
            jnp.where(accept, y1, y),
            jnp.where(accept, f1, f),
            h_next.astype(h.dtype),
            next_save + saved,
            ys,
            num_steps + 1,
            num_rejected + (~accept),
        )

    final = lax.while_loop(unfinished, attempt, init)
    next_save, ys, num_steps, num_rejected = final[4], final[5], final[6], final[7]
    result = dfx.RESULTS.where(
        next_save < num_times, dfx.RESULTS.max_steps_reached, dfx.RESULTS.successful
    )
    stats = {
        "num_steps": num_steps,
        "num_accepted_steps": num_steps - num_rejected,
        "num_rejected_steps": num_rejected,
    }
    return ys, result, stats


@eqx.filter_jit
def lean_solve(
    model: Callable[[Any, Array, Any], Array],
    solver: dfx.AbstractERK,
    ts: Array,
    y0: Array,
    args: Any,
    *,
    adaptive: bool,
    steps_per_interval: Any,
    dt0: Array | None,
    rtol: Array,
    atol: Array,
    max_steps: int,
) -> tuple[Array, dfx.RESULTS, dict[str, Array]]:
    """Solves with the lean integrator; returns `(ys, result, stats)` like `diffeqsolve`.

    Compiled once per model structure, solver, shapes and step layout: parameter values,
    `y0`, `ts`, `dt0` and the tolerances are traced, so changing them never recompiles.
    """

    def vector_field(t, y):
        return model(t, y, args)

    if adaptive:
        error_order = solver.order(dfx.ODETerm(model)) + 1
        ys, result, stats = _solve_adaptive(
            vector_field, solver.tableau, error_order, ts, y0, dt0, rtol, atol, max_steps
        )
    else:
        ys, result, stats = _solve_fixed(vector_field, solver.tableau, ts, y0, steps_per_interval)
    return ys, result, {**stats, "max_steps": jnp.asarray(max_steps)}
