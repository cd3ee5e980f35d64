"""Figures of many stochastic paths: a fan chart over time, a histogram at one time, escape
rates from mean first-passage times."""

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


def escape_rates(
    noise,
    mean_times,
    standard_errors,
    *,
    exact_time: Callable | None = None,
    asymptotic_rate: Callable | None = None,
    noise_label: str = "noise strength D",
    sample_label: str = "simulated",
    asymptote_label: str = "Kramers' formula",
):
    r"""Draws escape rates $1/\bar T$ measured from mean first-passage times against the
    noise strength (log scale, error bars of one standard error, $\sigma_T / \bar T^2$),
    with the exact rate and an asymptotic formula as lines; beneath, each time in units of
    the asymptotic one, $\bar T\, r_\text{asym}$, which tends to 1 where the formula holds.

    **Arguments:**

    - `noise`: the noise strengths, shape `(n,)`.
    - `mean_times`, `standard_errors`: the mean first-passage time at each and its
      standard error.
    - `exact_time`: the exact mean first-passage time as a function of the noise (drawn
      as $1/T$), e.g. `lambda D: DoubleWell(D=D).mean_first_passage_time(-1.0, 1.0)`.
    - `asymptotic_rate`: the asymptotic rate as a function of the noise, e.g.
      `lambda D: DoubleWell(D=D).kramers_rate()`; needed for the lower panel.
    - `noise_label`, `sample_label`, `asymptote_label`: the axis and legend labels.

    **Returns:** the Figure (its two Axes: rates, then times in asymptotic units).

    !!! example

        ```python
        from simlab.models import DoubleWell

        simlab.plot.escape_rates(
            [0.1, 0.2],
            [65.0, 20.4],  # measured mean first-passage times from x = -1 to 1
            [4.5, 1.4],
            exact_time=lambda D: DoubleWell(D=D).mean_first_passage_time(-1.0, 1.0),
            asymptotic_rate=lambda D: DoubleWell(D=D).kramers_rate(),
        )
        ```
    """
    import matplotlib.pyplot as plt

    noise, mean_times, errors = (
        np.asarray(v, np.float64) for v in (noise, mean_times, standard_errors)
    )
    dense = np.linspace(noise.min(), noise.max(), 60)
    exact = None if exact_time is None else np.array([exact_time(d) for d in dense])
    with style():
        rows = 2 if asymptotic_rate is not None else 1
        figure, axes = plt.subplots(rows, 1, sharex=True, figsize=(6, 2.6 + 2.2 * rows))
        axes = np.atleast_1d(axes)
        rate, rate_error = 1 / mean_times, errors / mean_times**2
        axes[0].errorbar(noise, rate, rate_error, fmt="o", color=COLOURS[0], label=sample_label)
        if exact is not None:
            axes[0].plot(dense, 1 / exact, color=COLOURS[1], label="exact (quadrature)")
        if asymptotic_rate is not None:
            asymptote = np.array([asymptotic_rate(d) for d in dense])
            axes[0].plot(dense, asymptote, "--", color="0.3", label=asymptote_label)
            scale = np.array([asymptotic_rate(d) for d in noise])
            axes[1].errorbar(noise, mean_times * scale, errors * scale, fmt="o", color=COLOURS[0])
            if exact is not None:
                axes[1].plot(dense, exact * asymptote, color=COLOURS[1])
            axes[1].axhline(1.0, ls="--", color="0.3")
            axes[1].set_ylabel(rf"$\bar T \times$ the rate by {asymptote_label}")
        axes[0].set_yscale("log")
        axes[0].set_ylabel(r"escape rate $1/\bar T$")
        axes[0].legend(frameon=False)
        axes[-1].set_xlabel(noise_label)
    return figure
