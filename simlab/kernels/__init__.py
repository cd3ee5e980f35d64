"""Pallas kernels, stencils and particle pairs: tiled, fused, differentiable in forward and
reverse mode.

Plain array code: every kernel takes arrays already padded with ghost cells (or, for the
multi-step kernels, a `pad_fn`), the grid spacing and static settings, and depends on
nothing else in simlab; `simlab.grid` calls [`simlab.kernels.laplacian`][] for
`impl="pallas"`. Every kernel has a pure-jnp `*_reference` that computes the same thing
through XLA. The platform a program is lowered for picks each launch's target and tiles:
on a CPU the Pallas interpreter (correct, but not fast); on an NVIDIA GPU Triton (or
Mosaic GPU with `backend="mosaic_gpu"`); on a TPU Mosaic. A program traced on a CPU
machine therefore exports for a GPU or TPU (see the kernels page).

Every kernel supports forward mode (`jax.jvp`, `jax.jacfwd`) and reverse mode
(`jax.grad`). The linear ones (the Laplacians, heat steps) are a primitive whose tangent
is the same kernel on the tangent and whose transpose is the same kernel on the
zero-padded cotangent; the nonlinear ones have a `jax.custom_jvp` whose tangent is their
linearisation, written with the Laplacian kernel, which JAX transposes for reverse mode.
"""

from ._cells import (
    CellGrid as CellGrid,
    Neighbours as Neighbours,
    cell_candidates as cell_candidates,
    cell_grid as cell_grid,
    cell_pair_forces as cell_pair_forces,
    neighbour_list as neighbour_list,
    neighbour_pair_forces as neighbour_pair_forces,
    neighbour_squared_distances as neighbour_squared_distances,
)
from ._flow import (
    mac_momentum as mac_momentum,
    mac_momentum_reference as mac_momentum_reference,
)
from ._laplacian import (
    laplacian as laplacian,
    laplacian2d as laplacian2d,
    laplacian2d_reference as laplacian2d_reference,
    laplacian3d as laplacian3d,
    laplacian3d_reference as laplacian3d_reference,
)
from ._pairs import (
    gravity_scale as gravity_scale,
    lennard_jones_scale as lennard_jones_scale,
    pair_forces as pair_forces,
    pair_forces_reference as pair_forces_reference,
)
from ._pallas import BACKENDS as BACKENDS
from ._reaction_diffusion import (
    reaction_diffusion as reaction_diffusion,
    reaction_diffusion_reference as reaction_diffusion_reference,
)
from ._stencils import (
    LAPLACIAN_WEIGHTS as LAPLACIAN_WEIGHTS,
    axis_weights as axis_weights,
    laplacian_from_shifts as laplacian_from_shifts,
    laplacian_reference as laplacian_reference,
)
from ._temporal import (
    heat_steps as heat_steps,
    heat_steps_reference as heat_steps_reference,
    reaction_diffusion_steps as reaction_diffusion_steps,
    reaction_diffusion_steps_reference as reaction_diffusion_steps_reference,
)
from ._tiling import (
    BLOCK_SHAPES as BLOCK_SHAPES,
    autotune_block_shape as autotune_block_shape,
    default_block_shape as default_block_shape,
)
