"""The lean integrator: explicit Runge–Kutta steps with nothing else in the loop.

`diffrax.diffeqsolve` is general (events, dense output, SDEs, checkpointed adjoints), and
under `jax.vmap` every step of that generality costs time: on XLA:CPU a vmapped solve of
small ODEs spends 30–80x longer per step than the arithmetic of the step itself (see
docs/performance.md). The integrator here keeps only what an explicit Runge–Kutta solve
needs: the stages, an embedded error estimate and an I-controller for adaptive steps, and
saving by landing steps exactly on the save times (so no interpolation). It is written for
one trajectory; `jax.vmap` batches it into the loop a hand-written ensemble code would use,
except that a batch of solves of small states (and of states augmented with their
sensitivities) runs as one state with the members along its last axis (`_members_last`),
each member still in its own adaptive steps. It reads the Butcher tableau of any Diffrax explicit
Runge–Kutta solver, and `simulate` takes it by default for every explicit Runge–Kutta solve.

Derivatives: with up to `FORWARD_SENSITIVITY_LIMIT` differentiated scalars (parameters
and initial state, known statically from JAX's symbolic zeros) the state is augmented
with its sensitivities, which then ride in the same fused array operations as the
solution; `jax.jvp` and `jax.grad` both use them (reverse mode contracts the cotangent
with the stored Jacobian of the saved states), as forward mode beats reverse mode when
inputs are few. Otherwise derivatives go through the loop: equal steps run in a `scan`
(stored, or checkpointed past `STORED_STEPS_BUDGET`), and loops whose length is only known
at run time are Equinox while loops, `"checkpointed"` for reverse mode with bounded
memory (as Diffrax's `RecursiveCheckpointAdjoint`), `"lax"` for forward mode.
"""

import functools as ft
from collections.abc import Callable
from typing import Any, NamedTuple

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._results import RESULTS
from ._closures import with_closed_over_tracers_held
from ._events import (
    Event,
    advance_bracket,
    event_status,
    locate_event,
    start_bracket,
    stopped,
)
from ._interface import AbstractIntegrator, FoundEvent, Problem, Solution
from ._loops import STORED_STEPS_BUDGET, repeat_step
from ._solvers import error_order, is_lean_solver

# Diffrax's default PID controller settings, which the adaptive lean path reproduces.
SAFETY = 0.9
FACTOR_MIN = 0.2
FACTOR_MAX = 10.0
UNROLLED_NORM_SIZE = 16
FORWARD_SENSITIVITY_LIMIT = 16  # differentiated scalars up to which sensitivities ride along
MATERIALISED_STAGE_SIZE = 512  # elements of a traced state from which stage states are stored
MEMBERS_LAST_STATE_SIZE = 16  # elements per member up to which a vmapped solve runs members last


class LeanInputs(NamedTuple):
    """What one lean solve depends on: `differentiable()` are the inputs whose derivatives
    forward sensitivities carry; `ts`, `dt0` and the tolerances shape the steps."""

    model: Any
    args: Any
    y0: Array
    ts: Array
    dt0: Array | None
    rtol: Array
    atol: Array
    steps_per_interval: Any  # fixed steps: an int, or an int array per save interval

    def differentiable(self) -> tuple[Any, ...]:
        return self.model, self.args, self.y0

    def step_settings(self) -> tuple[Any, ...]:
        return self.ts, self.dt0, self.rtol, self.atol, self.steps_per_interval


class _FixedCarry(NamedTuple):
    y: Array
    f: Array  # f(t, y), the next step's first stage
    bracket: Any  # the event's bracket, or None


class _AdaptiveCarry(NamedTuple):
    t: Array
    y: Array
    f: Array
    h: Array  # the next step to try
    num_steps: Array
    num_rejected: Array
    bracket: Any
    nonfinite_at: Array  # where the latest step that gave NaN or inf started (NaN: none did)
    slot: Array  # the index of the next save time to reach
    saved: Array  # the states at ts[1:], written as each is reached
    held: Array | None  # dense saves: each member's latest landed state not yet written
    held_row: Array | None  # its row in `saved` (the spare row: none held)


class _Run(NamedTuple):
    """One lean solve: states at the save times, whether it finished (reached the last save
    time, or stopped at its terminating event), step counts, the event's bracket, and the
    time from which every step tried gave NaN or inf (adaptive steps: `NaN` where the solve
    never got stuck there). Fixed steps always finish and never get stuck: both are then
    `None`. `_status` gives the status from the two."""

    ys: Array
    finished: Array | None
    stats: dict[str, Array]
    bracket: Any
    nonfinite_time: Array | None


def _weighted_sum(weights: np.ndarray, stages: list[Array]) -> Array:
    # Skipping zero weights keeps them out of the compiled graph.
    terms = [float(w) * k for w, k in zip(weights, stages, strict=False) if w != 0]
    return sum(terms[1:], terms[0])


def _per_member(x: Any, y: Array) -> Any:
    """`x`, one value per member of a batch with its members along the last axis of `y`,
    shaped to broadcast against `y`; a scalar as it is."""
    if jnp.ndim(x) in (0, jnp.ndim(y)):
        return x
    return jnp.reshape(x, (*(1,) * (jnp.ndim(y) - 1), -1))


def _runge_kutta_step(vector_field, tableau, t, y, f0, h):
    """One explicit Runge–Kutta step: the new state, its error estimate, and f at the end.

    `f0 = f(t, y)` is carried between steps: first-same-as-last tableaus (Tsit5, Dopri5,
    Bosh3) evaluate f at the end point as their last stage, the others spend one extra
    evaluation there, which is the next step's first stage either way. `t` and `h` may be
    vectors, one per member of a batch along the last axis of `y`.
    """
    h_state = _per_member(h, y)
    stages = [f0]
    store = _stage_storer(f0) if y.size >= MATERIALISED_STAGE_SIZE else None
    for index, (c, a_row) in enumerate(zip(tableau.c, tableau.a_lower, strict=True)):
        state = y + h_state * _weighted_sum(a_row, stages)
        # The last stage of a first-same-as-last tableau is at y1, which is stored anyway.
        end_point = tableau.fsal and index == len(tableau.a_lower) - 1
        if store is not None and np.count_nonzero(a_row) > 1 and not end_point:
            state = store(state)
        stages.append(vector_field(t + float(c) * h, state))
    y1 = y + h_state * _weighted_sum(tableau.b_sol, stages)
    f1 = stages[-1] if tableau.fsal else vector_field(t + h, y1)
    if not np.any(tableau.b_error != 0):
        return y1, None, f1
    return y1, h_state * _weighted_sum(tableau.b_error, stages), f1


def _stage_storer(f0: Array) -> Callable[[Array], Array]:
    """A function that returns a stage's state unchanged, but makes XLA:CPU compute it once
    into memory.

    XLA:CPU fuses a stage's state (the state plus a weighted sum of earlier stages) into
    the right-hand side that reads it, and then recomputes it for every component that
    reads it: about three times over for a three-component system, with as many terms as
    earlier stages. On a large (batched) state that recomputation costs more than storing
    the stage once. XLA counts a division as expensive and does not fuse it into an
    operation that reads its elements more than once, so the state is divided by an array
    of ones that XLA cannot know to be ones (`0 * f0 + 1` is not folded for floats, and it
    is exact where `f0` is finite; where it is not, the step is not finite anyway).
    """
    ones = lax.stop_gradient(0.0 * f0) + 1.0
    return lambda state: state / ones


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

        def step(i, state: _FixedCarry) -> _FixedCarry:
            y, f, bracket = state
            t = t_start + jnp.asarray(i, h.dtype) * h
            y1, _, f1 = _runge_kutta_step(vector_field, tableau, t, y, f, h)
            if tracker is None:
                return _FixedCarry(y1, f1, None)
            event, value_fn = tracker
            running = ~stopped(event, bracket)
            bracket = advance_bracket(event, value_fn, bracket, running, t, y, h, y1)
            return _FixedCarry(jnp.where(running, y1, y), jnp.where(running, f1, f), bracket)

        carry = repeat_step(step, num_steps, carry, max_steps=max_steps, kind=loop_kind)
        return carry, carry.y

    xs = (ts[:-1], ts[1:]) if uniform else (ts[:-1], ts[1:], jnp.asarray(steps_per_interval))
    f0 = vector_field(ts[0], y0)
    bracket = None if tracker is None else start_bracket(tracker[1], ts[0], y0)
    final, ys = lax.scan(interval, _FixedCarry(y0, f0, bracket), xs)
    total = jnp.sum(jnp.asarray(steps_per_interval) * jnp.ones(ts.shape[0] - 1, jnp.int32))
    stats = {"num_steps": total, "num_accepted_steps": total, "num_rejected_steps": total * 0}
    ys = jnp.concatenate([y0[None], ys])
    return _Run(ys, None, stats, final.bracket, None)


def _mean_square(x: Array, scale: Array | float = 1.0, members_last: bool = False) -> Array:
    """The mean square of `x / scale`; with `members_last`, one per member of the last axis."""
    rows = x.reshape(-1, *x.shape[-1:]) if members_last else x.reshape(-1)
    scales = jnp.broadcast_to(scale, x.shape).reshape(rows.shape)
    if rows.shape[0] <= UNROLLED_NORM_SIZE:
        # Under vmap a reduction over a handful of components is slow on XLA:CPU (a short
        # inner loop per trajectory); a sum of components fuses into one vectorised pass.
        # Dividing component by component too spares a strided pass over the batched state.
        components = [jnp.square(c / s) for c, s in zip(rows, scales, strict=True)]
        return sum(components[1:], components[0]) / rows.shape[0]
    return jnp.mean(jnp.square(rows / scales), axis=0)


def _rms(x: Array) -> Array:
    return jnp.sqrt(_mean_square(x))


def next_step_size(squared_error, accept, finite, error_order, h, h_step, clipped) -> Array:
    """The I-controller: the step to try after an attempt of `h_step` (`h` before it was
    `clipped` to a save time) whose scaled error's mean square is `squared_error`, and
    which was accepted or not, its error `finite` or not."""
    # Clipping first keeps the power in range; the factor is clipped to [0.2, 10] anyway.
    info = jnp.finfo(squared_error.dtype)
    bounded_error = jnp.clip(squared_error, info.tiny, info.max)
    factor = jnp.where(finite, SAFETY * _power(bounded_error, -0.5 / error_order), FACTOR_MIN)
    factor = jnp.clip(
        factor, jnp.where(accept, 1.0, FACTOR_MIN), jnp.where(accept, FACTOR_MAX, SAFETY)
    )
    h_next = h_step * factor
    # A step shortened to hit a save time says little about the step size to use next.
    return jnp.where(accept & clipped, jnp.maximum(h_next, h), h_next)


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
    primal=None,
    members_last=False,
):
    """Per-trajectory adaptive steps (I-controller), clipped to land on every save time.

    One while loop runs the whole solve: each trajectory keeps its own time, step size and
    next save slot, and writes its state into the save buffer on the step that lands on
    that save time. Under `jax.vmap` a member therefore never waits for the others at a
    save time: the batch runs as many iterations as its longest member takes steps (a scan
    over save intervals of inner loops would run, per interval, as many as the slowest
    member takes there: three times as many for Van der Pol oscillators of stiffness 0.1
    to 10 with ten save intervals). The steps are those of a solve interval by interval:
    clipping a step to the next save time is kept, so each member's step sequence does not
    depend on the batch it runs in.

    The loop runs while any member is unfinished, and a finished member's attempts change
    nothing: its acceptance is false, its step size kept. Masking this way, in the step's
    own selects, costs less under `jax.vmap` than a batched loop condition, which selects
    every carried array again after each iteration. For the same reason every attempt
    writes its candidate state into the save buffer (an Equinox loop buffer, written in
    place and kept out of the checkpoints of reverse mode): into the slot it landed on, or
    else into a spare last row that is dropped at the end, rather than reading back the
    slot to keep it. (On a TPU, a members-last batch holds its landed states and writes
    them in batches: `_hold_landings`.) The state at the last save time is the final
    state, which needs no row: a solve saved at its end alone writes nothing in the loop.

    With an event (`tracker = (event, value_fn)`), every accepted step updates its
    bracket, and a terminating event ends the loop after the step that brackets it.
    `primal` picks the part of the state that the step-size controller measures (a state
    augmented with its sensitivities is stepped as its solution alone would be).

    With `members_last`, the loop runs a batch itself: the last axis of `y0` (and of
    `dt0`, `rtol` and `atol` where they vary) holds the members, every per-member scalar
    is a vector along it, and `vector_field(t, y)` takes the members' times `t` with the
    states. `dt0` is then required.
    """
    primal = (lambda y: y) if primal is None else primal
    members = y0.shape[-1:] if members_last else ()
    t0 = jnp.broadcast_to(ts[0], members)
    f0 = vector_field(t0, y0)
    if dt0 is None:
        h0 = _initial_step(vector_field, ts[0], y0, f0, error_order, rtol, atol)
    else:
        h0 = jnp.broadcast_to(jnp.asarray(dt0, dtype=ts.dtype), members)
    zero = jnp.zeros(members, jnp.int32)
    num_saves = ts.shape[0]

    def attempt(carry: _AdaptiveCarry) -> _AdaptiveCarry:
        t, y, f, h, num_steps, num_rejected, bracket, nonfinite_at, slot, saved, held, held_row = (
            carry
        )
        running = unfinished(carry)
        target = _save_time(ts, slot, dense_saves)
        clipped = h >= target - t
        h_step = jnp.where(clipped, target - t, h)
        y1, error, f1 = _runge_kutta_step(vector_field, tableau, t, y, f, h_step)
        magnitude = jnp.maximum(jnp.abs(primal(y)), jnp.abs(primal(y1)))
        scale = _per_member(atol, magnitude) + _per_member(rtol, magnitude) * magnitude
        # The squared RMS norm of the scaled error: its square root folds into the power.
        squared_error = lax.stop_gradient(_mean_square(primal(error), scale, members_last))
        # A non-finite candidate (a blow-up) is rejected like a too-large error.
        accept = running & (squared_error < 1)
        finite = jnp.isfinite(squared_error) | ~running
        h_next = next_step_size(squared_error, accept, finite, error_order, h, h_step, clipped)
        if tracker is not None:
            event, value_fn = tracker
            bracket = advance_bracket(event, value_fn, bracket, accept, t, y, h_step, y1)
        t_next = jnp.where(accept, jnp.where(clipped, target, t + h_step), t)
        # An unclipped step can reach the save time too, by roundoff.
        landed = accept & (t_next >= target)
        rows = jnp.where(landed, slot - 1, spare)
        if dense_saves and spare > 0:
            saved, held, held_row = _hold_landings(saved, held, held_row, rows, y1, spare)
        elif spare > 0:
            saved = _write_saves(saved, rows, y1, save_layout)
        return _AdaptiveCarry(
            t=t_next,
            y=jnp.where(_per_member(accept, y), y1, y),
            f=jnp.where(_per_member(accept, f), f1, f),
            h=jnp.where(running, h_next, h).astype(h.dtype),
            num_steps=num_steps + running.astype(num_steps.dtype),
            num_rejected=num_rejected + (running & ~accept).astype(num_rejected.dtype),
            bracket=bracket,
            # A step that gave NaN or inf is rejected, so `t_next` is `t`; reading `t_next`
            # spares a copy of the old `t` per iteration.
            nonfinite_at=jnp.where(finite, nonfinite_at, t_next),
            slot=slot + landed.astype(slot.dtype),
            saved=saved,
            held=held,
            held_row=held_row,
        )

    def unfinished(carry: _AdaptiveCarry):
        running = (carry.slot < num_saves) & (carry.num_steps < max_steps)
        return running if tracker is None else running & ~stopped(tracker[0], carry.bracket)

    def any_unfinished(carry: _AdaptiveCarry):
        return eqxi.unvmap_any(unfinished(carry))

    # Rows for the save times strictly inside the solve, and a spare last row that is
    # dropped: the state at the last save time is the final state.
    spare = num_saves - 2
    dense_saves = members_last and _scatters_are_slow()
    save_layout = "dense" if dense_saves else "members last" if members_last else "rows"
    bracket = None if tracker is None else start_bracket(tracker[1], ts[0], y0)
    init = _AdaptiveCarry(
        t=t0,
        y=y0,
        f=f0,
        h=h0.astype(ts.dtype),
        num_steps=zero,
        num_rejected=zero,
        bracket=bracket,
        nonfinite_at=jnp.full(members, jnp.nan, ts.dtype),
        slot=jnp.ones(members, jnp.int32),
        saved=jnp.zeros((spare + 1, *y0.shape), y0.dtype),
        held=jnp.zeros_like(y0) if dense_saves else None,
        held_row=jnp.full(members, spare, jnp.int32) if dense_saves else None,
    )
    final = eqxi.while_loop(
        any_unfinished,
        attempt,
        init,
        max_steps=max_steps,
        # Dense writes (members last, never differentiated in reverse) need no buffer.
        buffers=None if dense_saves else lambda carry: carry.saved,
        kind=loop_kind,
    )
    num_steps, num_rejected = final.num_steps, final.num_rejected
    stopped_short = final.slot < num_saves
    if tracker is not None:
        stopped_short = stopped_short & ~stopped(tracker[0], final.bracket)
    # A solve that stopped short where a step just gave NaN or inf got stuck there (steps
    # short enough to stay finite no longer advance t): more steps would not help.
    stuck = stopped_short & (final.nonfinite_at == final.t)
    nonfinite_time = jnp.where(stuck, final.t, jnp.nan)
    stats = {
        "num_steps": num_steps,
        "num_accepted_steps": num_steps - num_rejected,
        "num_rejected_steps": num_rejected,
    }
    # Save times the solve never reached hold inf.
    reached = jnp.arange(1, num_saves, dtype=final.slot.dtype).reshape(-1, *(1,) * y0.ndim)
    reached = reached < _per_member(final.slot, y0[None])
    saved = final.saved
    if dense_saves:
        saved = _write_saves(saved, final.held_row, final.held, save_layout)
    saved = jnp.concatenate([saved[:-1], final.y[None]])
    ys = jnp.concatenate([y0[None], jnp.where(reached, saved, jnp.inf)])
    return _Run(ys, ~stopped_short, stats, final.bracket, nonfinite_time)


def _scatters_are_slow() -> bool:
    """Whether the default device runs a gather or scatter with one index per member element
    by element. A TPU does: a batch of 65,536 adaptive Van der Pol solves with 11 save
    times took 3.0 s with scattered saves and 34 ms with the selects of `_write_saves`
    and `_save_time` (`benchmarks/results/tpu-probes.txt`, section `saves`)."""
    return jax.default_backend() == "tpu"


def _hold_landings(saved, held, held_row, rows, y, spare):
    """Dense saves, written in batches: `(saved, held, held_row)` after the members whose
    `rows` are not `spare` landed on their save times with states `y`.

    A select over every row of `saved` (`_write_saves`' dense layout) reads and writes the
    whole buffer, which for a few save times costs more than the step itself: 65,536 Van
    der Pol members with 11 save times took 1.35 times as long as with 2 on a TPU. So a
    landed state is held (one row per member) and the held states are written together,
    only when a member lands again while its previous state still waits. That happens
    about once in as many steps as the quickest member takes between two save times: 11
    save times then took 1.16-1.17 times as long as 2 (`tpu.txt`)."""
    landed = rows != spare
    must_write = jnp.any(landed & (held_row != spare))
    saved, held_row = lax.cond(
        must_write,
        lambda: (_write_saves(saved, held_row, held, "dense"), jnp.full_like(held_row, spare)),
        lambda: (saved, held_row),
    )
    held = jnp.where(_per_member(landed, held), y, held)
    return saved, held, jnp.where(landed, rows, held_row)


def _save_time(ts: Array, slot: Array, dense: bool) -> Array:
    """`ts[slot]`, the next save time of each member, clamped to the last; `dense`: by a
    select over the save times rather than a gather."""
    index = jnp.minimum(slot, ts.shape[0] - 1)
    if not dense:
        return ts[index]
    rows = jnp.arange(ts.shape[0], dtype=index.dtype).reshape(-1, *(1,) * index.ndim)
    return jnp.sum(jnp.where(rows == index[None], ts.reshape(rows.shape), 0), axis=0)


def _write_saves(saved: Any, rows: Array, y: Array, layout: str) -> Any:
    """`saved` with `y` written into row `rows` (along the first axis). `layout`:

    - `"rows"`: one trajectory, `saved` the loop's save buffer;
    - `"members last"`: member `m` of the last axis of `y` writes into its own row
      `rows[m]` of the buffer, by a scatter;
    - `"dense"`: the same into the array `saved`, by a select over all its rows, whose
      cost grows with the rows but not with a scatter's per-element work.
    """
    if layout == "rows":
        return saved.at[rows].set(y)
    if layout == "dense":
        row_ids = jnp.arange(saved.shape[0], dtype=rows.dtype).reshape(-1, *(1,) * y.ndim)
        return jnp.where(row_ids == _per_member(rows, y)[None], y[None], saved)
    members = jnp.arange(y.shape[-1])
    return saved.at[rows, ..., members].set(jnp.moveaxis(y, -1, 0))


def _status(finished: Array | None, nonfinite_time: Array | None) -> RESULTS:
    """The status of a lean solve: successful where it `finished` (always, where that is
    `None`), else stuck at NaN or inf (where it has a `nonfinite_time`) or out of steps."""
    if finished is None:
        return RESULTS.successful
    failure = RESULTS.max_steps_reached
    if nonfinite_time is not None:
        stuck = ~jnp.isnan(nonfinite_time)
        failure = RESULTS.where(stuck, RESULTS.nonfinite_state, failure)
    return RESULTS.where(finished, RESULTS.successful, failure)


def _field(model, args, t, y):
    # The state's dtype rules: float32 states stay float32 under float64 parameters.
    return jnp.asarray(model(t, y, args), dtype=y.dtype)


def _integrate(inputs, solver, *, adaptive, max_steps, loop_kind, tracker=None, members_last=False):
    """The lean solve of `inputs` (`LeanInputs`). With `members_last`, a `jax.vmap` batch of
    solves of small states without an event runs with its members along a trailing axis
    (`_members_last_solution`): for the primal of a custom derivative rule only, since
    autodiff through that path is forward mode over `"lax"` loops alone."""
    model, args, y0, ts, dt0, rtol, atol, steps_per_interval = inputs
    field = ft.partial(_field, model, args)
    if members_last and tracker is None and y0.size <= MEMBERS_LAST_STATE_SIZE:
        return _members_last_solution(
            inputs, solver, adaptive=adaptive, max_steps=max_steps, loop_kind=loop_kind
        )
    if adaptive:
        return _solve_adaptive(
            field,
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
    return _solve_fixed(
        field, solver.tableau, ts, y0, steps_per_interval, max_steps, loop_kind, tracker
    )


def _unit_tangents(leaves: list[Array]) -> list[Array]:
    """One unit tangent per scalar of `leaves`: for each leaf, shape `(n, *leaf.shape)`."""
    sizes = [leaf.size for leaf in leaves]
    identity = np.eye(sum(sizes))
    offsets = np.cumsum([0, *sizes])
    return [
        jnp.asarray(identity[:, start:stop].reshape(-1, *leaf.shape), leaf.dtype)
        for leaf, start, stop in zip(leaves, offsets[:-1], offsets[1:], strict=True)
    ]


def _integrate_with_sensitivities(inputs, perturbed, solver, *, adaptive, max_steps):
    r"""The solve and its forward sensitivities $S_k = \partial y / \partial \theta_k$ to each
    perturbed scalar $\theta_k$ of the model, `args` and `y0`, in one loop.

    The state is augmented to $(y, S_1, \dots, S_n)$, stacked along a new leading axis,
    with $\dot S_k = \partial_y f\, S_k + \partial_{\theta_k} f$ (a Jacobian-vector
    product of the vector field), so every Runge–Kutta stage updates the solution and its
    sensitivities in the same fused array operations instead of one pass per tangent. The
    steps are the solution's own (the controller measures only the solution), so the
    sensitivities are the derivatives of the discrete solve that `jax.jvp` through the
    loop gives.

    Returns `(ys, outcome, stats)` (as `_solution`) and the Jacobian, of shape
    `(len(ts), n, *y0.shape)`.
    """
    diff, nondiff = eqx.partition(inputs.differentiable(), perturbed.differentiable())
    leaves, treedef = jax.tree.flatten(diff)
    y0_tangents = jax.tree.unflatten(treedef, _unit_tangents(leaves))[2]
    y0 = inputs.y0
    if y0_tangents is None:
        y0_tangents = jnp.zeros((sum(leaf.size for leaf in leaves), *y0.shape), y0.dtype)
    state0 = jnp.concatenate([y0[None], y0_tangents])
    solve = _adaptive_members_last if adaptive else _fixed_members_last
    # Adaptive steps are those of the solution alone: the controller measures it only.
    measured = dict(primal=lambda y: y[0]) if adaptive else {}
    run = solve(
        inputs,
        diff[:2],
        nondiff[:2],
        state0,
        solver,
        max_steps=max_steps,
        loop_kind="lax",
        field_of=_sensitivity_field,
        **measured,
    )
    return (run.ys[:, 0], _outcome(run), run.stats), run.ys[:, 1:]


def _members_last_solution(inputs, solver, *, adaptive, max_steps, loop_kind):
    """The solve of a small state without an event, a `jax.vmap` batch of it with its
    members along a trailing axis."""
    params, rest = eqx.partition((inputs.model, inputs.args), eqx.is_array)
    solve = _adaptive_members_last if adaptive else _fixed_members_last
    return solve(
        inputs,
        params,
        rest,
        inputs.y0,
        solver,
        max_steps=max_steps,
        loop_kind=loop_kind,
        field_of=_model_field,
    )


def _adaptive_members_last(
    inputs, params, rest, state0, solver, *, max_steps, loop_kind, field_of, primal=None
):
    """`_solve_adaptive` of `state0` under the vector field `field_of(field, params,
    member_shapes)` (see `_members_last`), measured by its `primal` part. Each member of a
    `jax.vmap` batch keeps its own steps."""
    model, args, y0, ts, dt0, rtol, atol, _ = inputs
    if dt0 is None:
        # The solution's own first step (Diffrax's rule; not differentiated).
        solution_field = ft.partial(_field, model, args)
        dt0 = _initial_step(
            solution_field, ts[0], y0, solution_field(ts[0], y0), error_order(solver), rtol, atol
        )
    schedule = (ts, jnp.asarray(dt0, ts.dtype), rtol, atol)

    def solve(field, state0, schedule, members_last):
        ts, dt0, rtol, atol = schedule
        return _solve_adaptive(
            field,
            solver.tableau,
            error_order(solver),
            ts,
            state0,
            dt0,
            rtol,
            atol,
            max_steps,
            loop_kind,
            primal=primal,
            members_last=members_last,
        )

    return _members_last(
        params, rest, state0, schedule, solve, y0=y0, shared=(0,), field_of=field_of
    )


def _fixed_members_last(inputs, params, rest, state0, solver, *, max_steps, loop_kind, field_of):
    """`_solve_fixed` of `state0` under the vector field `field_of(field, params,
    member_shapes)` (see `_members_last`): the same steps for every member of a `jax.vmap`
    batch (unless their save times or step counts differ)."""
    steps = inputs.steps_per_interval
    schedule = (inputs.ts, None if isinstance(steps, int) else steps)

    def solve(field, state0, schedule, members_last):
        ts, steps_array = schedule
        return _solve_fixed(
            field,
            solver.tableau,
            ts,
            state0,
            steps if steps_array is None else steps_array,
            max_steps,
            loop_kind,
        )

    return _members_last(
        params,
        rest,
        state0,
        schedule,
        solve,
        y0=inputs.y0,
        shared=(0, 1),
        field_of=field_of,
        stats_from=(1,),
    )


def _members_last(params, rest, state0, schedule, solve, *, y0, shared, field_of, stats_from=None):
    """`solve(vector_field, state0, schedule, members_last)` (a `_Run`), where
    `vector_field = field_of(field, params, member_shapes)` is built on the model's own
    `field(t, params, y)` (the model and `args` are `params` and `rest` combined; `y0` is
    one member's initial state, as the model sees it). A
    `jax.vmap` batch runs as one state with the members along a trailing axis, unless it
    varies the entries `shared` of `schedule` (the save times, and for fixed steps the step
    counts), which must be the same for all. The solve's statistics depend on the entries
    `stats_from` of `schedule` alone (fixed steps: the step counts), or on every input
    (`None`).

    `jax.vmap` of the loop would put the members first, and XLA:CPU then keeps the loop's
    arrays member-major: each member's handful of components is a short stride that does
    not vectorise. With the members last every stage works on contiguous rows of members,
    and a large batch's stage states are stored once (`_stage_storer`) where the
    members-first layout recomputes them.
    """
    rest_arrays, rest_static = eqx.partition(rest, eqx.is_array)

    def member_field(p, r, t, y):
        model, args = eqx.combine(p, r, rest_static)
        return _field(model, args, t, y)

    # What the model closes over goes into the rule as its own leaves.
    member_field, _ = with_closed_over_tracers_held(
        member_field, params, rest_arrays, schedule[0][0], y0
    )
    field_arrays, field_static = eqx.partition(member_field, eqx.is_array)
    # Flat lists of arrays in and out of `custom_vmap`: its forward-mode rule cannot take
    # pytrees with `None` in them.
    leaves, tree = jax.tree.flatten((params, rest_arrays, field_arrays, state0, schedule))
    num_params = len(jax.tree.leaves(params))
    state_index = len(jax.tree.leaves((params, rest_arrays, field_arrays)))

    def run(leaves, member_axes=None):
        """`(ys, finished, nonfinite_time, stats)`; `member_axes[i]` is -1 where the
        members lie along the last axis of `leaves[i]` (and then of the state, always),
        `None` where the leaf is shared."""
        params, rest_arrays, field_arrays, state0, schedule = jax.tree.unflatten(tree, leaves)

        def member(arrays, p, r, t, y):
            return eqx.combine(arrays, field_static)(p, r, t, y)

        member_shapes = None
        if member_axes is not None:
            params_axes, rest_axes, field_axes, _, _ = jax.tree.unflatten(tree, member_axes)
            member_shapes = [
                () if a is None else state0.shape[-1:] for a in member_axes[:num_params]
            ]

        def field(t, p, y):
            if member_axes is None:
                return member(field_arrays, p, rest_arrays, t, y)
            # With adaptive steps each member has its own time: `t` is then a vector.
            time_axis = 0 if jnp.ndim(t) else None
            in_axes = (field_axes, params_axes, rest_axes, time_axis, -1)
            batched_field = jax.vmap(member, in_axes=in_axes, out_axes=-1)
            return batched_field(field_arrays, p, rest_arrays, t, y)

        solution = solve(
            field_of(field, params, member_shapes),
            state0,
            schedule,
            member_axes is not None,
        )
        return solution.ys, solution.finished, solution.nonfinite_time, solution.stats

    @jax.custom_batching.custom_vmap
    def solve_batched(leaves):
        return run(leaves)

    @solve_batched.def_vmap
    def solve_members_last(axis_size, in_batched, leaves):
        (batched,) = in_batched
        schedule_batched = jax.tree.unflatten(tree, batched)[4]
        # The derivative rule below batches `run` itself, and the two must agree on which
        # outputs vary by member: the state always, the rest unless they are shared stats.
        rest_vary = stats_from is None or any(
            jax.tree.leaves([schedule_batched[i] for i in stats_from])
        )
        if axis_size == 1:
            # A batch of one member (a `jax.vmap` over one initial state, say) is that
            # member's solve, which a `jax.vmap` around it then batches, members last.
            ys, *rest = solve_batched(
                [x[0] if b else x for x, b in zip(leaves, batched, strict=True)]
            )
            if rest_vary:
                rest = jax.tree.map(lambda x: x[None], rest)
            return (ys[None], *rest), (True, *jax.tree.map(lambda _: rest_vary, rest))
        if any(jax.tree.leaves([schedule_batched[i] for i in shared])):
            # Members with their own save times or step counts step apart.
            out_axes = (0, *(0 if rest_vary else None,) * 3)
            out = jax.vmap(run, in_axes=([0 if b else None for b in batched],), out_axes=out_axes)(
                leaves
            )
            return out, (True, *jax.tree.map(lambda _: rest_vary, out[1:]))
        leaves = [jnp.moveaxis(x, 0, -1) if b else x for x, b in zip(leaves, batched, strict=True)]
        if not batched[state_index]:
            state0 = leaves[state_index]
            leaves[state_index] = jnp.broadcast_to(state0[..., None], (*state0.shape, axis_size))
        out = run(leaves, [-1 if b else None for b in batched])
        ys, rest_of_out = jnp.moveaxis(out[0], -1, 0), out[1:]
        # Per-member outputs (adaptive steps) have the members along their only axis.
        rest_batched = jax.tree.map(lambda x: jnp.ndim(x) > 0, rest_of_out)
        return (ys, *rest_of_out), (True, *rest_batched)

    @jax.custom_jvp
    def solve_leaves(leaves):
        return solve_batched(leaves)

    @solve_leaves.defjvp
    def solve_jvp(primals, tangents):
        # Derivatives of the sensitivities (second order) batch members first.
        return jax.jvp(run, primals, tangents)

    ys, finished, nonfinite_time, stats = solve_leaves(leaves)
    return _Run(ys, finished, stats, None, nonfinite_time)


def _model_field(field, params, member_shapes=None):
    """The model's own vector field `(t, y)`, with `params` in it."""
    return lambda t, y: field(t, params, y)


def _sensitivity_field(field, params, member_shapes=None):
    r"""The vector field of the state augmented with its sensitivities, `(y, S_1, ...,
    S_n)`: the first sensitivities are those to the scalars of `params`, in the order of
    their leaves, the rest those to `y0`. `field(t, params, y)` is the vector field;
    `member_shapes[i]` is the trailing shape of leaf `i` along which members lie, if
    any (`None`: in none).

    $\partial_y f\, S_k$ for every $k$ is one vmapped `jax.jvp` in `y`, and
    $\partial_{\theta_k} f$ one `jax.jvp` per parameter scalar with the others held, so
    they stay symbolic zeros instead of multiplications by the zeros of a unit tangent.
    """
    leaves, treedef = jax.tree.flatten(params)
    if member_shapes is None:
        member_shapes = [()] * len(leaves)

    def with_scalar(index, element, scalar):
        """`params` with element `element` of leaf `index` (per member) set to `scalar`."""
        leaf, trailing = leaves[index], member_shapes[index]
        flat = leaf.reshape(-1, *trailing)
        flat = scalar[None] if flat.shape[0] == 1 else flat.at[element].set(scalar)
        new_leaves = [*leaves[:index], flat.reshape(leaf.shape), *leaves[index + 1 :]]
        return jax.tree.unflatten(treedef, new_leaves)

    scalars = [
        (index, element)
        for index, (leaf, trailing) in enumerate(zip(leaves, member_shapes, strict=True))
        for element in range(leaf.size // int(np.prod(trailing, dtype=int)))
    ]

    def augmented_field(t, state):
        y, sensitivities = state[0], state[1:]

        def field_of_y(z):
            return field(t, params, z)

        def column(index, element):
            scalar = leaves[index].reshape(-1, *member_shapes[index])[element]
            return jax.jvp(
                lambda x: field(t, with_scalar(index, element, x), y),
                (scalar,),
                (jnp.ones_like(scalar),),
            )[1]

        tangents = jax.vmap(lambda s: jax.jvp(field_of_y, (y,), (s,))[1])(sensitivities)
        if scalars:
            columns = jnp.stack([column(index, element) for index, element in scalars])
            tangents = jnp.concatenate(
                [tangents[: len(scalars)] + columns, tangents[len(scalars) :]]
            )
        return jnp.concatenate([field_of_y(y)[None], tangents])

    return augmented_field


def _sensitivities_fit(inputs, perturbed, event) -> bool:
    """Whether forward sensitivities give the derivatives of this solve, statically: no
    event, no perturbed `ts`, `dt0` or tolerances, at most `FORWARD_SENSITIVITY_LIMIT`
    perturbed scalars, and a Jacobian of the saved states within `STORED_STEPS_BUDGET`."""
    y0, ts = inputs.y0, inputs.ts
    if event is not None or any(jax.tree.leaves(perturbed.step_settings())):
        return False
    leaves = jax.tree.leaves(eqx.filter(inputs.differentiable(), perturbed.differentiable()))
    num_tangents = sum(leaf.size for leaf in leaves)
    jacobian_bytes = num_tangents * ts.shape[0] * y0.size * y0.dtype.itemsize
    return 0 < num_tangents <= FORWARD_SENSITIVITY_LIMIT and jacobian_bytes <= STORED_STEPS_BUDGET


def _jacobian_product(jacobian, perturbed_tangents):
    """`sum_k jacobian[:, k] * tangent_k` over the perturbed scalars, in their order."""
    flat = jnp.concatenate(
        [jnp.asarray(leaf, jacobian.dtype).reshape(-1) for leaf in perturbed_tangents]
    )
    # Full float32 products: a TPU's default (one bfloat16 pass) costs derivatives digits.
    return jnp.tensordot(flat, jnp.moveaxis(jacobian, 1, 0), axes=1, precision="highest")


@eqx.filter_custom_jvp
def _solve_forward(inputs, *, solver, adaptive, max_steps, loop_kind):
    """The lean solve (no event), differentiated in forward and reverse mode by forward
    sensitivities where `_sensitivities_fit`, else by JAX autodiff through the loop."""
    return _solution(
        inputs,
        solver,
        adaptive=adaptive,
        max_steps=max_steps,
        loop_kind=loop_kind,
        members_last=True,
    )


@_solve_forward.def_jvp
def _solve_forward_jvp(primals, tangents, *, solver, adaptive, max_steps, loop_kind):
    (inputs,), (input_tangents,) = primals, tangents
    perturbed = jax.tree.map(
        lambda x, t: t is not None, inputs, input_tangents, is_leaf=lambda x: x is None
    )
    if _sensitivities_fit(inputs, perturbed, None):
        out, jacobian = _integrate_with_sensitivities(
            inputs, perturbed, solver, adaptive=adaptive, max_steps=max_steps
        )
        tangent = _jacobian_product(jacobian, jax.tree.leaves(input_tangents.differentiable()))
        return out, (tangent, *_no_tangents(out[1:]))
    diff, nondiff = eqx.partition(inputs, perturbed)
    ys, tangent, aux = jax.jvp(
        lambda d: _split_ys(
            _solution(
                eqx.combine(d, nondiff),
                solver,
                adaptive=adaptive,
                max_steps=max_steps,
                loop_kind=loop_kind,
            )
        ),
        (diff,),
        (input_tangents,),
        has_aux=True,
    )
    return (ys, *aux), (tangent, *_no_tangents(aux))


def _no_tangents(tree):
    """Symbolic zero tangents (`None`) for every leaf of `tree` (status and counts)."""
    return jax.tree.map(lambda _: None, tree)


def _solution(inputs, solver, **settings):
    """`(ys, outcome, stats)` of the lean solve without an event, in JAX types only (as
    custom derivative rules return): `outcome` is `(finished, nonfinite_time)`, from which
    `_status` gives the status."""
    run = _integrate(inputs, solver, **settings)
    return run.ys, _outcome(run), run.stats


def _outcome(run: _Run) -> tuple[Array | None, Array | None]:
    return run.finished, run.nonfinite_time


def _split_ys(solution):
    ys, outcome, stats = solution
    return ys, (outcome, stats)


@eqx.filter_custom_vjp
def _solve_reverse(inputs, *, solver, adaptive, max_steps):
    """The lean solve (no event, checkpointed loops), differentiated in reverse mode by
    forward sensitivities where `_sensitivities_fit`, else through the checkpointed loop."""
    return _solution(
        inputs,
        solver,
        adaptive=adaptive,
        max_steps=max_steps,
        loop_kind="checkpointed",
        members_last=True,
    )


@_solve_reverse.def_fwd
def _solve_reverse_fwd(perturbed, inputs, *, solver, adaptive, max_steps):
    if _sensitivities_fit(inputs, perturbed, None):
        return _integrate_with_sensitivities(
            inputs, perturbed, solver, adaptive=adaptive, max_steps=max_steps
        )
    diff, nondiff = eqx.partition(inputs, perturbed)

    ys, vjp_fn, aux = jax.vjp(
        lambda d: _split_ys(
            _solution(
                eqx.combine(d, nondiff),
                solver,
                adaptive=adaptive,
                max_steps=max_steps,
                loop_kind="checkpointed",
            )
        ),
        diff,
        has_aux=True,
    )
    return (ys, *aux), vjp_fn


@_solve_reverse.def_bwd
def _solve_reverse_bwd(residuals, grads, perturbed, inputs, *, solver, adaptive, max_steps):
    cotangent = grads[0]
    if cotangent is None:
        return None
    if not _sensitivities_fit(inputs, perturbed, None):
        return residuals(cotangent)[0]
    jacobian = residuals
    other_axes = [0, *range(2, jacobian.ndim)]
    flat = jnp.tensordot(
        jnp.asarray(cotangent, jacobian.dtype),
        jacobian,
        axes=([0, *range(1, cotangent.ndim)], other_axes),
        precision="highest",
    )
    diff = eqx.filter(inputs, perturbed)
    leaves, treedef = jax.tree.flatten(diff)
    offsets = np.cumsum([0, *(leaf.size for leaf in leaves)])
    gradients = [
        jnp.asarray(flat[start:stop].reshape(leaf.shape), leaf.dtype)
        for leaf, start, stop in zip(leaves, offsets[:-1], offsets[1:], strict=True)
    ]
    return jax.tree.unflatten(treedef, gradients)


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
    derivatives: str = "auto",
    event: Event | None = None,
) -> tuple[Array, RESULTS, dict[str, Array], tuple[Array, Array] | None, Array | None]:
    """Solves with the lean integrator; returns `(ys, result, stats, found, nonfinite_time)`.

    `(ys, result, stats)` are as `diffeqsolve` returns them; `found` is `None` without an
    event, else its `(time, state)` (`NaN` where it never fired). After a terminating
    event the save times past it hold `NaN`. `nonfinite_time` is where adaptive steps got
    stuck at NaN or inf (status `nonfinite_state`; `NaN` otherwise, `None` for fixed steps).

    Compiled once per model structure, solver, shapes, step layout and event: parameter
    values, `y0`, `ts`, `dt0` and the tolerances are traced, so changing them never
    recompiles.

    `derivatives` says how the solve is differentiated:

    - `"auto"`: forward sensitivities (`_integrate_with_sensitivities`) for up to
      `FORWARD_SENSITIVITY_LIMIT` differentiated scalars, in forward and reverse mode
      alike (reverse mode then contracts the cotangent with the stored Jacobian); with
      more, reverse mode through the loop, which stores every step where
      `STORED_STEPS_BUDGET` allows and checkpoints otherwise. Which scalars are
      differentiated is static (JAX's symbolic zeros), so the choice is too.
    - `"forward"`: forward mode (`jax.jvp`, `jax.jacfwd`), by sensitivities as above or
      through `lax` loops.
    - `"reverse"`: reverse mode through the (checkpointed) loop, always.
    """
    inputs = LeanInputs(model, args, y0, ts, dt0, rtol, atol, steps_per_interval)
    settings = dict(solver=solver, adaptive=adaptive, max_steps=max_steps)
    if event is None and derivatives == "forward":
        ys, outcome, stats = _solve_forward(inputs, loop_kind="lax", **settings)
    elif event is None and derivatives == "auto" and isinstance(steps_per_interval, int):
        # Equal steps run in a scan, which both modes differentiate.
        ys, outcome, stats = _solve_forward(inputs, loop_kind="checkpointed", **settings)
    elif event is None and derivatives == "auto":
        ys, outcome, stats = _solve_reverse(inputs, **settings)
    else:
        return _solve_with_event(
            inputs,
            event,
            loop_kind="lax" if derivatives == "forward" else "checkpointed",
            **settings,
        )
    stats = {**stats, "max_steps": jnp.asarray(max_steps)}
    return ys, _status(*outcome), stats, None, outcome[1]


def _solve_with_event(inputs, event, *, solver, adaptive, max_steps, loop_kind):
    """The lean solve, differentiated through its loop, with or without an event."""
    model, args, y0, ts = inputs.model, inputs.args, inputs.y0, inputs.ts
    vector_field = ft.partial(_field, model, args)
    tracker = None
    if event is not None:

        def value_fn(t, y):
            return event.condition(t, y, args)

        tracker = (event, value_fn)
    ys, finished, stats, bracket, nonfinite_time = _integrate(
        inputs, solver, adaptive=adaptive, max_steps=max_steps, loop_kind=loop_kind, tracker=tracker
    )
    result = _status(finished, nonfinite_time)
    stats = {**stats, "max_steps": jnp.asarray(max_steps)}
    if event is None:
        return ys, result, stats, None, nonfinite_time

    def step_fn(t, y, f, h):
        return _runge_kutta_step(vector_field, solver.tableau, t, y, f, h)[0]

    time, state = locate_event(value_fn, vector_field, step_fn, bracket)
    result = event_status(bracket.undefined, result)
    if event.terminate:
        after = (ts > time).reshape(-1, *(1,) * y0.ndim)
        ys = jnp.where(after, jnp.nan, ys)
    return ys, result, stats, (time, state), nonfinite_time


# How the lean loop differentiates for each adjoint it runs (see `lean_solve`).
LEAN_DERIVATIVES = {None: "auto", "forward": "forward", "checkpoint": "reverse"}


class LeanIntegrator(AbstractIntegrator):
    """The lean loop: every explicit Runge–Kutta tableau, fixed or adaptive steps, events;
    differentiated by forward sensitivities or through the loop (`lean_solve`)."""

    name = "lean"
    runs = "explicit Runge-Kutta solvers ('tsit5', 'dopri5', 'rk4', ...)"
    events = True
    adjoints = tuple(LEAN_DERIVATIVES)

    def accepts_solver(self, solver: Any) -> bool:
        return is_lean_solver(solver)

    def solve(self, problem: Problem) -> Solution:
        fixed = None if problem.adaptive else problem.steps_per_interval()
        ys, status, stats, found, nonfinite_time = lean_solve(
            problem.model,
            problem.solver,
            problem.ts,
            problem.y0,
            problem.args,
            adaptive=problem.adaptive,
            steps_per_interval=fixed,
            dt0=problem.dt0,
            rtol=problem.rtol,
            atol=problem.atol,
            max_steps=problem.max_steps,
            derivatives=LEAN_DERIVATIVES[problem.adjoint],
            event=problem.event,
        )
        found = None if found is None else FoundEvent(*found)
        return Solution(ys, status, stats, found, nonfinite_time)
