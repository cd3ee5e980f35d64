"""Small helpers shared across simlab's packages."""

from typing import Any

import jax


def is_concrete(value: Any) -> bool:
    """False for a tracer (a value only known at run time under jit, vmap or grad)."""
    return not isinstance(value, jax.core.Tracer)
