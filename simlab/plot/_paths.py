"""Figures of many stochastic paths: a fan chart over time, a histogram at one time."""

import numbers
from collections.abc import Callable

import numpy as np

from ._style import COLOURS, new_axes, style


def _paths_of_one_component(paths, component: int) -> np.ndarray:
    paths = np.asarray(paths)
    if paths.ndim == 3:
        paths = paths[..., component]
    if paths.ndim != 2:
        raise ValueError(
            "paths must have shape (num_paths, num_times) or (num_paths, num_times, "
            f"num_components); got {paths.shape}."
        )
    return paths


def fan_chart(
    ts,
    paths,
    *,
    component: int = 0,
    bands: tuple[numbers.Real, ...] = (0.5, 0.9),
    sample_paths: int = 5,
    time_label: str = "time",
    value_label: str = "state",
    ax=None,
):
    """Draws the median of many paths over time, central bands holding `bands` of them
    (50 % and 90 % by default) and a few paths themselves.

    **Arguments:**

    - `ts`: the save times, shape `(T,)`.
    - `paths`: shape `(N, T)`, or `(N, T, k)` with `component` picking one component
      (e.g. `jax.vmap` of `simulate(..., key=key).ys` over `jax.random.split(key, N)`).
    - `bands`: the fractions of paths each shaded band holds, widest drawn lightest.
    - `sample_paths`: how many individual paths to draw thinly (the first ones).
    - `time_label`, `value_label`: axis labels; `ax`: the Axes (`None`: a new figure).

    **Returns:** the Axes.

    !!! example

        ```python
        def path(key):
            return simlab.simulate(model, y0, ts, key=key, adaptive=False, dt0=0.01).ys

        ys = jax.vmap(path)(jax.random.split(jax.random.key(0), 1000))
        simlab.plot.fan_chart(ts, ys)
        ```
    """
    ts, paths = np.asarray(ts), _paths_of_one_component(paths, component)
    if paths.shape[1] != ts.shape[0]:
        raise ValueError(f"paths have {paths.shape[1]} times but ts has {ts.shape[0]}.")
    if not all(0 < band < 1 for band in bands):
        raise ValueError(f"bands must be fractions in (0, 1); got {bands}.")
    _, ax = new_axes(ax, figsize=(7, 3.8))
    colour = COLOURS[0]
    with style():
        for band in sorted(bands, reverse=True):
            low, high = np.nanquantile(paths, [(1 - band) / 2, (1 + band) / 2], axis=0)
            alpha = 0.15 + 0.25 * (1 - band)
            ax.fill_between(ts, low, high, color=colour, alpha=alpha, lw=0, label=f"{band:.0%}")
        for path in paths[:sample_paths]:
            ax.plot(ts, path, color="0.35", lw=0.6, alpha=0.7)
        ax.plot(ts, np.nanmedian(paths, axis=0), color=colour, lw=2, label="median")
        ax.set_xlabel(time_label)
        ax.set_ylabel(value_label)
        ax.legend(frameon=False)
    return ax


def terminal_histogram(
    values,
    *,
    density: Callable[[np.ndarray], np.ndarray] | None = None,
    density_label: str = "stationary density",
    bins: int = 60,
    value_label: str = "state",
    ax=None,
):
    """Draws a normalised histogram of `values` (e.g. every path's final state) and, where
    known, the density they should follow.

    **Arguments:**

    - `values`: a 1-D array of samples.
    - `density`: a function of an array of values, e.g. the stationary density of an
      Ornstein–Uhlenbeck process, drawn over the histogram's range.
    - `density_label`, `bins`, `value_label`; `ax`: the Axes (`None`: a new figure).

    **Returns:** the Axes.
    """
    values = np.asarray(values).ravel()
    values = values[np.isfinite(values)]
    if values.size == 0:
        raise ValueError("terminal_histogram needs at least one finite value.")
    _, ax = new_axes(ax, figsize=(5.5, 3.8))
    with style():
        ax.hist(values, bins=bins, density=True, color=COLOURS[0], alpha=0.45, label="paths")
        if density is not None:
            grid = np.linspace(values.min(), values.max(), 400)
            ax.plot(grid, density(grid), color=COLOURS[1], lw=2, label=density_label)
        ax.set_xlabel(value_label)
        ax.set_ylabel("density")
        ax.legend(frameon=False)
    return ax
