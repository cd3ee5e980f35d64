"""Figures of a `SweepResult`: a heatmap over two swept parameters, lines over one.

A sweep of a stochastic model over paths is drawn through a statistic of each parameter
point's paths, whether they were streamed to statistics or kept: a heat map of the
statistic, a mean line in a band between two quantiles.
"""

import matplotlib.colors as mcolors
import matplotlib.patches as mpatches
import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from ._style import SEQUENTIAL_CMAP, new_axes, style

FAILED_COLOUR = "#BBBBBB"


def sweep_heatmap(
    result,
    variable: str,
    *,
    x=None,
    y=None,
    at=None,
    statistic: str | float = "mean",
    ax=None,
    cmap=None,
    log_colour: bool = False,
    colour_label: str | None = None,
):
    """Colours the plane of two swept parameters by a scalar observable.

    Failed members (masked with `NaN`) are drawn grey and named in a legend. Axis labels
    carry the parameters' units. A sweep over paths is coloured by a `statistic` of each
    point's paths.

    **Arguments:**

    - `result`: a [`simlab.SweepResult`][] from a `mode="grid"` sweep.
    - `variable`: an observable with one value per member (e.g. `"period"`), or per save
      time (pick one with `at={"time": t}`).
    - `x`, `y`: the swept names along the axes (default: the first two swept names).
    - `at`: values of any other swept names, or of an observable's own axes such as
      `"time"`, `{name: value}` (the nearest is taken).
    - `statistic`: for a sweep over paths, what each point shows: `"mean"`, `"variance"`,
      `"std"`, or a quantile level such as `0.5` (one the sweep kept, when it streamed
      statistics).
    - `ax`: the Axes to draw on; `None` makes a new figure.
    - `cmap`: a colour map (default: simlab's sequential map).
    - `log_colour`: use a logarithmic colour scale.
    - `colour_label`: the colour bar's label (default: `variable`, with the statistic).

    **Returns:** the Axes.

    !!! example

        ```python
        import simlab.plot

        ax = simlab.plot.sweep_heatmap(result, "settling_time", x="length", y="damping")
        ax.figure.savefig("settling.png")
        ```
    """
    x, y = _plane_names(result, x, y)
    values = _select(result, variable, at, keep=(x, y), statistic=statistic).transpose(y, x)
    figure, ax = new_axes(ax)
    colours = plt.get_cmap(cmap or SEQUENTIAL_CMAP).with_extremes(bad=FAILED_COLOUR)
    finite = np.isfinite(values.values)
    norm = None
    if log_colour and np.any(finite):
        norm = mcolors.LogNorm(
            vmin=np.min(values.values[finite]), vmax=np.max(values.values[finite])
        )
    with style():
        mesh = ax.pcolormesh(
            values[x].values,
            values[y].values,
            np.ma.masked_invalid(values.values),
            shading="nearest",
            cmap=colours,
            norm=norm,
        )
        figure.colorbar(
            mesh, ax=ax, label=colour_label or _value_label(result, variable, statistic)
        )
        ax.set_xlabel(_label(result, x))
        ax.set_ylabel(_label(result, y))
        ax.grid(False)
        if not np.all(finite):
            failed = mpatches.Patch(color=FAILED_COLOUR, label=f"failed ({np.sum(~finite)})")
            ax.legend(handles=[failed], loc="upper right")
    return ax


def sweep_lines(result, variable: str, *, x=None, hue=None, at=None, band=None, ax=None):
    """Plots a scalar observable against one swept parameter, one line per `hue` value.

    A sweep over paths draws each point's mean over its paths, in a band between two
    quantiles of them.

    **Arguments:**

    - `result`: a [`simlab.SweepResult`][]: any mode with one swept name, or a grid.
    - `variable`: an observable with one value per member, or per save time (pick one
      with `at={"time": t}`).
    - `x`: the swept name along the horizontal axis (default: the first).
    - `hue`: in a grid, a second swept name giving one line per value (default: none
      when only `x` is swept, else the second name).
    - `at`: values of any other swept names, or of an observable's own axes such as
      `"time"`, `{name: value}` (the nearest is taken).
    - `band`: for a sweep over paths, the quantile levels `(low, high)` that bound the
      band (default: the outermost levels the sweep streamed, else `(0.05, 0.95)` of kept
      paths; mean ± one standard deviation where no quantiles were streamed).
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes.

    !!! example

        ```python
        ax = simlab.plot.sweep_lines(ensemble, "x", at={"time": 5.0}, band=(0.05, 0.95))
        ```
    """
    x = x or _point_names(result)[0]
    _check_swept(result, x)
    others = [name for name in _point_names(result) if name != x]
    if not _is_grid(result):
        hue = None  # outside a grid the other swept names label members, not lines
    elif hue is None:
        hue = others[0] if others else None
    fixed = {name: value for name, value in (at or {}).items() if name != hue}
    keep = (x,) + ((hue,) if hue else ())
    centre = _select(result, variable, fixed, keep=keep, statistic="mean")
    spread = _band(result, variable, band, fixed, keep, centre)
    figure, ax = new_axes(ax)
    with style():
        for label, selection in _lines(centre, hue):
            line = _sorted(centre.sel(selection), x)
            (drawn,) = ax.plot(line[x].values, line.values, marker=".", label=label)
            if spread is not None:
                low, high = (_sorted(bound.sel(selection), x) for bound in spread)
                ax.fill_between(
                    low[x].values, low.values, high.values, color=drawn.get_color(), alpha=0.25
                )
        if hue is not None:
            ax.legend(title=_label(result, hue))
        ax.set_xlabel(_label(result, x))
        ax.set_ylabel(_value_label(result, variable, "mean" if spread is not None else None))
    return ax


def _lines(centre, hue):
    """`(label, selection)` of each line: one per value of `hue`, or the one line."""
    if hue is None:
        return [(None, {})]
    return [(f"{hue} = {value:g}", {hue: value}) for value in centre[hue].values]


def _sorted(line, x: str):
    """A line over the `member` axis (not a grid), in increasing `x`."""
    if x in line.dims:
        return line
    return line.isel(member=np.argsort(line[x].values))


def _band(result, variable, band, at, keep, centre):
    """The band's `(low, high)` for a sweep over paths, else None."""
    if not _is_ensemble(result, variable):
        if band is not None:
            raise ValueError(
                "band= is for sweeps of stochastic models over paths; this sweep ran none."
            )
        return None
    streamed = _streamed_levels(result, variable)
    if band is None and streamed == ():
        deviation = _select(result, variable, at, keep=keep, statistic="std")
        return centre - deviation, centre + deviation
    if band is None:
        band = (min(streamed), max(streamed)) if streamed else (0.05, 0.95)
    if len(band) != 2 or not 0 <= band[0] < band[1] <= 1:
        raise ValueError(f"band must be two quantile levels (low, high) in [0, 1]; got {band!r}.")
    return tuple(_select(result, variable, at, keep=keep, statistic=level) for level in band)


def _label(result, name: str) -> str:
    unit = result.units.get(name, "")
    return f"{name} [{unit}]" if unit else name


def _value_label(result, variable: str, statistic) -> str:
    if statistic is None or not _is_ensemble(result, variable):
        return variable
    what = f"{statistic:g} quantile" if isinstance(statistic, int | float) else statistic
    return f"{variable} ({what} over {_num_paths(result)} paths)"


def _point_names(result) -> tuple[str, ...]:
    """The swept names of the parameter points (a sweep over kept paths less `"path"`)."""
    return tuple(name for name in result.names if name != PATH)


def _is_grid(result) -> bool:
    return result.mode == "grid"


def _check_swept(result, name: str) -> None:
    if name not in _point_names(result):
        raise ValueError(
            f"{name!r} was not swept; the swept names are {list(_point_names(result))}."
        )


def _plane_names(result, x, y):
    names = _point_names(result)
    if result.mode != "grid" or len(names) < 2:
        raise ValueError(
            "a heatmap needs a grid sweep over at least two names; this sweep has mode "
            f"{result.mode!r} over {list(names)}. Use sweep_lines for one name."
        )
    x = x or names[0]
    y = y or next(name for name in names if name != x)
    for name in (x, y):
        _check_swept(result, name)
    if x == y:
        raise ValueError(f"x and y must be different swept names; both are {x!r}.")
    return x, y


# ---------------------------------------------------------------------------------------
# Values per parameter point: an observable, or a statistic over each point's paths.

PATH = "path"
STATISTICS = ("mean", "variance", "std")


def _is_ensemble(result, variable: str) -> bool:
    """Whether `variable` comes from paths: streamed statistics, or kept paths."""
    return f"{variable}_mean" in result.observables or (
        PATH in result.names and variable in result.observables
    )


def _streamed_levels(result, variable: str) -> tuple[float, ...] | None:
    """The quantile levels a streamed sweep kept (`()` none), or None for kept paths."""
    if f"{variable}_mean" not in result.observables:
        return None
    if f"{variable}_quantiles" not in result.observables:
        return ()
    return tuple(float(level) for level in result.coords["quantile"][1])


def _num_paths(result) -> int:
    if PATH in result.names:
        return int(np.max(result.parameter(PATH))) + 1
    return int(result.attrs["paths"])


def _observable(result, variable: str, statistic) -> xr.DataArray:
    """`variable` over the parameter points (and its own axes): the observable, or for a
    sweep over paths the `statistic` of each point's paths."""
    if not _is_ensemble(result, variable):
        if variable not in result.observables:
            raise ValueError(
                f"unknown observable {variable!r}; this sweep has {list(result.observables)}."
            )
        if statistic != "mean":
            raise ValueError(
                "statistic= is for sweeps of stochastic models over paths; this sweep ran none."
            )
        return result.to_xarray()[variable]
    if not (statistic in STATISTICS or isinstance(statistic, int | float)):
        raise ValueError(
            f"statistic must be one of {list(STATISTICS)} or a quantile level in [0, 1]; "
            f"got {statistic!r}."
        )
    if PATH in result.names:
        return _over_kept_paths(result, variable, statistic)
    return _streamed(result, variable, statistic)


def _streamed(result, variable: str, statistic) -> xr.DataArray:
    data = result.to_xarray()
    if statistic == "std":
        return np.sqrt(data[f"{variable}_variance"])
    if statistic in STATISTICS:
        return data[f"{variable}_{statistic}"]
    levels = _streamed_levels(result, variable)
    matches = [level for level in levels if np.isclose(level, statistic)]
    if not matches:
        raise ValueError(
            f"the sweep streamed the quantiles {list(levels)} of {variable!r}; ask for one "
            f"of them, or rerun the sweep with quantiles=(..., {statistic:g}, ...)."
        )
    return data[f"{variable}_quantiles"].sel(quantile=matches[0]).drop_vars("quantile")


def _over_kept_paths(result, variable: str, statistic) -> xr.DataArray:
    """The statistic over the `"path"` axis of a sweep that kept every path (NaN, a
    failed path, left out)."""
    data = result.to_xarray()[variable]
    if not _is_grid(result):  # members run path by path within each point: split them
        paths = _num_paths(result)
        points = result.values[::paths]
        values = data.values.reshape(-1, paths, *data.shape[1:])
        coords = {
            name: ("member", points[:, index])
            for index, name in enumerate(result.names)
            if name != PATH
        }
        own = {dim: data[dim] for dim in data.dims[1:] if dim in data.coords}
        data = xr.DataArray(values, dims=("member", PATH, *data.dims[1:]), coords={**coords, **own})
    if statistic == "mean":
        return data.mean(PATH)
    if statistic in ("variance", "std"):
        variance = data.var(PATH, ddof=1)
        return np.sqrt(variance) if statistic == "std" else variance
    return data.quantile(statistic, dim=PATH).drop_vars("quantile")


def _select(result, variable: str, at, keep=None, statistic="mean"):
    """`variable` (or its statistic over paths) over the names in `keep`, the other swept
    names and the observable's own axes fixed by `at` (the nearest value)."""
    data = _observable(result, variable, statistic)
    at = dict(at or {})
    for name in at:
        if name not in data.dims:
            _check_swept(result, name)
    # Outside a grid the swept names label members, not axes: there is nothing to fix.
    on_axes = {name: value for name, value in at.items() if name in data.dims}
    data = data.sel(on_axes, method="nearest") if on_axes else data
    keep = keep or tuple(name for name in _point_names(result) if name not in at)
    leading = set(keep) if _is_grid(result) else set(keep) | {"member"}
    extra = [name for name in data.dims if name not in leading]
    if extra:
        swept = [name for name in extra if name in result.names]
        fix = (
            f"{variable!r} still varies over {extra}; fix their values with at={{name: value}}"
            if swept
            else f"{variable!r} has the axes {extra} per member; plot a scalar observable, or "
            f"pick one value of each with at={{name: value}} (e.g. at={{{extra[0]!r}: ...}})"
        )
        raise ValueError(fix + ".")
    return data
