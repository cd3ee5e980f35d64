r"""Preconditioned conjugate gradients through Lineax, matrix-free, for the pressure Poisson
equation where fast transforms do not diagonalise the Laplacian (an outlet held at $p = 0$
next to walls with zero normal derivative).

The solve is scaled so that the source's largest value is 1, and stops when every
residual and every update is below `relative_tolerance(dtype)` of that scale: the
divergence left after a projection is then that fraction of the divergence removed.
Lineax differentiates the solve in both modes (by further solves with the same operator).
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
from jaxtyping import Array

# Residuals below this many ulps of the source's scale count as converged: far below any
# discretisation error, and reached (measured) on grids up to 128 x 64 in float32 and
# float64 alike before the roundoff of the 5-point Laplacian stalls conjugate gradients.
_TOLERANCE_ULPS = 100


def relative_tolerance(dtype) -> float:
    """The solve's tolerance relative to the source's largest value: 100 ulps
    (2.2e-14 in float64, 1.2e-5 in float32)."""
    return _TOLERANCE_ULPS * float(np.finfo(dtype).eps)


def conjugate_gradient(
    operator: Callable[[Array], Array],
    preconditioner: Callable[[Array], Array] | None,
    source: Array,
) -> tuple[Array, Array]:
    r"""Solves $A x = b$ for a symmetric positive definite $A$ given as a function, by
    conjugate gradients preconditioned with $M \approx A^{-1}$ (also symmetric positive
    definite; `None` for none).

    **Returns:** `(x, iterations)`.

    !!! example

        ```python
        x, steps = conjugate_gradient(lambda x: 2.0 * x, None, jnp.ones(4))  # 0.5, 1 step
        ```
    """
    structure = jax.ShapeDtypeStruct(source.shape, source.dtype)
    tags = (lx.symmetric_tag, lx.positive_semidefinite_tag)
    # Scaled to a unit source so that the tolerances are relative; stop_gradient keeps
    # the derivative that of the linear solve alone.
    scale = jax.lax.stop_gradient(jnp.max(jnp.abs(source)))
    scale = jnp.where(scale > 0, scale, 1.0)
    tolerance = relative_tolerance(source.dtype)
    options = {}
    if preconditioner is not None:
        options["preconditioner"] = lx.FunctionLinearOperator(preconditioner, structure, tags)
    solution = lx.linear_solve(
        lx.FunctionLinearOperator(operator, structure, tags),
        source / scale,
        lx.CG(rtol=tolerance, atol=tolerance, max_steps=4 * source.size),
        options=options,
        throw=False,
    )
    return solution.value * scale, solution.stats["num_steps"]
