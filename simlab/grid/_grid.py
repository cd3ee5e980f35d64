"""`Grid`: a uniform cell-centred grid in 1, 2 or 3 dimensions with a condition per side."""

import math
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array

from .._memory import check_fits
from ._boundary import BOUNDARY_NAMES, AbstractBoundaryCondition, Periodic, Side

MIN_POINTS_PER_AXIS = 3
SIDES: tuple[Side, Side] = ("low", "high")


class Grid(eqx.Module):
    r"""A uniform cell-centred grid of `shape` cells, with a boundary condition on every side.

    Cell $i$ along an axis covers $[x_0 + i h, x_0 + (i+1) h]$ and its value lives at the
    centre $x_0 + (i + \tfrac12) h$, so the domain $[x_0, x_0 + N h]$ has extent $N h$ and
    the boundary faces sit half a cell beyond the first and last centres. Every field stored
    on the grid has the grid's shape as its trailing axes (leading axes are channels).

    The geometry (shape, spacing, origin) and the kind of condition on each side are
    static; the conditions' values (a Dirichlet $g$, a Neumann flux, a Robin right-hand
    side) are array leaves. A model holds its grid as an ordinary field, so `jax.grad`,
    `jax.vmap` and `simlab.fit` see the wall values like any other parameter.

    **Arguments:**

    - `shape`: the number of cells along each axis, e.g. `(128, 128)`; at least 3 per axis.
    - `extent`: the domain length along each axis (a float for all axes, or one per axis).
    - `spacing`: the cell size along each axis; give `extent` or `spacing`, not both
      (neither: spacing 1).
    - `origin`: the coordinate of the low face of each axis (default 0).
    - `boundary`: one condition for every side (default periodic), or one entry
      per axis, each a condition or a `(low, high)` pair (a 1-D grid also takes the pair
      alone). The names `"periodic"`,
      `"dirichlet"` and `"neumann"` stand for `Periodic()`, `Dirichlet(0.0)` and
      `Neumann(0.0)`.

    !!! example

        ```python
        import simlab

        grid = simlab.Grid(
            (64, 32),
            extent=(2.0, 1.0),
            boundary=["periodic", (simlab.Dirichlet(1.0), simlab.Neumann(0.0))],
        )
        x, y = grid.mesh()  # cell-centre coordinates, each of shape (64, 32)
        ```
    """

    shape: tuple[int, ...] = eqx.field(static=True)
    spacing: tuple[float, ...] = eqx.field(static=True)
    origin: tuple[float, ...] = eqx.field(static=True)
    boundaries: tuple[tuple[AbstractBoundaryCondition, AbstractBoundaryCondition], ...]

    def __init__(
        self,
        shape: int | Sequence[int],
        *,
        extent: float | Sequence[float] | None = None,
        spacing: float | Sequence[float] | None = None,
        origin: float | Sequence[float] = 0.0,
        boundary: Any = "periodic",
    ):
        self.shape = _checked_shape(shape)
        field_bytes = math.prod(self.shape) * jnp.dtype(float).itemsize
        check_fits(
            f"one field of the grid {self.shape}", field_bytes, "use fewer cells", device=True
        )
        ndim = len(self.shape)
        if extent is not None and spacing is not None:
            raise ValueError("give the grid's extent or its spacing, not both.")
        if extent is not None:
            extents = _per_axis(extent, ndim, "extent")
            self.spacing = tuple(e / n for e, n in zip(extents, self.shape, strict=True))
        else:
            self.spacing = _per_axis(1.0 if spacing is None else spacing, ndim, "spacing")
        self.origin = _per_axis(origin, ndim, "origin", positive=False)
        self.boundaries = _checked_boundaries(boundary, ndim)

    @property
    def ndim(self) -> int:
        """The number of spatial dimensions."""
        return len(self.shape)

    @property
    def extent(self) -> tuple[float, ...]:
        """The domain length along each axis, `shape[i] * spacing[i]`."""
        return tuple(n * h for n, h in zip(self.shape, self.spacing, strict=True))

    @property
    def num_cells(self) -> int:
        """The total number of cells."""
        return math.prod(self.shape)

    @property
    def cell_volume(self) -> float:
        """The length, area or volume of one cell."""
        return math.prod(self.spacing)

    @property
    def is_periodic(self) -> tuple[bool, ...]:
        """Whether each axis is periodic."""
        return tuple(isinstance(low, Periodic) for low, _ in self.boundaries)

    def boundary(self, axis: int, side: Side) -> AbstractBoundaryCondition:
        """The condition on `side` (`"low"` or `"high"`) of spatial axis `axis`."""
        if side not in SIDES:
            raise ValueError(f"side must be 'low' or 'high'; got {side!r}.")
        return self.boundaries[axis][SIDES.index(side)]

    def coordinates(self, dtype: Any = None) -> tuple[Array, ...]:
        """The cell-centre coordinates along each axis, one 1-D array per axis."""
        return tuple(
            x0 + h * jnp.arange(0.5, n, dtype=dtype)
            for n, h, x0 in zip(self.shape, self.spacing, self.origin, strict=True)
        )

    def mesh(self, dtype: Any = None) -> tuple[Array, ...]:
        """The cell-centre coordinates as full arrays of the grid's shape (`indexing="ij"`)."""
        return tuple(jnp.meshgrid(*self.coordinates(dtype), indexing="ij"))

    def integrate(self, field: Array) -> Array:
        r"""The integral $\int u \, dV$ of a field over the domain (per leading channel)."""
        check_field_shape(field, self)
        axes = tuple(range(-self.ndim, 0))
        return jnp.sum(field, axis=axes) * self.cell_volume

    def zeros(self, *, channels: int | None = None, dtype: Any = None) -> Array:
        """A zero field of the grid's shape (with a leading `channels` axis if given)."""
        leading = () if channels is None else (channels,)
        return jnp.zeros(leading + self.shape, dtype=dtype)


def check_field_shape(field: Array, grid: Grid) -> None:
    """Raises a ValueError unless the trailing axes of `field` are `grid.shape`."""
    shape = tuple(jnp.shape(field))
    if len(shape) < grid.ndim or shape[len(shape) - grid.ndim :] != grid.shape:
        raise ValueError(
            f"a field on this grid must end in the grid's shape {grid.shape} (leading axes are "
            f"channels); got shape {shape}."
        )


def _checked_shape(shape: Any) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if not 1 <= len(shape) <= 3 or not all(isinstance(n, int) for n in shape):
        raise ValueError(f"grid shape must be 1 to 3 integers, e.g. (128, 128); got {shape!r}.")
    if any(n < MIN_POINTS_PER_AXIS for n in shape):
        raise ValueError(
            f"grid shape {shape} is smaller than the stencils: every axis needs at least "
            f"{MIN_POINTS_PER_AXIS} cells."
        )
    return shape


def _per_axis(value: Any, ndim: int, name: str, *, positive: bool = True) -> tuple[float, ...]:
    values = (value,) * ndim if isinstance(value, int | float) else tuple(value)
    if len(values) != ndim:
        raise ValueError(f"grid {name} needs one value or {ndim} (one per axis); got {value!r}.")
    try:
        values = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise ValueError(f"grid {name} must be numbers; got {value!r}.") from None
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"grid {name} must be finite; got {value!r}.")
    if positive and not all(v > 0 for v in values):
        raise ValueError(f"grid {name} must be positive along every axis; got {value!r}.")
    return values


def _checked_boundaries(boundary: Any, ndim: int):
    if _is_condition(boundary):
        per_axis = [boundary] * ndim
    elif ndim == 1 and _is_pair_of_conditions(boundary):
        per_axis = [boundary]  # a 1-D grid's (low, high)
    elif isinstance(boundary, Sequence) and len(boundary) == ndim:
        per_axis = list(boundary)
    else:
        raise ValueError(
            f"boundary must be one condition for every side, or {ndim} entries (one per axis, "
            f"each a condition or a (low, high) pair); got {boundary!r}."
        )
    pairs = []
    for axis, entry in enumerate(per_axis):
        low, high = (entry, entry) if _is_condition(entry) else _checked_pair(entry, axis)
        low, high = _as_condition(low), _as_condition(high)
        if isinstance(low, Periodic) != isinstance(high, Periodic):
            raise ValueError(
                f"axis {axis} is periodic on one side only ({low!r}, {high!r}); a periodic "
                "axis needs Periodic() on both sides."
            )
        pairs.append((low, high))
    return tuple(pairs)


def _is_condition(entry: Any) -> bool:
    return isinstance(entry, AbstractBoundaryCondition | str)


def _is_pair_of_conditions(entry: Any) -> bool:
    return isinstance(entry, Sequence) and len(entry) == 2 and all(map(_is_condition, entry))


def _checked_pair(entry: Any, axis: int) -> tuple[Any, Any]:
    if isinstance(entry, Sequence) and len(entry) == 2:
        return entry[0], entry[1]
    raise ValueError(
        f"boundary for axis {axis} must be a condition or a (low, high) pair; got {entry!r}."
    )


def _as_condition(entry: Any) -> AbstractBoundaryCondition:
    if isinstance(entry, AbstractBoundaryCondition):
        return entry
    if isinstance(entry, str) and entry.lower() in BOUNDARY_NAMES:
        return BOUNDARY_NAMES[entry.lower()]()
    raise ValueError(
        f"unknown boundary condition {entry!r}; use simlab.Periodic(), simlab.Dirichlet(value), "
        f"simlab.Neumann(normal_derivative) or one of the names {sorted(BOUNDARY_NAMES)}."
    )
