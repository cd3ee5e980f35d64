"""The lean integrator: explicit Runge–Kutta steps with nothing else in the loop.

`diffrax.diffeqsolve` is general (events, dense output, SDEs, checkpointed adjoints), and
under `jax.vmap` every step of that generality costs time: on XLA:CPU a vmapped solve of
small ODEs spends 30–80x longer per step than the arithmetic of the step itself (see
docs/performance.md). The integrator here keeps only what an explicit Runge–Kutta solve
needs: the stages, an embedded error estimate and an I-controller for adaptive steps, and
saving by landing steps exactly on the save times (so no interpolation). It is written for
one trajectory; `jax.vmap` batches it into the loop a hand-written ensemble code would use.
It reads the Butcher tableau of any Diffrax explicit Runge–Kutta solver, and `simulate`
takes it by default for every explicit Runge–Kutta solve.

Loops whose length is only known at run time (adaptive steps; fixed steps whose count
depends on traced times) are Equinox while loops: `loop_kind="checkpointed"` for reverse
mode with bounded memory (as Diffrax's `RecursiveCheckpointAdjoint`), `"lax"` for forward
mode.
"""

import functools as ft
import math
from collections.abc import Callable
from typing import Any

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._events import Event, advance_bracket, locate_event, start_bracket, stopped
from ._results import RESULTS
from ._solvers import error_order

# Diffrax's default PID controller settings, which the adaptive lean path reproduces.
SAFETY = 0.9
FACTOR_MIN = 0.2
FACTOR_MAX = 10.0
UNROLLED_NORM_SIZE = 16
STORED_STEPS_BUDGET = 2**28  # bytes of stored steps before reverse mode checkpoints


def grid_slack(dtype) -> float:
    """Relative tolerance for "this save time lies on the step grid": roundoff of `ts`."""
    return max(1e-9, 8 * float(jnp.finfo(dtype).eps))


def fixed_steps_per_interval(ts: Array, dt0: Any) -> Any:
    """How many equal steps of at most `dt0` each save interval takes.

    A Python int when every interval takes the same number (the scan length is then
    static, and reverse-mode autodiff works); otherwise an integer array, one per interval.
    A relative slack of `grid_slack` keeps `ts` on a grid of `dt0` from gaining a step to
    roundoff.
    """
    slack = grid_slack(ts.dtype)
    if isinstance(ts, jax.core.Tracer) or isinstance(dt0, jax.core.Tracer):
        return jnp.maximum(jnp.ceil(jnp.diff(ts) / dt0 * (1 - slack)), 1).astype(jnp.int32)
    # numpy on concrete values: jnp operations would be staged (traced) under an outer jit.
    ratio = np.diff(np.asarray(ts, dtype=np.float64)) / np.asarray(dt0, dtype=np.float64)
    counts = np.maximum(np.ceil(ratio * (1 - slack)), 1).astype(np.int32)
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


def checkpointed_loop(step, num_steps: int, state):
    """`lax.fori_loop(0, num_steps, step, state)` whose reverse mode stores ~2√n states.

    Plain reverse mode through a loop keeps every intermediate state: 10⁴ steps of a 256²
    field would hold gigabytes. Past `STORED_STEPS_BUDGET` bytes (per trajectory), blocks of
    √n steps are rematerialised during the backward pass instead, at the price of one more
    forward solve, as Diffrax's checkpointed adjoint does; below it, storing is faster.
    """
    state_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state))
    if num_steps * state_bytes <= STORED_STEPS_BUDGET:
        return lax.fori_loop(0, num_steps, step, state)
    block = max(1, math.isqrt(num_steps))
    num_blocks, remainder = divmod(num_steps, block)

    @jax.checkpoint
    def run_block(state, first):
        return lax.fori_loop(0, block, lambda j, s: step(first + j, s), state), None

    state, _ = lax.scan(run_block, state, jnp.arange(num_blocks) * block)
    done = num_blocks * block
    return lax.fori_loop(0, remainder, lambda j, s: step(done + j, s), state)


def _solve_fixed(
    vector_field, tableau, ts, y0, steps_per_interval, max_steps, loop_kind, tracker=None
):
    """Equal steps inside each save interval, landing exactly on every save time.

    With an event (`tracker = (event, value_fn)`), steps after a terminating event keep
    the state where it stopped; the caller locates the event in the returned bracket.
    """
    uniform = isinstance(steps_per_interval, int)

    def interval(carry, xs):
        t_start, t_end, num_steps = xs if not uniform else (*xs, steps_per_interval)
        h = (t_end - t_start) / jnp.asarray(num_steps, t_end.dtype)

        def step(i, state):
            y, f, bracket = state
            t = t_start + jnp.asarray(i, h.dtype) * h
            y1, _, f1 = _runge_kutta_step(vector_field, tableau, t, y, f, h)
            if tracker is None:
                return y1, f1, None
            event, value_fn = tracker
            running = ~stopped(event, bracket)
            bracket = advance_bracket(event, value_fn, bracket, running, t, y, h, y1)
            return jnp.where(running, y1, y), jnp.where(running, f1, f), bracket

        if uniform:
            carry = checkpointed_loop(step, num_steps, carry)
        else:
            carry = eqxi.while_loop(
                lambda state: state[0] < num_steps,
                lambda state: (state[0] + 1, *step(state[0], state[1:])),
                (jnp.asarray(0, jnp.int32), *carry),
                max_steps=max_steps,
                kind=loop_kind,
            )[1:]
        return carry, carry[0]

    xs = (ts[:-1], ts[1:]) if uniform else (ts[:-1], ts[1:], jnp.asarray(steps_per_interval))
    f0 = vector_field(ts[0], y0)
    bracket = None if tracker is None else start_bracket(tracker[1], ts[0], y0)
    (_, _, bracket), ys = lax.scan(interval, (y0, f0, bracket), xs)
    total = jnp.sum(jnp.asarray(steps_per_interval) * jnp.ones(ts.shape[0] - 1, jnp.int32))
    stats = {"num_steps": total, "num_accepted_steps": total, "num_rejected_steps": total * 0}
    return jnp.concatenate([y0[None], ys]), dfx.RESULTS.successful, stats, bracket


def _mean_square(x: Array) -> Array:
    if x.size <= UNROLLED_NORM_SIZE:
        # Under vmap a reduction over a handful of components is slow on XLA:CPU (a short
        # inner loop per trajectory); a sum of components fuses into one vectorised pass.
        components = [jnp.square(component) for component in x.reshape(-1)]
        return sum(components[1:], components[0]) / x.size
    return jnp.mean(jnp.square(x))


def _rms(x: Array) -> Array:
    return jnp.sqrt(_mean_square(x))


def _power(x: Array, exponent: float) -> Array:
    """`x ** exponent` for positive normal `x`, to a relative error below 1e-5.

    XLA:CPU evaluates `pow` (and `exp`, `log`) element by element, about 35 ns each in
    float64, which alone would cost more than a whole vectorised Runge–Kutta step of a
    small ODE. The step-size factor needs no more than a few digits, so this splits `x`
    into exponent and mantissa by reinterpreting its bits, takes log2 of the mantissa by
    the atanh series and 2**fraction by its Taylor series: vectorised arithmetic only.
    """
    info = jnp.finfo(x.dtype)
    int_dtype = jnp.int64 if info.bits == 64 else jnp.int32
    mantissa_bits, bias = info.nmant, info.maxexp - 1
    bits = lax.bitcast_convert_type(x, int_dtype)
    exponent_of_x = (bits >> mantissa_bits) - bias
    mantissa = lax.bitcast_convert_type(  # in [1, 2)
        (bits & ((1 << mantissa_bits) - 1)) | (bias << mantissa_bits), x.dtype
    )
    s = (mantissa - 1) / (mantissa + 1)
    s2 = s * s
    series = 1 + s2 * (1 / 3 + s2 * (1 / 5 + s2 * (1 / 7 + s2 / 9)))
    log2_x = exponent_of_x.astype(x.dtype) + (2 / _LN2) * s * series
    power_of_two = exponent * log2_x
    whole = jnp.floor(power_of_two)
    f = (power_of_two - whole) * _LN2
    taylor = 1 + f * (1 + f * (1 / 2 + f * (1 / 6 + f * (1 / 24 + f * (1 / 120 + f / 720)))))
    scale = lax.bitcast_convert_type((whole.astype(int_dtype) + bias) << mantissa_bits, x.dtype)
    return taylor * scale


_LN2 = float(np.log(2.0))


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


def _solve_adaptive(
    vector_field,
    tableau,
    error_order,
    ts,
    y0,
    dt0,
    rtol,
    atol,
    max_steps,
    loop_kind,
    tracker=None,
):
    """Per-trajectory adaptive steps (I-controller), clipped to land on every save time.

    The save intervals are an outer `scan` and the steps inside one an inner `while_loop`,
    so under `jax.vmap` only the small step state is batched in the loop (the saved states
    leave through the scan instead of being scattered into a buffer at every step). With
    an event (`tracker = (event, value_fn)`), every accepted step updates its bracket, and
    a terminating event ends the loop after the step that brackets it.
    """
    f0 = vector_field(ts[0], y0)
    if dt0 is None:
        h0 = _initial_step(vector_field, ts[0], y0, f0, error_order, rtol, atol)
    else:
        h0 = jnp.asarray(dt0, dtype=ts.dtype)
    zero = jnp.asarray(0, jnp.int32)

    def attempt(target, carry):
        t, y, f, h, num_steps, num_rejected, bracket = carry
        clipped = h >= target - t
        h_step = jnp.where(clipped, target - t, h)
        y1, error, f1 = _runge_kutta_step(vector_field, tableau, t, y, f, h_step)
        scale = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y1))
        # The squared RMS norm of the scaled error: its square root folds into the power.
        squared_error = lax.stop_gradient(_mean_square(error / scale))
        # A non-finite candidate (a blow-up) is rejected like a too-large error.
        accept = squared_error < 1
        # Clipping first keeps the power in range; the factor is clipped to [0.2, 10] anyway.
        info = jnp.finfo(squared_error.dtype)
        bounded_error = jnp.clip(squared_error, info.tiny, info.max)
        factor = jnp.where(
            jnp.isfinite(squared_error),
            SAFETY * _power(bounded_error, -0.5 / error_order),
            FACTOR_MIN,
        )
        factor = jnp.clip(
            factor, jnp.where(accept, 1.0, FACTOR_MIN), jnp.where(accept, FACTOR_MAX, SAFETY)
        )
        h_next = h_step * factor
        # A step shortened to hit a save time says little about the step size to use next.
        h_next = jnp.where(accept & clipped, jnp.maximum(h_next, h), h_next)
        if tracker is not None:
            event, value_fn = tracker
            bracket = advance_bracket(event, value_fn, bracket, accept, t, y, h_step, y1)
        return (
            jnp.where(accept, jnp.where(clipped, target, t + h_step), t),
            jnp.where(accept, y1, y),
            jnp.where(accept, f1, f),
            h_next.astype(h.dtype),
            num_steps + 1,
            num_rejected + (~accept).astype(num_rejected.dtype),
            bracket,
        )

    def interval(carry, target):
        def unfinished(carry):
            t, num_steps, bracket = carry[0], carry[4], carry[6]
            running = (t < target) & (num_steps < max_steps)
            return running if tracker is None else running & ~stopped(tracker[0], bracket)

        carry = eqxi.while_loop(
            unfinished, ft.partial(attempt, target), carry, max_steps=max_steps, kind=loop_kind
        )
        reached = carry[0] >= target
        return carry, jnp.where(reached, carry[1], jnp.inf)

    bracket = None if tracker is None else start_bracket(tracker[1], ts[0], y0)
    init = (ts[0], y0, f0, h0.astype(ts.dtype), zero, zero, bracket)
    (t_final, _, _, _, num_steps, num_rejected, bracket), ys = lax.scan(interval, init, ts[1:])
    unfinished = t_final < ts[-1]
    if tracker is not None:
        unfinished = unfinished & ~stopped(tracker[0], bracket)
    result = dfx.RESULTS.where(unfinished, dfx.RESULTS.max_steps_reached, dfx.RESULTS.successful)
    stats = {
        "num_steps": num_steps,
        "num_accepted_steps": num_steps - num_rejected,
        "num_rejected_steps": num_rejected,
    }
    return jnp.concatenate([y0[None], ys]), result, stats, bracket


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
    loop_kind: str,
    event: Event | None = None,
) -> tuple[Array, RESULTS, dict[str, Array], tuple[Array, Array] | None]:
    """Solves with the lean integrator; returns `(ys, result, stats, found)`.

    `(ys, result, stats)` are as `diffeqsolve` returns them; `found` is `None` without an
    event, else its `(time, state)` (`NaN` where it never fired). After a terminating
    event the save times past it hold `NaN`.

    Compiled once per model structure, solver, shapes, step layout and event: parameter
    values, `y0`, `ts`, `dt0` and the tolerances are traced, so changing them never
    recompiles. `loop_kind` is `"checkpointed"` (reverse-mode autodiff) or `"lax"`
    (forward mode).
    """

    def vector_field(t, y):
        # The state's dtype rules: float32 states stay float32 under float64 parameters.
        return jnp.asarray(model(t, y, args), dtype=y.dtype)

    tracker = None
    if event is not None:

        def value_fn(t, y):
            return event.condition(t, y, args)

        tracker = (event, value_fn)
    if adaptive:
        ys, result, stats, bracket = _solve_adaptive(
            vector_field,
            solver.tableau,
            error_order(solver),
            ts,
            y0,
            dt0,
            rtol,
            atol,
            max_steps,
            loop_kind,
            tracker,
        )
    else:
        ys, result, stats, bracket = _solve_fixed(
            vector_field, solver.tableau, ts, y0, steps_per_interval, max_steps, loop_kind, tracker
        )
    result, stats = RESULTS.promote(result), {**stats, "max_steps": jnp.asarray(max_steps)}
    if event is None:
        return ys, result, stats, None

    def step_fn(t, y, f, h):
        return _runge_kutta_step(vector_field, solver.tableau, t, y, f, h)[0]

    time, state = locate_event(value_fn, vector_field, step_fn, bracket)
    if event.terminate:
        after = (ts > time).reshape(-1, *(1,) * y0.ndim)
        ys = jnp.where(after, jnp.nan, ys)
    return ys, result, stats, (time, state)
