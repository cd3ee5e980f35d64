"""Small helpers shared across simlab's packages."""

from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike


def is_concrete(value: Any) -> bool:
    """False for a tracer (a value only known at run time under jit, vmap or grad)."""
    return not isinstance(value, jax.core.Tracer)


def as_float_array(value: ArrayLike) -> Array:
    """Converts a parameter to a floating-point array (integers would break `jax.grad`)."""
    dtype = jnp.asarray(value).dtype
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    return jnp.asarray(value, dtype=dtype)  # strongly typed, so batches and fits agree
