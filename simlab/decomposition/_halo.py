"""Halo exchange as a boundary condition, and the grid of one block of a decomposed domain.

A block's ghost cells on a side facing another block are that neighbour's edge cells;
`HaloExchange` fetches them with `jax.lax.ppermute` inside `jax.shard_map`. Because it is
an ordinary boundary condition, `simlab.grid.pad` and every stencil operator run on a block
unchanged, with the same `*_interior` code (XLA or Pallas) as on one device.
"""

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from ..grid import AbstractBoundaryCondition, Grid, Periodic
from ..grid._grid import MIN_POINTS_PER_AXIS


def _edge(field, axis: int, side: str, width: int):
    """The `width` cells of `field` nearest `side` of `axis`, in array order."""
    size = field.shape[axis]
    start = 0 if side == "low" else size - width
    return jax.lax.slice_in_dim(field, start, start + width, axis=axis)


class HaloExchange(AbstractBoundaryCondition):
    r"""Ghost cells from the neighbouring block along a mesh axis, inside `jax.shard_map`.

    Block $i$ of $n$ along the mesh axis receives, for its low side, the high edge of block
    $i - 1$ and, for its high side, the low edge of block $i + 1$ (one `ppermute` each). On
    the sides of the global domain the grid's own condition `boundary` fills the ghost
    cells, except for a periodic axis, where block $0$ and block $n - 1$ are neighbours.

    Called by `simlab.grid.pad` axis after axis on a field already padded along earlier
    axes, so the corner ghost cells are exchanged too.

    **Arguments:**

    - `axis_name`: the mesh axis the grid axis is split over.
    - `num_blocks`: the number of devices along that mesh axis.
    - `boundary`: the condition of the global domain on this side.

    !!! example

        ```python
        # Inside jax.shard_map over a mesh with axis "x" of size 4:
        grid = simlab.decomposition.block_grid(global_grid, mesh)
        simlab.grid.laplacian(block, grid)  # ghost cells by halo exchange
        ```
    """

    axis_name: str = eqx.field(static=True)
    num_blocks: int = eqx.field(static=True)
    boundary: AbstractBoundaryCondition  # its values are leaves, like any condition's

    def __check_init__(self):
        if not isinstance(self.boundary, AbstractBoundaryCondition):
            raise TypeError(
                f"HaloExchange: boundary must be a boundary condition such as "
                f"simlab.Periodic(); got {self.boundary!r}."
            )
        if not isinstance(self.num_blocks, int) or self.num_blocks < 1:
            raise ValueError(
                f"HaloExchange: num_blocks must be a positive integer; got {self.num_blocks!r}."
            )

    def ghost_cells(self, field, axis, side, width, spacing):
        # My low ghosts are the high edge of the block below: every block sends its high
        # edge one block up (and its low edge one block down for the high ghosts).
        sent = _edge(field, axis, "high" if side == "low" else "low", width)
        step = 1 if side == "low" else -1
        periodic = isinstance(self.boundary, Periodic)
        pairs = [
            (source, (source + step) % self.num_blocks)
            for source in range(self.num_blocks)
            if periodic or 0 <= source + step < self.num_blocks
        ]
        received = jax.lax.ppermute(sent, self.axis_name, pairs)
        if periodic:
            return received
        outermost_block = 0 if side == "low" else self.num_blocks - 1
        on_global_side = jax.lax.axis_index(self.axis_name) == outermost_block
        own = self.boundary.ghost_cells(field, axis, side, width, spacing).astype(field.dtype)
        return jnp.where(on_global_side, own, received)


def checked_mesh_axes(
    grid: Grid, mesh: Mesh, mesh_axes: Sequence[str | None] | None
) -> tuple[str | None, ...]:
    """The mesh axis splitting each grid axis (`None`: not split), checked against the grid.

    `None` assigns the mesh's axes to the leading grid axes in order.
    """
    if not isinstance(mesh, Mesh):
        raise TypeError(
            f"mesh must be a jax.sharding.Mesh (see simlab.decomposition.decomposition_mesh); "
            f"got {type(mesh).__name__}."
        )
    names = tuple(mesh.axis_names)
    if mesh_axes is None:
        if len(names) > grid.ndim:
            raise ValueError(
                f"a mesh with {len(names)} axes {names} cannot split a {grid.ndim}-D grid; "
                f"use a mesh with at most {grid.ndim} axes, or pass mesh_axes=..."
            )
        mesh_axes = names + (None,) * (grid.ndim - len(names))
    mesh_axes = tuple(mesh_axes)
    if len(mesh_axes) != grid.ndim:
        raise ValueError(
            f"mesh_axes needs one entry per grid axis ({grid.ndim}), each a mesh axis name or "
            f"None; got {mesh_axes!r}."
        )
    used = [name for name in mesh_axes if name is not None]
    unknown = [name for name in used if name not in names]
    if unknown or len(set(used)) != len(used):
        raise ValueError(
            f"mesh_axes must name distinct axes of the mesh {names} (or None); got {mesh_axes!r}."
        )
    for axis, name in enumerate(mesh_axes):
        if name is not None:
            _check_divisible(grid.shape[axis], mesh.shape[name], axis, name)
    return mesh_axes


def slab_axis(mesh: Mesh, axis: str | None, owner: str) -> str:
    """The mesh axis that slabs are split over: `axis`, or the mesh's only axis."""
    if axis is not None:
        return axis
    if not isinstance(mesh, Mesh) or len(mesh.axis_names) != 1:
        names = getattr(mesh, "axis_names", mesh)
        raise ValueError(
            f"{owner}: the mesh has axes {names}; pass axis= to name the one the slabs are "
            "split over."
        )
    return mesh.axis_names[0]


def _check_divisible(num_cells: int, num_blocks: int, axis: int, name: str) -> None:
    if num_cells % num_blocks != 0:
        below = num_cells - num_cells % num_blocks
        raise ValueError(
            f"grid axis {axis} has {num_cells} cells, which do not divide evenly over the "
            f"{num_blocks} devices of mesh axis {name!r}; use a multiple of {num_blocks} "
            f"cells (e.g. {below or num_blocks} or {below + num_blocks})."
        )
    if num_cells // num_blocks < MIN_POINTS_PER_AXIS:
        raise ValueError(
            f"grid axis {axis} has {num_cells} cells, only {num_cells // num_blocks} per device "
            f"over the {num_blocks} devices of mesh axis {name!r}; each block needs at least "
            f"{MIN_POINTS_PER_AXIS} cells (at least {MIN_POINTS_PER_AXIS * num_blocks} in all)."
        )


def block_grid(grid: Grid, mesh: Mesh, *, mesh_axes: Sequence[str | None] | None = None) -> Grid:
    """The grid of one device's block: the same spacing, the block's shape, and
    [`simlab.decomposition.HaloExchange`][] on every side that faces a split.

    Use it inside `jax.shard_map` over `mesh`, where each device holds one block: any
    `simlab.grid` operator on the block then exchanges halos with its neighbours.

    **Arguments:**

    - `grid`: the global `simlab.Grid`.
    - `mesh`: the device mesh.
    - `mesh_axes`: the mesh axis splitting each grid axis, or `None` for an unsplit axis;
      default: the mesh's axes split the leading grid axes, in order.

    **Returns:** a `simlab.Grid` of shape `grid.shape` divided by the mesh shape. It is
    the same on every device, so it keeps the global origin: its `coordinates()` are not
    the block's (take those from the global grid).

    !!! example

        ```python
        mesh = simlab.decomposition.decomposition_mesh((2, 2))
        grid = simlab.Grid((64, 64), extent=1.0)
        simlab.decomposition.block_grid(grid, mesh).shape  # (32, 32)
        ```
    """
    mesh_axes = checked_mesh_axes(grid, mesh, mesh_axes)
    shape, boundaries = [], []
    for axis, name in enumerate(mesh_axes):
        low, high = grid.boundaries[axis]
        num_blocks = 1 if name is None else mesh.shape[name]
        shape.append(grid.shape[axis] // num_blocks)
        if num_blocks > 1:
            low, high = (HaloExchange(name, num_blocks, condition) for condition in (low, high))
        boundaries.append((low, high))
    return Grid(tuple(shape), spacing=grid.spacing, origin=grid.origin, boundary=boundaries)
