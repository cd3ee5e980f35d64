"""Figures of a `Trajectory`: time series with data and an uncertainty band; phase portraits."""

import numpy as np

from ._style import COLOURS, new_axes, style


def trajectory(
    trajectory,
    *,
    data=None,
    stderr=None,
    band_width: float = 1.96,
    components=None,
    time_label: str = "time",
    value_label: str | None = None,
    units=None,
    ax=None,
):
    r"""Plots each state component against time, with observations and an uncertainty band.

    The band is $\hat y(t) \pm z\,\sigma(t)$ with $\sigma$ the standard error of the curve
    (e.g. from [`simlab.FitResult.predict`][]) and $z$ = `band_width` (1.96: 95%).

    **Arguments:**

    - `trajectory`: a [`simlab.Trajectory`][] with one state axis, `ys` of shape `(T, k)`.
    - `data`: `(data_ts, observations)` to draw as points, observations of shape `(N, k)`
      in the trajectory's component order.
    - `stderr`: standard errors of `trajectory.ys`, same shape, drawn as a shaded band.
    - `band_width`: how many standard errors the band spans on each side.
    - `components`: names (or indices) of the components to draw (default: all).
    - `time_label`, `value_label`: axis labels (give units, e.g. `"time (years)"`);
      `value_label=None` is `"state (UNIT)"` when the drawn components share one of `units`.
    - `units`: the unit of each state component, e.g. the model's `state_units`.
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes.

    !!! example

        ```python
        import simlab.plot

        result = simlab.fit(...)
        curve, stderr = result.predict(ts)
        fitted = simlab.simulate(result.model, result.y0, ts)
        ax = simlab.plot.trajectory(fitted, data=(data.ts, data.observations), stderr=stderr)
        ```
    """
    ts, ys = np.asarray(trajectory.ts), np.asarray(trajectory.ys)
    if ys.ndim != 2:
        raise ValueError(
            f"trajectory plots need ys of shape (num_times, num_components); got {ys.shape}. "
            "For fields on a grid draw snapshots with matplotlib's imshow."
        )
    names = list(trajectory.state_names or [f"y{i}" for i in range(ys.shape[1])])
    indices = _indices(components, names)
    units = _checked_units(units, len(names))
    if value_label is None:
        shared = {units[i] for i in indices} if units else set()
        value_label = _with_unit("state", shared.pop() if len(shared) == 1 else "")
    if stderr is not None and np.shape(stderr) != ys.shape:
        raise ValueError(f"stderr must have the shape of ys, {ys.shape}; got {np.shape(stderr)}.")
    if data is not None:
        data_ts, observations = map(np.asarray, data)
        if observations.shape != (data_ts.shape[0], ys.shape[1]):
            raise ValueError(
                f"data must be (ts, observations) with observations of shape "
                f"({data_ts.shape[0]}, {ys.shape[1]}); got {observations.shape}."
            )
    figure, ax = new_axes(ax, figsize=(7, 3.8))
    with style():
        for position, index in enumerate(indices):
            colour = COLOURS[position % len(COLOURS)]
            ax.plot(ts, ys[:, index], color=colour, label=names[index])
            if stderr is not None:
                half = band_width * np.asarray(stderr)[:, index]
                ax.fill_between(
                    ts,
                    ys[:, index] - half,
                    ys[:, index] + half,
                    color=colour,
                    alpha=0.2,
                    linewidth=0,
                )
            if data is not None:
                ax.plot(
                    data_ts,
                    observations[:, index],
                    "o",
                    color=colour,
                    markersize=4,
                    markeredgecolor="white",
                    markeredgewidth=0.5,
                )
        ax.set_xlabel(time_label)
        ax.set_ylabel(value_label)
        ax.legend(handles=_legend_handles(ax, indices, names, data, stderr, band_width))
    return ax


def _checked_units(units, num_components: int) -> tuple[str, ...]:
    """`units` as a tuple of one string per component (`()` when none are given)."""
    if units is None or len(units) == 0:
        return ()
    units = tuple(units)
    if len(units) != num_components or not all(isinstance(unit, str) for unit in units):
        raise ValueError(
            f"units must give one string per state component ({num_components}); got {units!r}."
        )
    return units


def _with_unit(label: str, unit: str) -> str:
    """`"prey (thousands)"`: a label with its unit, or the label alone without one."""
    return f"{label} ({unit})" if unit else label


def _indices(components, names: list[str]) -> list[int]:
    if components is None:
        return list(range(len(names)))
    indices = []
    for component in components:
        if isinstance(component, str):
            if component not in names:
                raise ValueError(f"unknown component {component!r}; the components are {names}.")
            indices.append(names.index(component))
        else:
            indices.append(int(component))
    return indices


def _legend_handles(ax, indices, names, data, stderr, band_width):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Line2D([], [], color=COLOURS[p % len(COLOURS)], label=names[i])
        for p, i in enumerate(indices)
    ]
    if data is not None:
        handles.append(Line2D([], [], marker="o", linestyle="", color="grey", label="data"))
    if stderr is not None:
        share = {1.96: "95%", 1.0: "68%", 2.576: "99%"}.get(band_width, f"±{band_width:g}σ")
        handles.append(Patch(color="grey", alpha=0.3, label=f"{share} band"))
    return handles


def phase_portrait(
    trajectory, *, x=None, y=None, data=None, units=None, xlabel=None, ylabel=None, ax=None
):
    """Plots one state component against another, with the direction of travel marked.

    **Arguments:**

    - `trajectory`: a [`simlab.Trajectory`][] with `ys` of shape `(T, k)`, `k >= 2`.
    - `x`, `y`: the components on the axes, by name or index (default: the first two).
    - `data`: observations of shape `(N, k)` to draw as points in the same plane.
    - `units`: the unit of each state component (e.g. the model's `state_units`), put on
      the axes as `"prey (thousands)"`.
    - `xlabel`, `ylabel`: axis labels in place of the component names and units.
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes.

    !!! example

        ```python
        model = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.9, delta=0.03)
        trajectory = simlab.simulate(model, jnp.array([30.0, 4.0]), jnp.linspace(0, 20, 200))
        ax = simlab.plot.phase_portrait(trajectory, units=model.state_units)
        ```
    """
    ys = np.asarray(trajectory.ys)
    if ys.ndim != 2 or ys.shape[1] < 2:
        raise ValueError(f"a phase portrait needs ys of shape (T, k) with k >= 2; got {ys.shape}.")
    names = list(trajectory.state_names or [f"y{i}" for i in range(ys.shape[1])])
    first, second = _indices([0 if x is None else x, 1 if y is None else y], names)
    units = _checked_units(units, len(names)) or ("",) * len(names)
    figure, ax = new_axes(ax, figsize=(4.6, 4.2))
    with style():
        ax.plot(ys[:, first], ys[:, second], color=COLOURS[0], label="trajectory")
        ax.plot(ys[0, first], ys[0, second], "o", color=COLOURS[0], label="start")
        middle = len(ys) // 3
        if len(ys) > middle + 1:
            ax.annotate(
                "",
                xy=(ys[middle + 1, first], ys[middle + 1, second]),
                xytext=(ys[middle, first], ys[middle, second]),
                arrowprops={"arrowstyle": "-|>", "color": COLOURS[0], "lw": 1.5},
            )
        if data is not None:
            observations = np.asarray(data)
            ax.plot(
                observations[:, first],
                observations[:, second],
                "o",
                color=COLOURS[1],
                markersize=4,
                label="data",
            )
        ax.set_xlabel(_with_unit(names[first], units[first]) if xlabel is None else xlabel)
        ax.set_ylabel(_with_unit(names[second], units[second]) if ylabel is None else ylabel)
        ax.legend()
    return ax
