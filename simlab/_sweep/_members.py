"""From `params` (name → values) to a table of members: one row per simulation."""

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax.random as jr
import numpy as np
from jax.dtypes import canonicalize_dtype

from .._misc import Integer, as_count
from ..models._base import AbstractModel

MODES = ("grid", "zip", "samples")
PATH = "path"  # the swept name of a stochastic model's path number


@dataclasses.dataclass(frozen=True)
class Members:
    """The swept quantities and their value in every member.

    `values[i, j]` is the value of `names[j]` in member `i`. In grid mode `grid_axes`
    holds the 1-D coordinate of each name, members running over the grid in C order.
    """

    names: tuple[str, ...]
    values: np.ndarray
    mode: str
    grid_axes: tuple[np.ndarray, ...] | None

    @property
    def num_members(self) -> int:
        return self.values.shape[0]

    def rows(self, begin: int, end: int) -> np.ndarray:
        """The values of members `begin` to `end` (exclusive)."""
        return self.values[begin:end]


@dataclasses.dataclass(frozen=True)
class PathMembers:
    """`paths` members per point of `points`, point by point, each with its path number as
    the last swept name `"path"`: member `m` is path `m % paths` of point `m // paths`.

    Rows are built chunk by chunk (`rows`), so the table of all members exists only where
    asked for (`values`, for a sweep that keeps every path)."""

    points: Members
    paths: int

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.points.names, PATH)

    @property
    def mode(self) -> str:
        return self.points.mode

    @property
    def grid_axes(self) -> tuple[np.ndarray, ...] | None:
        if self.points.grid_axes is None:
            return None
        return (*self.points.grid_axes, np.arange(self.paths, dtype=self.points.values.dtype))

    @property
    def num_members(self) -> int:
        return self.points.num_members * self.paths

    def point_of(self, begin: int, end: int) -> np.ndarray:
        """The point of each member from `begin` to `end`."""
        return np.arange(begin, end) // self.paths

    def rows(self, begin: int, end: int) -> np.ndarray:
        members = np.arange(begin, end)
        path = (members % self.paths).astype(self.points.values.dtype)
        return np.column_stack([self.points.values[members // self.paths], path])

    @property
    def values(self) -> np.ndarray:
        return self.rows(0, self.num_members)


def with_paths(points: Members, paths: Any) -> PathMembers:
    """`paths` members per point, checking that each path number is exact in `values`'
    dtype (float32 counts exactly up to 2**24) and below 2**32 - 1 (a key's fold-in
    number, the last one drawing sampled points)."""
    paths = as_count("paths", paths)
    exact = min(2 ** (np.finfo(points.values.dtype).nmant + 1), 2**32 - 2)
    if paths > exact:
        raise ValueError(
            f"paths must be at most {exact} in {points.values.dtype} (path numbers are held "
            f"exactly as values and fold into the key); got {paths}."
        )
    return PathMembers(points, paths)


def build_members(
    model: AbstractModel,
    params: Mapping[str, Any],
    *,
    mode: str,
    key: Any,
    num_samples: Integer | None,
) -> Members:
    """Checks `params` against the model and expands it into members."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {list(MODES)}.")
    if not isinstance(params, Mapping) or len(params) == 0:
        raise ValueError(
            "params must be a non-empty mapping from parameter (or initial-state component) "
            "names to 1-D arrays of values, e.g. {'rho': jnp.linspace(20, 30, 11)}."
        )
    names = tuple(params)
    _check_names(model, names)
    dtype = canonicalize_dtype(float)  # JAX's default float, as jnp.result_type(float)
    columns = {name: _checked_values(name, params[name], dtype) for name in names}
    if mode == "grid":
        members = _grid(names, columns)
    elif mode == "zip":
        members = _zipped(names, columns)
    else:
        members = _samples(names, columns, key=key, num_samples=num_samples, dtype=dtype)
    _check_bounds(model, members)
    return members


def sweepable_names(model: AbstractModel) -> tuple[str, ...]:
    """Physical parameters, then initial-state components (for a 1-D state)."""
    state = tuple(model.state_names) if len(model.state_shape) == 1 else ()
    return tuple(model.parameter_names()) + state


def _check_names(model: AbstractModel, names: tuple[str, ...]) -> None:
    known = sweepable_names(model)
    for name in names:
        if not isinstance(name, str) or name not in known:
            raise ValueError(
                f"unknown parameter {name!r} for {type(model).__name__}; sweepable names are "
                f"its parameters {list(model.parameter_names())} and initial-state components "
                f"{list(known[len(model.parameter_names()) :])}."
            )


def _checked_values(name: str, values: Any, dtype: np.dtype) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(
            f"params[{name!r}] must be a 1-D array of values; got shape {array.shape}."
        )
    if array.size == 0:
        raise ValueError(f"params[{name!r}] is empty; give at least one value.")
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise TypeError(f"params[{name!r}] must hold real numbers; got dtype {array.dtype}.")
    if not np.isfinite(array).all():
        bad = int(np.argmax(~np.isfinite(array)))
        raise ValueError(
            f"params[{name!r}] must be finite; entry {bad} is {array[bad]}. Drop NaN and inf."
        )
    return array.astype(dtype)


def _grid(names, columns) -> Members:
    axes = tuple(columns[name] for name in names)
    if len(axes) == 1:  # the common 1-D sweep, without meshgrid's cost
        return Members(names=names, values=axes[0][:, None].copy(), mode="grid", grid_axes=axes)
    mesh = np.meshgrid(*axes, indexing="ij")
    values = np.stack([m.reshape(-1) for m in mesh], axis=1)
    return Members(names=names, values=values, mode="grid", grid_axes=axes)


def _zipped(names, columns) -> Members:
    lengths = {name: columns[name].size for name in names}
    if len(set(lengths.values())) != 1:
        raise ValueError(
            f'mode="zip" pairs the i-th values of every parameter, so all arrays need the '
            f'same length; got lengths {lengths}. Use mode="grid" for every combination.'
        )
    values = np.stack([columns[name] for name in names], axis=1)
    return Members(names=names, values=values, mode="zip", grid_axes=None)


def _samples(names, columns, *, key, num_samples, dtype) -> Members:
    if key is None:
        raise ValueError('mode="samples" draws random points: pass key=jax.random.key(0).')
    if num_samples is None:
        raise ValueError('mode="samples" needs num_samples, a positive integer; got None.')
    num_samples = as_count("num_samples", num_samples)
    lower, upper = [], []
    for name in names:
        bounds = columns[name]
        if bounds.size != 2 or not bounds[0] < bounds[1]:
            raise ValueError(
                f'in mode="samples", params[{name!r}] gives the range to sample from as '
                f"[lower, upper] with lower < upper; got {bounds.tolist()}."
            )
        lower.append(bounds[0])
        upper.append(bounds[1])
    unit = np.asarray(jr.uniform(key, (num_samples, len(names)), dtype=dtype))
    values = np.asarray(lower, dtype) + unit * (np.asarray(upper, dtype) - np.asarray(lower, dtype))
    return Members(names=names, values=values, mode="samples", grid_axes=None)


def _check_bounds(model: AbstractModel, members: Members) -> None:
    bounds = model.parameter_bounds()
    for column, name in enumerate(members.names):
        if name not in bounds:
            continue
        values = members.values[:, column]
        outside = ~bounds[name].contains(values)
        if outside.any():
            bad = values[int(np.argmax(outside))]
            raise ValueError(
                f"{type(model).__name__}: swept parameter {name!r} must lie in "
                f"{bounds[name].describe()}; got {bad:g} ({int(np.sum(outside))} members "
                "outside). Narrow the swept range."
            )
