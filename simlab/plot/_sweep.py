"""Figures of a `SweepResult`: a heatmap over two swept parameters, lines over one."""

import matplotlib.colors as mcolors
import matplotlib.patches as mpatches
import matplotlib.pyplot as plt
import numpy as np

from ._style import SEQUENTIAL_CMAP, new_axes, style

FAILED_COLOUR = "#BBBBBB"


def sweep_heatmap(
    result,
    variable: str,
    *,
    x=None,
    y=None,
    at=None,
    ax=None,
    cmap=None,
    log_colour: bool = False,
    colour_label: str | None = None,
):
    """Colours the plane of two swept parameters by a scalar observable.

    Failed members (masked with `NaN`) are drawn grey and named in a legend. Axis labels
    carry the parameters' units.

    **Arguments:**

    - `result`: a [`simlab.SweepResult`][] from a `mode="grid"` sweep.
    - `variable`: an observable with one value per member (e.g. `"period"`).
    - `x`, `y`: the swept names along the axes (default: the first two swept names).
    - `at`: values of any other swept names, `{name: value}` (the nearest is taken).
    - `ax`: the Axes to draw on; `None` makes a new figure.
    - `cmap`: a colour map (default: simlab's sequential map).
    - `log_colour`: use a logarithmic colour scale.
    - `colour_label`: the colour bar's label (default: `variable`).

    **Returns:** the Axes.

    !!! example

        ```python
        import simlab.plot

        ax = simlab.plot.sweep_heatmap(result, "settling_time", x="length", y="damping")
        ax.figure.savefig("settling.png")
        ```
    """
    x, y = _plane_names(result, x, y)
    values = _select(result, variable, at, keep=(x, y)).transpose(y, x)
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
        figure.colorbar(mesh, ax=ax, label=colour_label or variable)
        ax.set_xlabel(_label(result, x))
        ax.set_ylabel(_label(result, y))
        ax.grid(False)
        if not np.all(finite):
            failed = mpatches.Patch(color=FAILED_COLOUR, label=f"failed ({np.sum(~finite)})")
            ax.legend(handles=[failed], loc="upper right")
    return ax


def sweep_lines(result, variable: str, *, x=None, hue=None, at=None, ax=None):
    """Plots a scalar observable against one swept parameter, one line per `hue` value.

    **Arguments:**

    - `result`: a [`simlab.SweepResult`][]: any mode with one swept name, or a grid.
    - `variable`: an observable with one value per member.
    - `x`: the swept name along the horizontal axis (default: the first).
    - `hue`: in a grid, a second swept name giving one line per value (default: none
      when only `x` is swept, else the second name).
    - `at`: values of any other swept names, `{name: value}` (the nearest is taken).
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes.
    """
    x = x or result.names[0]
    _check_swept(result, x)
    figure, ax = new_axes(ax)
    with style():
        if result.mode != "grid":
            order = np.argsort(result.parameter(x))
            values = _scalar_observable(result, variable)
            ax.plot(result.parameter(x)[order], values[order], marker=".")
        else:
            others = [name for name in result.names if name != x]
            hue = hue if hue is not None else (others[0] if others else None)
            fixed = {name: value for name, value in (at or {}).items() if name != hue}
            selected = _select(result, variable, fixed, keep=(x,) + ((hue,) if hue else ()))
            if hue is None:
                ax.plot(selected[x].values, selected.values, marker=".")
            else:
                for value in selected[hue].values:
                    line = selected.sel({hue: value})
                    ax.plot(line[x].values, line.values, marker=".", label=f"{hue} = {value:g}")
                ax.legend(title=_label(result, hue))
        ax.set_xlabel(_label(result, x))
        ax.set_ylabel(variable)
    return ax


def _label(result, name: str) -> str:
    unit = result.units.get(name, "")
    return f"{name} [{unit}]" if unit else name


def _check_swept(result, name: str) -> None:
    if name not in result.names:
        raise ValueError(f"{name!r} was not swept; the swept names are {list(result.names)}.")


def _plane_names(result, x, y):
    if result.mode != "grid" or len(result.names) < 2:
        raise ValueError(
            "a heatmap needs a grid sweep over at least two names; this sweep has mode "
            f"{result.mode!r} over {list(result.names)}. Use sweep_lines for one name."
        )
    x = x or result.names[0]
    y = y or next(name for name in result.names if name != x)
    for name in (x, y):
        _check_swept(result, name)
    if x == y:
        raise ValueError(f"x and y must be different swept names; both are {x!r}.")
    return x, y


def _scalar_observable(result, variable: str) -> np.ndarray:
    if variable not in result.observables:
        raise ValueError(
            f"unknown observable {variable!r}; this sweep has {list(result.observables)}."
        )
    values = result.observables[variable]
    if values.ndim != 1:
        raise ValueError(
            f"observable {variable!r} has shape {values.shape[1:]} per member; plot a scalar "
            "observable (return e.g. trajectory.ys[-1, 0] from the observable function)."
        )
    return values


def _select(result, variable: str, at, keep=None):
    """The grid of `variable` over the names in `keep` (default: all but `at`'s)."""
    _scalar_observable(result, variable)
    at = dict(at or {})
    for name in at:
        _check_swept(result, name)
    data = result.to_xarray()[variable]
    if at:
        data = data.sel(at, method="nearest")
    keep = keep or tuple(name for name in result.names if name not in at)
    extra = [name for name in data.dims if name not in keep]
    if extra:
        raise ValueError(
            f"{variable!r} still varies over {extra}; fix their values with at={{name: value}}."
        )
    return data
