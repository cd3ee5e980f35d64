"""Adaptive steps in the kernel integrator: a batch of adaptive explicit Runge–Kutta solves
in one Pallas kernel.

Each program steps a block of members laid along the vector lanes, as the fixed-step
kernel does (`_kernel`), and each member keeps its own time, step size, save slot and
counts, with the lean loop's rules (`_lean._solve_adaptive`): the same error norm and
I-controller, steps clipped to land on every save time, a non-finite candidate rejected.
A program attempts steps in rounds of `ATTEMPTS_A_ROUND`, masked per member, until none of
its members is unfinished; a member that lands on its next save time waits for the end of
the round, where its state is written to its save row.

The loop carry starts from loaded or computed tiles, never from constants: Mosaic lays a
constant-filled carry out replicated and cannot relayout the loop body's result back to
that ("Invalid relayout: Non-singleton logical dimension is replicated in destination but
not in source").
"""

import functools
from typing import Any, NamedTuple

import equinox as eqx
import jax.lax as lax
import jax.numpy as jnp
from jaxtyping import Array

from ._lean import _field, _initial_step, _weighted_sum, next_step_size
from ._solvers import error_order
from ._tiles import on_tiles

ATTEMPTS_A_ROUND = 8  # attempts between two tests of whether a program's members are done
# What a solve reports beside its states, in save row 0 after them.
OUTCOME = ("num_steps", "num_rejected", "finished", "nonfinite_time")


class _Carry(NamedTuple):
    t: Array
    y: Array
    f: Array
    h: Array
    slot: Array  # the next save time's index, as a float
    num_steps: Array
    num_rejected: Array
    nonfinite_at: Array  # where the latest non-finite attempt started (NaN: none did)


class AdaptiveEnsemble(eqx.Module):
    """A launch of adaptive solves, all static: the member's vector field `field(t, y,
    leaves)` on a flat state, the tableau, its error order and the most steps."""

    field: Any
    tableau: Any
    error_order: int
    max_steps: int

    def saved_components(self, size: int) -> int:
        return size + len(OUTCOME)

    def program(self, *refs, num_saves: int):
        return _adaptive_kernel(*refs, ensemble=self, num_saves=num_saves)


def runge_kutta_on_tiles(field, tableau, t, y, f0, h):
    """One explicit Runge–Kutta step on tiles (`h` a tile of steps): the new state, f
    there (the next step's first stage; a first-same-as-last tableau has it as its last
    stage) and the stages."""
    h_state = h[None]  # broadcast over the state's components
    stages = [f0]
    for c, a_row in zip(tableau.c, tableau.a_lower, strict=True):
        stages.append(field(t + float(c) * h, y + h_state * _weighted_sum(a_row, stages)))
    y1 = y + h_state * _weighted_sum(tableau.b_sol, stages)
    return y1, stages[-1] if tableau.fsal else field(t + h, y1), stages


def _stages(field, tableau, t, y, f0, h):
    """The new state, its error estimate and f at the end, on tiles."""
    y1, f1, stages = runge_kutta_on_tiles(field, tableau, t, y, f0, h)
    return y1, h[None] * _weighted_sum(tableau.b_error, stages), f1


def _adaptive_kernel(*refs, ensemble: AdaptiveEnsemble, num_saves: int):
    """One program: the members of one block to their last save time. `refs` are the save
    times `(num_saves, S, 128)`, the initial state `(n, S, 128)`, the first step, `rtol`
    and `atol` `(3, S, 128)`, the leaves `(*shape, S, 128)`, and last the output `(num_saves,
    n + len(OUTCOME), S, 128)`: the saved states (inf where never reached) and the outcome."""
    ts_ref, y0_ref, controls_ref, *leaf_refs, out_ref = refs
    leaves = [ref[...] for ref in leaf_refs]
    y0 = y0_ref[...]
    size = y0.shape[0]
    tiled = on_tiles(ensemble.field, y0[0], y0, leaves)

    def field(t, y):
        return tiled(t, y, leaves)

    ts = [ts_ref[k] for k in range(num_saves)]
    h0, rtol, atol = controls_ref[0], controls_ref[1], controls_ref[2]
    out_ref[0, :size] = y0
    for k in range(1, num_saves):
        out_ref[k, :size] = jnp.full(y0.shape, jnp.inf, y0.dtype)

    def attempt(slot: Array, target: Array, _, carry: _Carry) -> _Carry:
        # A member that landed on its save time this round waits for the round's end,
        # where its state is written (its steps are the same, only later).
        running = (carry.slot == slot) & (slot < num_saves) & (carry.num_steps < ensemble.max_steps)
        t, y, f, h = carry.t, carry.y, carry.f, carry.h
        clipped = h >= target - t
        h_step = jnp.where(clipped, target - t, h)
        y1, error, f1 = _stages(field, ensemble.tableau, t, y, f, h_step)
        scale = atol[None] + rtol[None] * jnp.maximum(jnp.abs(y), jnp.abs(y1))
        components = [jnp.square(error[i] / scale[i]) for i in range(size)]
        squared_error = sum(components[1:], components[0]) / size
        accept = running & (squared_error < 1)
        finite = jnp.isfinite(squared_error) | ~running
        h_next = next_step_size(
            squared_error, accept, finite, ensemble.error_order, h, h_step, clipped
        )
        t_next = jnp.where(accept, jnp.where(clipped, target, t + h_step), t)
        landed = accept & (t_next >= target)
        return _Carry(
            t=t_next,
            y=jnp.where(accept[None], y1, y),
            f=jnp.where(accept[None], f1, f),
            h=jnp.where(running, h_next, h),
            slot=carry.slot + landed.astype(slot.dtype),
            num_steps=carry.num_steps + running.astype(slot.dtype),
            num_rejected=carry.num_rejected + (running & ~accept).astype(slot.dtype),
            nonfinite_at=jnp.where(finite, carry.nonfinite_at, t_next),
        )

    def unfinished(carry: _Carry):
        running = (carry.slot < num_saves) & (carry.num_steps < ensemble.max_steps)
        return jnp.max(jnp.where(running, 1.0, 0.0)) > 0

    def round_of_attempts(carry: _Carry) -> _Carry:
        # The save time and the save rows once a round, not every attempt: 65,536 Van der
        # Pol members take 3.53 ms with 11 save times against 3.35 ms with 2 on a TPU v5e
        # (`tpu.txt` at 03866a1). Writing every row on every attempt took 4.12 against
        # 3.48 ms (at 32afc29), and holding landed states and writing them under a
        # `lax.cond` 5.07 and 4.95 ms (`tpu-adaptive-kernel.txt`).
        index = jnp.minimum(carry.slot, num_saves - 1)
        target = sum(jnp.where(index == k, ts[k], 0) for k in range(1, num_saves))
        attempts = functools.partial(attempt, carry.slot, target)
        final = lax.fori_loop(0, ATTEMPTS_A_ROUND, attempts, carry)
        landed = final.slot > carry.slot
        for k in range(1, num_saves):
            here = (landed & (index == k))[None]
            out_ref[k, :size] = jnp.where(here, final.y, out_ref[k, :size])
        return final

    zero = ts[0] - ts[0]  # a computed tile, not a constant (see the module's docstring)
    start = _Carry(ts[0], y0, field(ts[0], y0), h0, zero + 1, zero, zero, zero + jnp.nan)
    final = lax.while_loop(unfinished, round_of_attempts, start)
    finished = final.slot >= num_saves
    stuck = ~finished & (final.nonfinite_at == final.t)
    outcome = [
        final.num_steps,
        final.num_rejected,
        jnp.where(finished, 1.0, 0.0),
        jnp.where(stuck, final.t, jnp.nan),
    ]
    for i, value in enumerate(outcome):
        out_ref[0, size + i] = value


def first_step(model, args, solver, ts, y0, dt0, rtol, atol) -> Array:
    """`dt0`, or where it is `None` the lean loop's own first step (Hairer's rule)."""
    if dt0 is not None:
        return jnp.asarray(dt0, ts.dtype)

    def field(t, y):
        return _field(model, args, t, y)

    f0 = field(ts[0], y0)
    return _initial_step(field, ts[0], y0, f0, error_order(solver), rtol, atol).astype(ts.dtype)


def split_outcome(out: Array, size: int) -> tuple[Array, dict[str, Array]]:
    """The saved states `(num_saves, size)` and the outcome (`OUTCOME`) of a kernel output."""
    return out[:, :size], {name: out[0, size + i] for i, name in enumerate(OUTCOME)}
