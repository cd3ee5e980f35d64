"""Pallas stencil kernels: tiled, fused, differentiable in reverse mode.

Importing this package registers the Laplacian kernel as the `impl="pallas"` path of
`simlab.grid.laplacian` (and of every model built on it). Every kernel has a pure-jnp
`*_reference` that computes the same thing through XLA. On a CPU the kernels run in the
Pallas interpreter (`interpret=True`): correct, but not fast; on a GPU they compile
(Triton by default, `backend="mosaic_gpu"` to try Mosaic GPU).
"""

from collections.abc import Sequence

from jaxtyping import Array

from ..grid import register_pallas_kernel
from ._gray_scott import (
    gray_scott_kernel as gray_scott_kernel,
    gray_scott_tendency as gray_scott_tendency,
    gray_scott_tendency_reference as gray_scott_tendency_reference,
)
from ._laplacian import (
    laplacian2d as laplacian2d,
    laplacian2d_reference as laplacian2d_reference,
    laplacian3d as laplacian3d,
    laplacian3d_reference as laplacian3d_reference,
    laplacian_kernel as laplacian_kernel,
)
from ._pallas import BACKENDS as BACKENDS, is_forward_mode as is_forward_mode, laplacian_reference
from ._temporal import (
    gray_scott_steps as gray_scott_steps,
    gray_scott_steps_reference as gray_scott_steps_reference,
    heat_steps as heat_steps,
    heat_steps_reference as heat_steps_reference,
    temporal2d_kernel as temporal2d_kernel,
)
from ._tiling import (
    BLOCK_SHAPES as BLOCK_SHAPES,
    autotune_block_shape as autotune_block_shape,
    default_block_shape as default_block_shape,
)

_LAPLACIAN_KERNELS = {2: laplacian2d, 3: laplacian3d}


def laplacian_interior(padded: Array, spacing: Sequence[float], *, order: int = 2) -> Array:
    """The `impl="pallas"` path of `simlab.grid.laplacian_interior`, registered on import.

    2-D and 3-D fields take the tiled kernels; 1-D fields (no tile to reuse) and calls
    under forward-mode autodiff (`jax.jvp`, `jax.jacfwd`, which a custom VJP cannot serve)
    take the XLA reference, which computes the same values.

    Forward mode applied to an already traced loop (a `jax.jvp` of a `lax.scan` or a
    diffrax solve with `adjoint=diffrax.ForwardMode()`) cannot be seen from here and fails
    with JAX's "can't apply forward-mode autodiff (jvp) to a custom_vjp function": build
    such models with `impl="xla"`.

    **Arguments:**

    - `padded`: the field with `order // 2` ghost cells per side of each spatial axis.
    - `spacing`: one cell size per spatial axis (the trailing axes of `padded`).
    - `order`: 2 or 4.

    **Returns:** the Laplacian on the interior.

    !!! example

        ```python
        grid = simlab.Grid((32, 32), extent=1.0, boundary="neumann")
        simlab.grid.laplacian(field, grid, impl="pallas")  # calls this function
        ```
    """
    kernel = _LAPLACIAN_KERNELS.get(len(spacing))
    if kernel is None or is_forward_mode(padded):
        return laplacian_reference(padded, spacing, order=order)
    return kernel(padded, spacing, order=order)


def gray_scott_interior(
    padded: Array,
    spacing: Sequence[float],
    feed_rate: Array,
    kill_rate: Array,
    diffusivity_u: Array,
    diffusivity_v: Array,
) -> Array:
    """The `impl="pallas"` Gray–Scott vector field, registered on import: the fused kernel
    [`simlab.kernels.gray_scott_tendency`][], or its XLA reference under forward-mode
    autodiff (as for [`simlab.kernels.laplacian_interior`][]).

    `simlab.models.GrayScott` calls it for 2-D grids with scalar diffusivities.
    """
    coefficients = (feed_rate, kill_rate, diffusivity_u, diffusivity_v)
    if is_forward_mode(padded, *coefficients):
        return gray_scott_tendency_reference(padded, spacing, *coefficients)
    return gray_scott_tendency(padded, spacing, *coefficients)


register_pallas_kernel("laplacian", laplacian_interior)
register_pallas_kernel("gray_scott", gray_scott_interior)
