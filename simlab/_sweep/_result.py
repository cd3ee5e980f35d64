"""`SweepResult`: the observables and status of every member, with their labels."""

import collections
import dataclasses
import json
from typing import Any

import jax
import numpy as np

from .. import _display as display
from .._results import failure_counts, status_codes
from ..io._store import status_flag_attrs


# A frozen dataclass (a pytree, printed as Equinox prints modules) rather than an
# `eqx.Module`, whose checks at construction cost about 0.1 ms per sweep.
@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, eq=False)
class SweepResult:
    """The outcome of [`simlab.sweep`][]: one row per member (simulation).

    **Attributes:**

    - `names`: the swept quantities (parameters or initial-state components).
    - `values`: their value in every member, shape `(num_members, len(names))`.
    - `observables`: name → array of shape `(num_members, *shape)`; `NaN` where the member
      failed. Without an `observable`, the one entry `"trajectory"` holds every `ys`.
    - `status`: the [`simlab.RESULTS`][] code of each member (`0`: successful).
    - `mode`: `"grid"`, `"zip"` or `"samples"`.
    - `grid_axes`: in grid mode, the 1-D values of each name (members run over the grid in
      C order); `None` otherwise.
    - `units`: the unit of each swept name.
    - `dims`: names of each observable's own axes; `coords`: their labels (e.g. `time`).
    - `attrs`: provenance (simlab and jax versions, devices, model, solver settings).
    - `stats`: chunk size, members run at once on each device (`group_size`), chunks
      computed and resumed from a store, wall time.
    """

    names: tuple[str, ...]
    values: np.ndarray
    observables: dict[str, np.ndarray]
    status: np.ndarray
    mode: str
    grid_axes: tuple[np.ndarray, ...] | None
    units: dict[str, str]
    dims: dict[str, tuple[str, ...]]
    coords: dict[str, tuple[str, np.ndarray]]
    attrs: dict[str, Any]
    stats: dict[str, Any]

    def __repr__(self) -> str:
        """The members and what was swept, how many failed and why (each failure status,
        counted), and each observable with its dimensions and shape."""
        return display.rows_text(self, self._rows, "SweepResult")

    def _repr_html_(self) -> str:
        """The same rows as an HTML table (a notebook's view of a sweep)."""
        return display.rows_html(self, self._rows, "SweepResult")

    def plot(self, variable: str | None = None, *, kind: str | None = None, **kwargs: Any):
        """The figure of the sweep, as `simlab run` draws it: a gallery of a field
        observable over a grid of two names, a heat map over the first two names of a
        grid, else the observable against the first swept name (for a sweep over paths,
        their mean in a band).

        **Arguments:**

        - `variable`: the observable to draw; optional when the sweep has only one.
        - `kind`: `"heatmap"`, `"lines"` or `"gallery"` in place of the choice above.
        - `kwargs`: passed to [`simlab.plot.sweep_heatmap`][],
          [`simlab.plot.sweep_lines`][] or [`simlab.plot.sweep_gallery`][] (e.g.
          `x`, `y`, `hue`, `at={"time": 5.0}`, `channel`).

        **Returns:** the matplotlib `Figure` (a notebook shows it inline).

        !!! example

            ```python
            result = simlab.sweep(model, {"alpha": alphas, "beta": betas}, y0, ts,
                                  observable=lambda t: {"peak": t.ys[:, 0].max()})
            figure = result.plot("peak")
            ```
        """
        from ..plot._results import sweep_figure

        return sweep_figure(self, variable, kind=kind, **kwargs)

    def _rows(self) -> list[tuple[str, str]]:
        if self.mode == "grid" and self.grid_axes is not None:
            axes = " × ".join(
                f"{name} ({axis.size})"
                for name, axis in zip(self.names, self.grid_axes, strict=True)
            )
            members = f"{self.num_members}, a grid over {axes}"
        else:
            members = f"{self.num_members} ({self.mode})"
        rows = [("members", members)]
        for j, name in enumerate(self.names):
            swept = self.values[:, j] if self.grid_axes is None else self.grid_axes[j]
            text = display.array(swept) if self.grid_axes is not None else display.spread(swept)
            text = display.with_unit(text, self.units.get(name, ""))
            rows.append(("swept" if j == 0 else "", f"{name}: {text}"))
        failed = self.num_failed
        rows.append(("failed", f"{failed} of {self.num_members}" if failed else "none"))
        rows += [("", line) for line in failure_counts(self.status)]
        for j, (name, value) in enumerate(self.observables.items()):
            dims = ("member", *self.dims.get(name, ()))  # xarray's way: (member: 9, time: 5)
            sizes = ", ".join(
                f"{dim}: {size}" for dim, size in zip(dims, np.shape(value), strict=False)
            )
            rows.append(("observables" if j == 0 else "", f"{name} ({sizes})"))
        if "seconds" in self.stats:
            rows.append(("wall time", f"{display.number(self.stats['seconds'], 3)} s"))
        return rows

    @property
    def num_members(self) -> int:
        return self.values.shape[0]

    @property
    def succeeded(self) -> np.ndarray:
        """Boolean per member: did its solve succeed?"""
        return self.status == 0

    @property
    def num_failed(self) -> int:
        return int(np.sum(~self.succeeded))

    def parameter(self, name: str) -> np.ndarray:
        """The value of swept quantity `name` in every member."""
        if name not in self.names:
            raise ValueError(f"{name!r} was not swept; the swept names are {list(self.names)}.")
        return self.values[:, self.names.index(name)]

    def failures(self) -> list[dict[str, Any]]:
        """One entry per failed member: its index, swept values and the status name."""
        code_names = {code: name for name, code in status_codes().items()}
        return [
            {
                "member": int(i),
                **{name: float(v) for name, v in zip(self.names, self.values[i], strict=True)},
                "status": code_names.get(int(self.status[i]), str(int(self.status[i]))),
            }
            for i in np.flatnonzero(~self.succeeded)
        ]

    def summary(self) -> str:
        """A line saying how many members failed, why, and where (the swept ranges)."""
        failures = self.failures()
        if not failures:
            return f"all {self.num_members} members succeeded."
        reasons = collections.Counter(f["status"] for f in failures)
        reason_text = ", ".join(f"{count} {name}" for name, count in reasons.most_common())
        failed = self.values[~self.succeeded]
        ranges = ", ".join(
            f"{name} in [{failed[:, j].min():g}, {failed[:, j].max():g}]"
            for j, name in enumerate(self.names)
        )
        return (
            f"{len(failures)} of {self.num_members} members failed ({reason_text}); "
            f"failed members have {ranges}. See .failures() for each one."
        )

    def to_xarray(self):
        """The results as an `xarray.Dataset`, labelled by the swept values.

        In grid mode each swept name is a dimension whose coordinate holds its values;
        otherwise there is one `member` dimension with the swept values as coordinates.
        Each observable is a data variable, as is `status` (with CF `flag_meanings`);
        provenance goes in `attrs`.
        """
        import xarray as xr

        if self.mode == "grid":
            leading = self.names
            grid_shape = tuple(axis.size for axis in self.grid_axes)
            coords = {
                name: (name, axis, {"units": self.units.get(name, "")})
                for name, axis in zip(self.names, self.grid_axes, strict=True)
            }
        else:
            leading = ("member",)
            grid_shape = (self.num_members,)
            coords = {
                name: ("member", self.values[:, j], {"units": self.units.get(name, "")})
                for j, name in enumerate(self.names)
            }
        coords.update({name: (dim, values) for name, (dim, values) in self.coords.items()})
        data_vars = {
            name: (leading + self.dims[name], value.reshape(grid_shape + value.shape[1:]))
            for name, value in self.observables.items()
        }
        data_vars["status"] = (leading, self.status.reshape(grid_shape), status_flag_attrs())
        attrs = {
            k: v if isinstance(v, str | int | float) else json.dumps(v)
            for k, v in self.attrs.items()
        }
        return xr.Dataset(data_vars, coords=coords, attrs=attrs)
