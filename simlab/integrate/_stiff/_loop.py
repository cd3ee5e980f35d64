"""The adaptive time loop shared by simlab's stiff solvers.

A stiff solver here is a final `eqx.Module` that knows how to *attempt* one step (and to
propose the next step size); this module owns everything else: the bounded while loop (so
that reverse mode works with bounded memory), stepping over the save times and filling them
from the solver's dense output, the step counters, and the status code.
"""

import abc
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Bool, Float, Real

from ..._results import RESULTS

RealScalarLike = float | Real[ArrayLike, ""]

VectorField = Callable[[Array, Array], Array]


class Tolerances(NamedTuple):
    """Error tolerances and how inner iterations loop (static `newton_kind`)."""

    rtol: Array
    atol: Array
    newton_kind: str


class Attempt(NamedTuple):
    """What one step attempt returns to the time loop."""

    y1: Array  # the state at t + h (meaningful only when accepted)
    accepted: Bool[Array, ""]
    h_next: Float[Array, ""]  # the step size to try next, after acceptance or rejection
    dense: Any  # the solver's dense-output coefficients on [t, t + h]
    state: Any  # the solver's state for the next attempt
    result: RESULTS


def rms_norm(x: Array, scale: Array) -> Array:
    """Root-mean-square norm of `x / scale`, as Hairer's codes measure errors."""
    return jnp.sqrt(jnp.mean((x / scale) ** 2))


def controller_factor(
    err: Array,
    h: Array,
    accepted_before: Array,
    h_accepted: Array,
    err_accepted: Array,
    *,
    exponent: float,
    safety: float | Array = 0.9,
    min_factor: float = 0.2,
    max_factor: float = 8.0,
) -> Array:
    r"""Gustafsson's predictive step-size controller, as in Hairer–Wanner's RADAU5.

    With $e$ the scaled error norm and $k$ = `exponent`, the plain proposal is
    $h_\mathrm{new} = h\,\mathrm{safety}\, e^{-k}$; after the first accepted step it is
    limited by the predictive estimate
    $h_\mathrm{new} = h\,\mathrm{safety}\,(h/h_\mathrm{acc})\,(e_\mathrm{acc}/e^2)^{k}$,
    taking the smaller. The ratio $h_\mathrm{new}/h$ is kept in `[min_factor, max_factor]`.
    """
    err = jnp.where(jnp.isfinite(err), jnp.maximum(err, 1e-10), jnp.inf)
    quot = jnp.clip(err**exponent / safety, 1 / max_factor, 1 / min_factor)
    gustafsson = (h_accepted / h) * (err**2 / err_accepted) ** exponent / safety
    gustafsson = jnp.clip(gustafsson, 1 / max_factor, 1 / min_factor)
    quot = jnp.where(accepted_before & (err <= 1), jnp.maximum(quot, gustafsson), quot)
    return 1 / quot


class AbstractStiffSolver(eqx.Module):
    """An adaptive one-step method for stiff problems, run by the shared time loop of `solve`.

    Subclasses implement `init`, `attempt` and `interpolate` on a flat state vector.
    """

    order: eqx.AbstractClassVar[int]
    error_order: eqx.AbstractClassVar[int]
    tolerance_exponent: ClassVar[float] = 1.0

    @abc.abstractmethod
    def init(self, vector_field: VectorField, t0: Array, y0: Array, tols: Tolerances) -> Any:
        """The solver's state before the first step."""

    @abc.abstractmethod
    def attempt(
        self,
        vector_field: VectorField,
        t: Array,
        y: Array,
        h: Array,
        state: Any,
        tols: Tolerances,
    ) -> Attempt:
        """Try one step from `(t, y)` of size `h`."""

    @abc.abstractmethod
    def counters(self, state: Any) -> dict[str, Array]:
        """The solver's own int32 counters (e.g. `num_jacobians`) from its final state."""

    @abc.abstractmethod
    def interpolate(self, dense: Any, t0: Array, h: Array, t: Array) -> Array:
        """The dense-output state at time `t` in `[t0, t0 + h]`."""

    def solve(
        self,
        vector_field: Callable[[Array, Array], Array],
        ts: ArrayLike,
        y0: ArrayLike,
        *,
        rtol: RealScalarLike = 1e-6,
        atol: RealScalarLike = 1e-9,
        dt0: RealScalarLike | None = None,
        max_steps: int = 16_384,
        adjoint: dfx.AbstractAdjoint | None = None,
    ) -> tuple[Array, RESULTS, dict[str, Array]]:
        r"""Solve $y' = f(t, y)$, $y(t_0) = y_0$, saving at `ts`.

        **Arguments:**

        - `vector_field`: `f(t, y) -> dy/dt` (parameters already closed over).
        - `ts`: increasing save times; `ts[0]` is the initial time $t_0$.
        - `y0`: the initial state (any shape; the solver works on it flattened).
        - `rtol`, `atol`: relative and absolute error tolerances.
        - `dt0`: the first step size; `None` picks one (Hairer–Nørsett–Wanner's estimate).
        - `max_steps`: the most step attempts (accepted or rejected) before giving up.
        - `adjoint`: `diffrax.RecursiveCheckpointAdjoint()` (the default: reverse mode with
          bounded memory through a checkpointed loop) or `diffrax.ForwardMode()` (forward
          mode: `jax.jvp`, `jax.jacfwd`).

        **Returns:**

        `(ys, result, stats)`: `ys` of shape `(len(ts), *y0.shape)` with `ys[0] == y0` and
        `inf` past a failure; `result` a [`simlab.RESULTS`][] status; `stats` a dict of
        int32 counters (`num_steps`, `num_accepted_steps`, `num_rejected_steps`, and the
        solver's own, e.g. `num_jacobians`, `num_lu`).
        """
        return _integrate(self, vector_field, ts, y0, rtol, atol, dt0, max_steps, adjoint)


def _loop_kinds(adjoint: Any) -> tuple[dict[str, Any], str]:
    if adjoint is None:
        adjoint = dfx.RecursiveCheckpointAdjoint()
    if isinstance(adjoint, dfx.ForwardMode):
        return dict(kind="lax"), "lax"
    if isinstance(adjoint, dfx.RecursiveCheckpointAdjoint):
        return dict(kind="checkpointed", checkpoints=adjoint.checkpoints), "bounded"
    raise ValueError(
        f"the stiff solvers differentiate with adjoint=diffrax.RecursiveCheckpointAdjoint() "
        f"(reverse mode) or diffrax.ForwardMode() (forward mode); got {adjoint!r}."
    )


def initial_step(
    vector_field: VectorField, t0: Array, y0: Array, f0: Array, tols: Tolerances, order: int
) -> Array:
    """Hairer–Nørsett–Wanner's starting step size (Solving ODEs I, II.4)."""
    scale = tols.atol + tols.rtol * jnp.abs(y0)
    d0 = rms_norm(y0, scale)
    d1 = rms_norm(f0, scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = vector_field(t0 + h0, y0 + h0 * f0)
    d2 = rms_norm(f1 - f0, scale) / h0
    big = jnp.maximum(d1, d2)
    h1 = jnp.where(big <= 1e-15, jnp.maximum(1e-6, h0 * 1e-3), (0.01 / big) ** (1 / (order + 1)))
    return jnp.minimum(100 * h0, h1)


class _Carry(eqx.Module):
    t: Array
    y: Array
    h: Array
    ys: Array
    num_steps: Array
    num_accepted: Array
    num_rejected: Array
    result: RESULTS
    state: Any


def _integrate(solver, vector_field, ts, y0, rtol, atol, dt0, max_steps, adjoint):
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer; got {max_steps!r}.")
    y0 = jnp.asarray(y0)
    # Integer states integrate in the default float type; float32 stays float32.
    dtype = y0.dtype if jnp.issubdtype(y0.dtype, jnp.inexact) else jnp.result_type(float)
    y0 = y0.astype(dtype)
    ts = jnp.asarray(ts, dtype=dtype)
    if ts.ndim != 1 or ts.shape[0] < 2:
        raise ValueError(f"ts must be a 1-D array of at least two times; got shape {ts.shape}.")
    shape = y0.shape

    def flat_field(t, y):
        return jnp.ravel(vector_field(t, y.reshape(shape))).astype(dtype)

    loop_kwargs, newton_kind = _loop_kinds(adjoint)
    power = solver.tolerance_exponent
    rtol_arr = jnp.asarray(rtol, dtype=dtype)
    atol_arr = jnp.asarray(atol, dtype=dtype)
    if power != 1.0:  # Hairer's RADAU5 tolerance transformation
        rtol_internal = 0.1 * rtol_arr**power
        atol_internal = atol_arr * rtol_internal / rtol_arr
    else:
        rtol_internal, atol_internal = rtol_arr, atol_arr
    tols = Tolerances(rtol_internal, atol_internal, newton_kind)
    t0, t1 = ts[0], ts[-1]
    y_flat = jnp.ravel(y0)
    state = solver.init(flat_field, t0, y_flat, tols)
    if dt0 is None:
        h0 = initial_step(flat_field, t0, y_flat, flat_field(t0, y_flat), tols, solver.order)
    else:
        h0 = jnp.asarray(dt0, dtype=dtype)
    h0 = jnp.minimum(h0, t1 - t0)
    ys = jnp.full((ts.shape[0], y_flat.shape[0]), jnp.inf, dtype=dtype).at[0].set(y_flat)
    zero = jnp.array(0, dtype=jnp.int32)
    carry = _Carry(t0, y_flat, h0, ys, zero, zero, zero, RESULTS.successful, state)

    def cond_fn(c):
        return (c.t < t1) & (c.num_steps < max_steps) & (c.result == RESULTS.successful)

    def body_fn(c):
        h = jnp.minimum(c.h, t1 - c.t)
        last = c.t + h >= t1
        att = solver.attempt(flat_field, c.t, c.y, h, c.state, tols)
        accepted = att.accepted & (att.result == RESULTS.successful)
        t_new = jnp.where(last, t1, c.t + h)
        fill = (ts > c.t) & (ts <= t_new) & accepted
        dense_ys = jax.vmap(lambda s: solver.interpolate(att.dense, c.t, h, s))(ts)
        dense_ys = dense_ys.at[-1].set(jnp.where(last, att.y1, dense_ys[-1]))
        ys = jnp.where(fill[:, None], dense_ys, c.ys)
        return _Carry(
            t=jnp.where(accepted, t_new, c.t),
            y=jnp.where(accepted, att.y1, c.y),
            h=jax.lax.stop_gradient(att.h_next),
            ys=ys,
            num_steps=c.num_steps + 1,
            num_accepted=c.num_accepted + accepted.astype(jnp.int32),
            num_rejected=c.num_rejected + (~accepted).astype(jnp.int32),
            result=att.result,
            state=att.state,
        )

    final = eqxi.while_loop(cond_fn, body_fn, carry, max_steps=max_steps, **loop_kwargs)
    result = RESULTS.where(
        (final.result == RESULTS.successful) & (final.t < t1),
        RESULTS.max_steps_reached,
        final.result,
    )
    stats = dict(
        num_steps=final.num_steps,
        num_accepted_steps=final.num_accepted,
        num_rejected_steps=final.num_rejected,
        **solver.counters(final.state),
    )
    return final.ys.reshape(ts.shape[0], *shape), result, stats
