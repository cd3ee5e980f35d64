"""Brownian increments drawn from JAX keys, one step at a time, and the path they make.

Step `n` of a solve draws its increments from `jax.random.fold_in(key, n)`: a path depends
only on the key and the step grid, never on how members are batched, chunked or spread
over devices, and no path is stored unless asked for (`brownian_path`).
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._loops import fixed_steps_per_interval


class Increment(NamedTuple):
    """The Brownian increment over one step of length `h`, `dW ~ N(0, h)` per noise
    component, and its space-time Lévy area `H = (1/h) ∫ (W_s - s W_h / h) ds ~ N(0, h/12)`,
    independent of `dW` (used by the order-1.5 method for additive noise)."""

    dW: Array
    H: Array


def checked_key(key: Any) -> Array:
    """`key` as a typed JAX key (a legacy `uint32[2]` key is wrapped), or a clear error."""
    if isinstance(key, int | np.integer) and not isinstance(key, bool):
        raise TypeError(
            f"key must be a JAX key such as jax.random.key({key}); got the integer {key}."
        )
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(
                f"key must be one JAX key (shape ()), got keys of shape {key.shape}; for a "
                "batch of paths use jax.vmap over jax.random.split(key, n)."
            )
        return key
    if key.dtype == jnp.uint32 and key.shape == (2,):
        return jax.random.wrap_key_data(key)
    raise ValueError(
        f"key must be a JAX key such as jax.random.key(0); got an array of shape {key.shape} "
        f"and dtype {key.dtype}."
    )


def increment(key: Array, step: Any, h: Array, noise_shape: tuple[int, ...]) -> Increment:
    """The increments of step number `step` (an integer, traced or not), of length `h`."""
    step_key = jax.random.fold_in(key, step)
    key_w, key_h = jax.random.split(step_key)
    dtype = h.dtype
    dW = jnp.sqrt(h) * jax.random.normal(key_w, noise_shape, dtype)
    H = jnp.sqrt(h / 12) * jax.random.normal(key_h, noise_shape, dtype)
    return Increment(dW, H)


def brownian_path(key: Any, ts: Any, dt0: Any, noise_shape: tuple[int, ...] = ()) -> Array:
    """The Brownian motion $W$ at the save times `ts` that a fixed-step stochastic solve
    with the same `key`, `ts` and `dt0` drew (`W(ts[0]) = 0`), of shape
    `(len(ts), *noise_shape)`.

    Tests build exact solutions from it: geometric Brownian motion with `y0`, drift `mu`
    and volatility `sigma` is `y0 * exp((mu - sigma**2 / 2) * t + sigma * W(t))` on the
    very path the solver saw.

    !!! example

        ```python
        import jax
        import jax.numpy as jnp
        import simlab

        ts = jnp.linspace(0.0, 1.0, 5)
        W = simlab.integrate.brownian_path(jax.random.key(0), ts, 0.01, (2,))
        W.shape  # (5, 2)
        ```
    """
    key = checked_key(key)
    ts = jnp.asarray(ts)
    counts = np.broadcast_to(fixed_steps_per_interval(ts, dt0), (ts.shape[0] - 1,))
    total = int(np.sum(counts))
    # Every step at once: step n of the solve (numbered across intervals) has its
    # interval's length h; W at each save time sums the steps up to it.
    h = jnp.repeat(jnp.diff(ts) / jnp.asarray(counts, ts.dtype), counts, total_repeat_length=total)
    draws = jax.vmap(lambda n, h: increment(key, n, h, noise_shape).dW)(jnp.arange(total), h)
    W = jnp.cumsum(draws, axis=0)[np.cumsum(counts) - 1]
    return jnp.concatenate([jnp.zeros((1, *noise_shape), ts.dtype), W])
