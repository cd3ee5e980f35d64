"""The time loops shared by simlab's stiff solvers: adaptive steps, or fixed steps.

A stiff solver here is a final `eqx.Module` that knows how to *attempt* one step (and to
propose the next step size); this module owns everything else: the bounded while loop (so
that reverse mode works with bounded memory), stepping over the save times and filling them
from the solver's dense output (adaptive) or landing a step on each of them (fixed), the
step counters, and the status code.
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
from .._events import (
    advance_bracket,
    event_status,
    locate_on_path,
    start_bracket,
    stopped,
)
from .._loops import fixed_steps_per_interval, grid_slack
from ._consistent import consistent_initial_state

RealScalarLike = float | Real[ArrayLike, ""]

VectorField = Callable[[Array, Array], Array]
# Consistent initial values are solved this much tighter than the steps.
NEWTON_TOLERANCE = 1e-3
# Fixed steps: the Newton iterations' relative tolerance, in machine epsilons. RADAU5's
# stopping test then asks for an iterate within ~10 epsilons (its floor) of the solution.
FIXED_STEP_NEWTON_RTOL = 1e3


class Tolerances(NamedTuple):
    """Error tolerances, how inner iterations loop (static `newton_kind`), and whether the
    error estimate decides acceptance (static `adaptive`).

    With `adaptive=False` the time loop takes fixed steps: a solver then accepts every step
    it could compute (no error test) and reports a step it cannot compute, with no smaller
    step to fall back on, by its failure status.
    """

    rtol: Array
    atol: Array
    newton_kind: str
    adaptive: bool = True


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

    Subclasses implement `init`, `attempt` and `interpolate` on a flat state vector. Each
    takes a constant mass matrix `mass` (`None`: the identity), so that they solve
    $M y' = f(t, y)$; with one, `consistent_initialization` says whether the algebraic
    components of `y0` are solved for before the first step (`True`) or trusted as given.
    """

    consistent_initialization: bool = eqx.field(default=True, static=True, kw_only=True)

    order: eqx.AbstractClassVar[int]  # of the solution: its global error falls as h^order
    error_order: eqx.AbstractClassVar[int]  # local order of the error estimate, err ~ h^q
    tolerance_exponent: ClassVar[float] = 1.0

    @abc.abstractmethod
    def init(
        self,
        vector_field: VectorField,
        t0: Array,
        y0: Array,
        tols: Tolerances,
        mass: Array | None = None,
    ) -> Any:
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
        mass: Array | None = None,
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
        adaptive: bool = True,
        mass_matrix: ArrayLike | None = None,
    ) -> tuple[Array, RESULTS, dict[str, Array]]:
        r"""Solve $M y' = f(t, y)$, $y(t_0) = y_0$, saving at `ts`.

        **Arguments:**

        - `vector_field`: `f(t, y) -> dy/dt` (parameters already closed over).
        - `ts`: increasing save times; `ts[0]` is the initial time $t_0$.
        - `y0`: the initial state (any shape; the solver works on it flattened).
        - `rtol`, `atol`: relative and absolute error tolerances. With `adaptive=False`
          nothing controls the error, which is the method's at the step taken: Radau5's
          Newton iterations then solve each step close to roundoff whatever `rtol` (only
          `atol / rtol` counts, as the size below which a component is measured absolutely),
          and Rodas5P has none.
        - `dt0`: the first step size; `None` picks one (Hairer–Nørsett–Wanner's estimate).
          With `adaptive=False` the largest step (required): each save interval is cut into
          the fewest equal steps of at most `dt0`, so that a step ends on every save time.
        - `max_steps`: the most step attempts (accepted or rejected) before giving up; with
          `adaptive=False`, fixed steps that would number more stop before the first one
          with `RESULTS.max_steps_reached`.
        - `adjoint`: `diffrax.RecursiveCheckpointAdjoint()` (the default: reverse mode with
          bounded memory through a checkpointed loop) or `diffrax.ForwardMode()` (forward
          mode: `jax.jvp`, `jax.jacfwd`).
        - `adaptive`: control the step size by the error estimate (`True`), or take fixed
          steps (`False`): every step is accepted whatever its error estimate; a step that
          cannot be computed (a singular iteration matrix; in Radau5, Newton iterations
          that fail even with a fresh Jacobian) stops the solve with its status. A Newton
          failure on a reused Jacobian is retried once with a fresh one, as a rejected
          attempt.
        - `mass_matrix`: the constant mass matrix $M$ of a flat state, `(n, n)`; `None` is
          the identity. A singular $M$ makes the problem differential-algebraic (index 1).

        **Returns:**

        `(ys, result, stats)`: `ys` of shape `(len(ts), *y0.shape)` with `ys[0] == y0` (made
        consistent with a mass matrix) and `inf` past a failure; `result` a
        [`simlab.RESULTS`][] status; `stats` a dict of int32 counters (`num_steps`,
        `num_accepted_steps`, `num_rejected_steps`, and the solver's own, e.g.
        `num_jacobians`, `num_lu`); with a mass matrix also `initial_correction` (the change
        made to `y0`) and `initial_residual` (the largest residual of the algebraic equations
        at `ys[0]`).
        """
        mass = None if mass_matrix is None else jnp.asarray(mass_matrix)
        ys, result, stats, _, _ = integrate(
            self, vector_field, ts, y0, rtol, atol, dt0, max_steps, adjoint, adaptive, mass
        )
        return ys, result, stats


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
    """Hairer–Nørsett–Wanner's starting step size (Solving ODEs I, II.4); `vector_field`
    returns the derivative $y'$. Not differentiated, as no step size is: its derivative
    would add a spurious term to the solution's (2 % of a PEtab problem's gradient), and
    from a state at rest it is NaN (the square root of a zero norm)."""
    scale = tols.atol + tols.rtol * jnp.abs(y0)
    d0 = rms_norm(y0, scale)
    d1 = rms_norm(f0, scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = vector_field(t0 + h0, y0 + h0 * f0)
    d2 = rms_norm(f1 - f0, scale) / h0
    big = jnp.maximum(d1, d2)
    h1 = jnp.where(big <= 1e-15, jnp.maximum(1e-6, h0 * 1e-3), (0.01 / big) ** (1 / (order + 1)))
    return jax.lax.stop_gradient(jnp.minimum(100 * h0, h1))


def _internal_tolerances(solver, rtol: Array, atol: Array, newton_kind: str, adaptive: bool):
    """The tolerances the solver works to. Adaptive steps transform the user's as RADAU5
    does (`tolerance_exponent`). Fixed steps have no error to control: Newton iterations
    (Radau5's) solve each step close to roundoff, whatever `rtol`, so that the error is the
    method's; `atol / rtol` still says below what size a component counts as absolute."""
    if not adaptive:
        rtol_internal = jnp.asarray(FIXED_STEP_NEWTON_RTOL * jnp.finfo(rtol.dtype).eps, rtol.dtype)
    elif solver.tolerance_exponent != 1.0:  # Hairer's RADAU5 tolerance transformation
        rtol_internal = 0.1 * rtol**solver.tolerance_exponent
    else:
        return Tolerances(rtol, atol, newton_kind, adaptive)
    return Tolerances(rtol_internal, atol * rtol_internal / rtol, newton_kind, adaptive)


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
    interval: Array  # fixed steps: the save interval being stepped through
    step: Array  # fixed steps: the steps taken in it so far
    nonfinite_at: Array  # adaptive steps: where the latest step that gave NaN or inf started
    bracket: Any  # with an event: its `Bracket` (of the flat state), else None
    bracket_dense: Any  # with an event: the dense output of the bracketing step, else None


class _EventTracker(NamedTuple):
    """An event and its condition on the flat state, followed step by step."""

    event: Any
    value_fn: Callable[[Array, Array], Array]


def integrate(
    solver,
    vector_field,
    ts,
    y0,
    rtol,
    atol,
    dt0,
    max_steps,
    adjoint,
    adaptive,
    mass=None,
    event=None,
    args=None,
):
    """`solver.solve`'s `(ys, result, stats)`, the time where adaptive steps got stuck at
    NaN or inf (every step tried from there gave NaN or inf; `NaN` where they did not) and,
    with a `simlab.Event` (its condition called with `args`), its `(time, state)` (`NaN`
    where it never fired; else `None`). The event is located on the dense output of the
    step that brackets it. `mass` is the constant mass matrix of the flat state, or `None`
    (the identity)."""
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer; got {max_steps!r}.")
    if not adaptive and dt0 is None:
        raise ValueError("adaptive=False takes fixed steps of at most dt0: pass dt0=...")
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
    rtol_arr = jnp.asarray(rtol, dtype=dtype)
    atol_arr = jnp.asarray(atol, dtype=dtype)
    tols = _internal_tolerances(solver, rtol_arr, atol_arr, newton_kind, bool(adaptive))
    y_flat = jnp.ravel(y0)
    initial_stats = {}
    status = RESULTS.successful
    if mass is not None:
        mass = mass.astype(dtype)
        init = consistent_initial_state(
            flat_field,
            ts[0],
            y_flat,
            mass,
            jnp.maximum(rtol_arr * NEWTON_TOLERANCE, 100 * jnp.finfo(dtype).eps),
            atol_arr * NEWTON_TOLERANCE,
            solve=solver.consistent_initialization,
        )
        y_flat, status = init.y0, init.status
        initial_stats = dict(
            initial_correction=init.correction.reshape(shape), initial_residual=init.residual
        )
    state = solver.init(flat_field, ts[0], y_flat, tols, mass)
    ys = jnp.full((ts.shape[0], y_flat.shape[0]), jnp.inf, dtype=dtype).at[0].set(y_flat)
    zero = jnp.array(0, dtype=jnp.int32)
    nan = jnp.full((), jnp.nan, dtype)
    tracker, bracket, bracket_dense = None, None, None
    if event is not None:
        tracker = _EventTracker(
            event, lambda t, y: event.condition(t, y.reshape(shape), args).astype(dtype)
        )
        bracket = start_bracket(tracker.value_fn, ts[0], y_flat)
        bracket_dense = _dense_like(solver, flat_field, ts[0], y_flat, state, tols, mass)
    carry = _Carry(
        ts[0], y_flat, ts[0], ys, zero, zero, zero, status, state, zero, zero, nan,
        bracket, bracket_dense,
    )  # fmt: skip
    loop = _adaptive_loop if adaptive else _fixed_loop
    final, unfinished = loop(
        solver, flat_field, ts, dt0, tols, carry, max_steps, loop_kwargs, mass, tracker
    )
    if tracker is not None:
        unfinished = unfinished & ~stopped(event, final.bracket)
    stopped_short = (final.result == RESULTS.successful) & unfinished
    # Stopped where a step just gave NaN or inf, the loop was stuck there: steps short
    # enough to stay finite no longer advance t, and more steps would not help.
    stuck = stopped_short & (final.nonfinite_at == final.t)
    failure = RESULTS.where(stuck, RESULTS.nonfinite_state, RESULTS.max_steps_reached)
    result = RESULTS.where(stopped_short, failure, final.result)
    stats = dict(
        num_steps=final.num_steps,
        num_accepted_steps=final.num_accepted,
        num_rejected_steps=final.num_rejected,
        **solver.counters(final.state),
        **initial_stats,
    )
    ys = final.ys.reshape(ts.shape[0], *shape)
    found = None
    if tracker is not None:
        time, state = _located_event(solver, tracker, final.bracket, final.bracket_dense)
        result = event_status(final.bracket.undefined, result)
        found = (time, state.reshape(shape))
        if event.terminate:  # save times past the event are never reached
            ys = jnp.where((ts > time).reshape(-1, *(1,) * len(shape)), jnp.nan, ys)
    return ys, result, stats, jnp.where(stuck, final.t, nan), found


def _dense_like(solver, flat_field, t0, y, state, tols, mass):
    """Zeros shaped as one step's dense output: the bracketing step's before it is found."""
    shapes = jax.eval_shape(
        lambda: solver.attempt(flat_field, t0, y, jnp.ones_like(t0), state, tols, mass).dense
    )
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)


def _tracked(tracker, c: _Carry, accepted, t, h, att: Attempt) -> tuple[Any, Any]:
    """The event's bracket and bracketing step's dense output after a step attempt."""
    if tracker is None:
        return None, None
    bracket = advance_bracket(
        tracker.event, tracker.value_fn, c.bracket, accepted, t, c.y, h, att.y1
    )
    first = bracket.fired & ~c.bracket.fired
    dense = jax.tree.map(lambda new, old: jnp.where(first, new, old), att.dense, c.bracket_dense)
    return bracket, dense


def _running(tracker, c: _Carry) -> Array:
    """False once a terminating event has fired."""
    return jnp.asarray(True) if tracker is None else ~stopped(tracker.event, c.bracket)


def _located_event(solver, tracker, bracket, dense):
    """The event's time and flat state, found on the bracketing step's dense output (the
    solution's own derivative there is the path's: for a DAE it is not $f$)."""
    frozen_dense = jax.tree.map(jax.lax.stop_gradient, dense)
    frozen_t, frozen_h = jax.lax.stop_gradient(bracket.t), jax.lax.stop_gradient(bracket.h)

    def state_at(offset):
        return solver.interpolate(dense, bracket.t, bracket.h, bracket.t + offset)

    def frozen_state_at(offset):
        return solver.interpolate(frozen_dense, frozen_t, frozen_h, frozen_t + offset)

    def velocity(t, y):
        return jax.jvp(frozen_state_at, (t - frozen_t,), (jnp.ones_like(t),))[1]

    return locate_on_path(tracker.value_fn, state_at, frozen_state_at, velocity, bracket)


def _adaptive_loop(solver, flat_field, ts, dt0, tols, carry, max_steps, loop_kwargs, mass, tracker):
    """Steps chosen by the error estimate; save times filled from the dense output."""
    t0, t1 = ts[0], ts[-1]
    if dt0 is None:
        y0 = carry.y
        derivative = flat_field
        if mass is not None:  # y' where M determines it (least squares), for a step size
            pseudo_inverse = jnp.linalg.pinv(mass)

            def derivative(t, y):
                return pseudo_inverse @ flat_field(t, y)

        h0 = initial_step(derivative, t0, y0, derivative(t0, y0), tols, solver.order)
    else:
        h0 = jnp.asarray(dt0, dtype=ts.dtype)
    carry = eqx.tree_at(lambda c: c.h, carry, jnp.minimum(h0, t1 - t0))

    def cond_fn(c):
        running = (c.t < t1) & (c.num_steps < max_steps) & (c.result == RESULTS.successful)
        return running & _running(tracker, c)

    def body_fn(c):
        # A finished member of a vmapped batch runs the body too, its results discarded. A
        # step of zero from `t1` would give it NaN and, times the zero cotangent of the
        # discarded results, NaN derivatives: it keeps its last step size instead.
        h = jnp.where(c.t < t1, jnp.minimum(c.h, t1 - c.t), c.h)
        last = c.t + h >= t1
        att = solver.attempt(flat_field, c.t, c.y, h, c.state, tols, mass)
        accepted = att.accepted & (att.result == RESULTS.successful)
        t_new = jnp.where(last, t1, c.t + h)
        fill = (ts > c.t) & (ts <= t_new) & accepted
        dense_ys = jax.vmap(lambda s: solver.interpolate(att.dense, c.t, h, s))(ts)
        dense_ys = dense_ys.at[-1].set(jnp.where(last, att.y1, dense_ys[-1]))
        ys = jnp.where(fill[:, None], dense_ys, c.ys)
        bracket, bracket_dense = _tracked(tracker, c, accepted, c.t, h, att)
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
            interval=c.interval,
            step=c.step,
            nonfinite_at=jnp.where(jnp.all(jnp.isfinite(att.y1)), c.nonfinite_at, c.t),
            bracket=bracket,
            bracket_dense=bracket_dense,
        )

    final = eqxi.while_loop(cond_fn, body_fn, carry, max_steps=max_steps, **loop_kwargs)
    return final, final.t < t1


def _fixed_loop(solver, flat_field, ts, dt0, tols, carry, max_steps, loop_kwargs, mass, tracker):
    """Equal steps of at most `dt0` in each save interval, each accepted, one ending on every
    save time. More steps than `max_steps` in all stop the solve before the first."""
    dtype = ts.dtype
    if not isinstance(dt0, jax.core.Tracer) and not float(dt0) > 0:
        raise ValueError(f"dt0 must be a positive step; got {dt0!r}.")
    num_intervals = ts.shape[0] - 1
    counts = jnp.asarray(fixed_steps_per_interval(ts, dt0), dtype=jnp.int32)
    counts = jnp.broadcast_to(counts, (num_intervals,))
    # The float bound also catches counts past the int32 range, where the sum would wrap.
    at_least = (ts[-1] - ts[0]) / jnp.asarray(dt0, dtype) * (1 - grid_slack(dtype))
    fits = (jnp.sum(counts) <= max_steps) & (at_least <= max_steps)

    def cond_fn(c):
        running = (c.interval < num_intervals) & (c.result == RESULTS.successful)
        return running & (c.num_steps < max_steps) & fits & _running(tracker, c)

    def body_fn(c):
        i = jnp.minimum(c.interval, num_intervals - 1)
        t_start, t_end, num_steps = ts[i], ts[i + 1], counts[i]
        h = (t_end - t_start) / num_steps.astype(dtype)
        t = t_start + c.step.astype(dtype) * h
        last = c.step + 1 >= num_steps
        att = solver.attempt(flat_field, t, c.y, h, c.state, tols, mass)
        accepted = att.accepted & (att.result == RESULTS.successful)
        saved = jnp.where(accepted & last, att.y1, c.ys[i + 1])
        bracket, bracket_dense = _tracked(tracker, c, accepted, t, h, att)
        return _Carry(
            t=jnp.where(accepted, jnp.where(last, t_end, t + h), c.t),
            y=jnp.where(accepted, att.y1, c.y),
            h=h,
            ys=c.ys.at[i + 1].set(saved),
            num_steps=c.num_steps + 1,
            num_accepted=c.num_accepted + accepted.astype(jnp.int32),
            num_rejected=c.num_rejected + (~accepted).astype(jnp.int32),
            result=att.result,
            state=att.state,
            interval=jnp.where(accepted & last, c.interval + 1, c.interval),
            step=jnp.where(accepted, jnp.where(last, 0, c.step + 1), c.step),
            nonfinite_at=c.nonfinite_at,
            bracket=bracket,
            bracket_dense=bracket_dense,
        )

    final = eqxi.while_loop(cond_fn, body_fn, carry, max_steps=max_steps, **loop_kwargs)
    return final, final.interval < num_intervals
