"""Loop helpers shared by the fixed-step integrators: step counts that land on every save
time, and a loop whose reverse mode stores about 2√n states."""

import math
from typing import Any

import equinox.internal as eqxi
import jax
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike

STORED_STEPS_BUDGET = 2**28  # bytes of stored steps before reverse mode checkpoints


def grid_slack(dtype) -> float:
    """Relative tolerance for "this save time lies on the step grid": roundoff of `ts`."""
    return max(1e-9, 8 * float(jnp.finfo(dtype).eps))


def fixed_steps_per_interval(ts: ArrayLike, dt0: Any) -> Any:
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


def repeat_step(step, num_steps: Any, state, *, max_steps: int, kind: str):
    """`state` after `num_steps` calls of `step(i, state)`.

    A static count (a Python int) runs `checkpointed_loop`; a count known only at run time
    (traced `ts` or `dt0`) an Equinox while loop bounded by `max_steps`, `kind="checkpointed"`
    for reverse mode with bounded memory, `"lax"` for forward mode.
    """
    if isinstance(num_steps, int):
        return checkpointed_loop(step, num_steps, state)
    _, state = eqxi.while_loop(
        lambda counted: counted[0] < num_steps,
        lambda counted: (counted[0] + 1, step(*counted)),
        (jnp.asarray(0, jnp.int32), state),
        max_steps=max_steps,
        kind=kind,
    )
    return state
