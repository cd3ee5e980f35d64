r"""Short-range pair forces through cell lists and Verlet neighbour lists.

With a cutoff $r_c$, a particle meets only those in its own cell of a periodic grid of
cells no narrower than $r_c$ and in the cells next to it, so a force costs $O(N)$
instead of the $O(N^2)$ of [`simlab.kernels.pair_forces`][]. Shapes are static for `jit`:
every cell holds at most `capacity` particles and every neighbour row `max_neighbours`;
a fuller cell or row sets an overflow flag (the convenience [`cell_pair_forces`][] raises
an error instead), never wrong forces in silence. A Verlet list built with a radius
$r_c + \delta$ ("skin" $\delta$) stays valid until some particle has moved $\delta/2$,
so it can serve many steps.

The pair terms are the same expression as the all-pairs kernel's, summed over each
particle's neighbour row, so the forces agree with it to roundoff; they are differentiable
(indices carry no derivative) and batch under `jax.vmap`.
"""

import dataclasses
import itertools
import math
from typing import NamedTuple

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from ._pairs import _packed, _pair_sum, _separation


@dataclasses.dataclass(frozen=True)
class CellGrid:
    """`per_side` cells along each axis of the periodic box, each holding at most
    `capacity` particles (hashable: a static argument)."""

    per_side: int
    capacity: int

    def __post_init__(self):
        if self.per_side < 1 or self.capacity < 1:
            raise ValueError(
                f"CellGrid: per_side and capacity must be positive; got {self.per_side}, "
                f"{self.capacity}."
            )


def cell_grid(
    box: float,
    cutoff: float,
    num_particles: int,
    dims: int = 3,
    *,
    positions: ArrayLike | None = None,
) -> CellGrid:
    r"""The finest grid whose cells are no narrower than `cutoff`. Each cell has room for
    the mean occupancy $m$ plus five Poisson deviations, $m + 5\sqrt{m} + 4$ (an ideal gas
    overflows a cell about once in $10^6$); or, given `positions`, for a quarter more than
    the fullest cell holds there (a liquid's occupancies scatter far less than a gas's).

    !!! example

        ```python
        simlab.kernels.cell_grid(17.2, 2.5, 4096)  # CellGrid(per_side=6, capacity=45)
        ```
    """
    if not 0 < cutoff <= box:
        raise ValueError(f"cell_grid: cutoff must lie in (0, box]; got {cutoff} for box {box}.")
    per_side = int(box // cutoff)
    if positions is None:
        mean = num_particles / per_side**dims
        capacity = math.ceil(mean + 5 * math.sqrt(mean) + 4)
    else:
        cells = np.floor(np.asarray(positions) * (per_side / box)).astype(int) % per_side
        occupancy = np.unique(cells, axis=0, return_counts=True)[1]
        capacity = math.ceil(1.25 * occupancy.max())
    return CellGrid(per_side, min(num_particles, capacity))


class Neighbours(NamedTuple):
    """Each particle's neighbours, `indices` `(N, K)`, padded with the index `N`, which
    stands for no particle; `overflow` is true when some cell or row had no room left,
    so that neighbours are missing and the list must be rebuilt larger."""

    indices: Array
    overflow: Array


def _neighbour_cells(grid: CellGrid, dims: int) -> np.ndarray:
    """`(cells, S)`: each cell's own and adjacent cells, each once (with one or two
    cells per side the offsets -1, 0, 1 would meet the same cell twice)."""
    n = grid.per_side
    offsets = sorted({-1 % n, 0, 1 % n})
    cells = np.stack(np.meshgrid(*[np.arange(n)] * dims, indexing="ij"), -1).reshape(-1, dims)
    stencil = np.array(list(itertools.product(offsets, repeat=dims)))
    neighbours = (cells[:, None, :] + stencil[None, :, :]) % n
    return np.ravel_multi_index(tuple(np.moveaxis(neighbours, -1, 0)), (n,) * dims)


def _check_positions(positions: Array, caller: str) -> None:
    if positions.ndim != 2 or positions.shape[0] < 1:
        raise ValueError(
            f"{caller}: positions must have shape (N, dims) (vmap over a batch); "
            f"got {positions.shape}."
        )


def cell_candidates(positions: Array, box: ArrayLike, grid: CellGrid) -> Neighbours:
    """Every particle's candidates: the members of its own and the adjacent cells
    (itself included; `K` = cells in the stencil × `capacity`). Positions outside the box
    are wrapped into it.

    !!! example

        ```python
        positions = jnp.array([[0.1, 0.1, 0.1], [0.3, 0.1, 0.1], [2.0, 2.0, 2.0]])
        grid = simlab.kernels.CellGrid(per_side=4, capacity=2)
        simlab.kernels.cell_candidates(positions, 4.0, grid).indices[0]
        # particles 0 and 1, then padding (3): the third is two cells away
        ```
    """
    positions = jnp.asarray(positions)
    _check_positions(positions, "cell_candidates")
    count, dims = positions.shape
    n, capacity = grid.per_side, grid.capacity
    coordinates = jnp.floor(positions * (n / jnp.asarray(box, positions.dtype))).astype(jnp.int32)
    strides = jnp.asarray([n ** (dims - 1 - a) for a in range(dims)], jnp.int32)
    cells = (coordinates % n) @ strides
    order = jnp.argsort(cells)
    sorted_cells = cells[order]
    first = jnp.searchsorted(sorted_cells, jnp.arange(n**dims, dtype=sorted_cells.dtype))
    rank = jnp.arange(count, dtype=jnp.int32) - first[sorted_cells]  # place within its cell
    members = jnp.full((n**dims, capacity), count, jnp.int32)
    members = members.at[sorted_cells, rank].set(order.astype(jnp.int32), mode="drop")
    stencil = jnp.asarray(_neighbour_cells(grid, dims), jnp.int32)
    indices = members[stencil[cells]].reshape(count, -1)
    return Neighbours(indices, jnp.max(rank) >= capacity)


def _gathered(positions: Array, indices: Array) -> list[Array]:
    """Each coordinate of `positions[indices]`, shaped like `indices`, the padding index
    reading zeros (one gather per coordinate: on a CPU several times faster than one of
    rows)."""
    zero = jnp.zeros((1,), positions.dtype)
    return [jnp.concatenate([positions[:, a], zero])[indices] for a in range(positions.shape[1])]


def _pair_entries(neighbours: Array, own: Array, count: int) -> Array:
    """Which entries of a neighbour array are pairs: neither padding nor the particle."""
    return (neighbours < count) & (neighbours != own)


def neighbour_squared_distances(
    positions: Array, neighbours: Array, box: ArrayLike
) -> tuple[Array, Array]:
    """Squared minimum-image distances to each particle's neighbours, `(N, K)`, and which
    entries are pairs (neither padding nor the particle itself).

    !!! example

        ```python
        positions = jnp.array([[0.1, 0.1], [3.9, 0.1]])
        squared, pairs = simlab.kernels.neighbour_squared_distances(
            positions, jnp.array([[0, 1], [0, 2]]), 4.0
        )  # squared[0, 1] = 0.04 across the boundary; pairs: [[F, T], [T, F]]
        ```
    """
    positions, neighbours = jnp.asarray(positions), jnp.asarray(neighbours)
    box = jnp.asarray(box, positions.dtype)
    sources = _gathered(positions, neighbours)
    deltas = [_separation(positions[:, a, None] - x, box) for a, x in enumerate(sources)]
    own = jnp.arange(positions.shape[0], dtype=neighbours.dtype)[:, None]
    pairs = _pair_entries(neighbours, own, positions.shape[0])
    return sum(delta * delta for delta in deltas), pairs


def neighbour_list(
    positions: Array, box: ArrayLike, grid: CellGrid, radius: float, max_neighbours: int
) -> Neighbours:
    """A Verlet list: each particle's others within `radius` (the cutoff plus a skin),
    found through the cells and packed into `max_neighbours` columns.

    !!! example

        ```python
        positions = jnp.array([[0.1, 0.1, 0.1], [3.9, 0.1, 0.1], [2.0, 2.0, 2.0]])
        grid = simlab.kernels.CellGrid(per_side=4, capacity=2)
        simlab.kernels.neighbour_list(positions, 4.0, grid, 1.0, 2).indices
        # [[1, 3], [0, 3], [3, 3]]: 0 and 1 meet across the boundary
        ```
    """
    candidates, cells_overflow = cell_candidates(positions, box, grid)
    squared, pairs = neighbour_squared_distances(positions, candidates, box)
    near = pairs & (squared < radius**2)
    # Each near candidate goes to the column that counts the near ones before it; the rest
    # (and any beyond max_neighbours) to a column past the end, which is dropped.
    count = candidates.shape[0]
    columns = jnp.cumsum(near, axis=1, dtype=jnp.int32) - 1
    rows = jnp.arange(count, dtype=jnp.int32)[:, None]
    packed = jnp.full((count, max_neighbours), count, candidates.dtype)
    packed = packed.at[rows, jnp.where(near, columns, max_neighbours)].set(candidates, mode="drop")
    row_overflow = jnp.max(columns[:, -1]) >= max_neighbours
    return Neighbours(packed, cells_overflow | row_overflow)


def neighbour_pair_forces(
    positions: Array,
    neighbours: Array,
    weights: ArrayLike,
    parameters=(),
    *,
    pair_scale,
    cutoff: float,
    box: ArrayLike,
) -> Array:
    r"""$F_i = \sum_{j} w_j\, s(r_{ij}^2; \theta)\,(x_i - x_j)$ over the neighbours $j$ of
    each $i$ (`neighbours` `(N, K)`, padded with `N`; $i$ itself and pairs beyond `cutoff`
    are left out), minimum image in a periodic cube of side `box`. The pair law is as for
    [`simlab.kernels.pair_forces`][].

    !!! example

        ```python
        positions = jnp.array([[0.5, 0.5, 0.5], [1.6, 0.5, 0.5], [3.0, 3.0, 3.0]])
        neighbours = simlab.kernels.cell_candidates(
            positions, 4.0, simlab.kernels.CellGrid(2, 3)
        ).indices
        simlab.kernels.neighbour_pair_forces(
            positions, neighbours, 1.0, (1.0, 1.0),
            pair_scale=simlab.kernels.lennard_jones_scale, cutoff=2.0, box=4.0,
        )  # equal and opposite forces on the first two; none on the third
        ```
    """
    positions = jnp.asarray(positions)
    _check_positions(positions, "neighbour_pair_forces")
    count, dims = positions.shape
    box = jnp.asarray(box, positions.dtype)
    weights = jnp.broadcast_to(jnp.asarray(weights, positions.dtype), (count,))
    padded_weights = jnp.concatenate([weights, jnp.zeros((1,), positions.dtype)])
    # Sources along the first axis and targets along the second, as in the all-pairs
    # kernel's tiles, so that both sum the same expression.
    columns = jnp.asarray(neighbours).T
    own = jnp.arange(count, dtype=columns.dtype)[None, :]
    sums = _pair_sum(
        [positions[None, :, a] for a in range(dims)],
        _gathered(positions, columns),
        padded_weights[columns],
        _pair_entries(columns, own, count),
        tuple(_packed(parameters, positions.dtype)),
        pair_scale,
        cutoff,
        box,
    )
    return jnp.concatenate(sums, axis=0).T


def cell_pair_forces(
    positions: Array,
    weights: ArrayLike,
    parameters=(),
    *,
    pair_scale,
    cutoff: float,
    box: float,
    grid: CellGrid | None = None,
) -> Array:
    """[`simlab.kernels.pair_forces`][] with a cutoff in a periodic box, through a cell
    list built afresh: $O(N)$. A cell fuller than `grid.capacity` raises an error at run
    time on a CPU (also under `jit`) and gives NaN forces on a GPU or TPU, where a check
    cannot raise inside a program. `grid` defaults to [`simlab.kernels.cell_grid`][]'s.

    !!! example

        ```python
        positions = jax.random.uniform(jax.random.key(0), (500, 3)) * 8.0
        simlab.kernels.cell_pair_forces(
            positions, 1.0, (1.0, 0.5), pair_scale=simlab.kernels.lennard_jones_scale,
            cutoff=2.0, box=8.0,
        )  # equals pair_forces(..., cutoff=2.0, box=8.0) to roundoff
        ```
    """
    positions = jnp.asarray(positions)
    _check_positions(positions, "cell_pair_forces")
    if not 0 < cutoff <= box / 2:
        raise ValueError(
            f"cell_pair_forces: cutoff must lie in (0, box/2] = (0, {box / 2}] for the "
            f"minimum-image convention; got {cutoff}. Use a larger box or a shorter cutoff."
        )
    count, dims = positions.shape
    grid = cell_grid(box, cutoff, count, dims) if grid is None else grid
    if box / grid.per_side < cutoff:
        raise ValueError(
            f"cell_pair_forces: cells of side {box / grid.per_side:g} are narrower than the "
            f"cutoff {cutoff}; use at most {int(box // cutoff)} cells per side."
        )
    neighbours, overflow = cell_candidates(positions, box, grid)
    forces = neighbour_pair_forces(
        positions, neighbours, weights, parameters, pair_scale=pair_scale, cutoff=cutoff, box=box
    )
    # Imported here: the kernels load on their own, as plain array code; the rule for where
    # a check may raise lives with simlab's other checks.
    from .. import _misc

    if not _misc.checks_raise_in_program():  # NaN forces: the solve reports the failure
        return _misc.nan_where(overflow, forces)
    return eqx.error_if(
        forces,
        overflow,
        f"cell_pair_forces: a cell holds more than capacity={grid.capacity} particles; "
        "pass a grid with a larger capacity.",
    )
