"""Figures of the likelihood: multi-start waterfalls, profile likelihoods, posterior corners."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from .._fit._multistart import Starts
from ._style import COLOURS, new_axes, style


def waterfall(result, *, tolerance: float = 1e-3, ax=None):
    r"""Plots the final loss of every start of a multi-start fit, sorted, as pyPESTO does.

    A plateau at the left, several starts ending at the same lowest loss, says that the
    optimum was found more than once; a staircase says that more starts may find a lower
    one. The y-axis is the loss minus the best one, plus 1 (log scale), so the best start
    sits at 1.

    **Arguments:**

    - `result`: a [`simlab.FitResult`][] of a fit with `starts=N`, or its
      [`simlab.Starts`][] (`result.starts`).
    - `tolerance`: starts within this much of the best loss are drawn as having found it.
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes.

    !!! example

        ```python
        result = simlab.fit(model, ts, observations, y0=y0, params=["frequency"],
                            starts=100, bounds={"frequency": (0.1, 10.0)}, key=jr.key(0))
        ax = simlab.plot.waterfall(result)
        ```
    """
    starts = result if isinstance(result, Starts) else result.starts
    if starts is None:
        raise ValueError("waterfall needs a multi-start fit: pass starts=N (and bounds, key).")
    loss = np.sort(np.asarray(starts.loss))
    finite = np.isfinite(loss)
    relative = loss[finite] - loss[finite][0] + 1.0
    found = relative - 1.0 <= tolerance * max(1.0, abs(loss[finite][0]))
    figure, ax = new_axes(ax, figsize=(5.5, 3.6))
    with style():
        ranks = np.arange(1, relative.size + 1)
        ax.plot(ranks, relative, color=COLOURS[0], marker=".", lw=1)
        ax.plot(
            ranks[found],
            relative[found],
            ls="",
            marker="o",
            color=COLOURS[1],
            label=f"{int(found.sum())} of {loss.size} starts at the best loss",
        )
        ax.set_yscale("log")
        # At least a decade: starts that all agree must not fill the axis with rounding.
        ax.set_ylim(0.8, max(10.0, 2.0 * float(relative.max())))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("start, sorted by final loss")
        ax.set_ylabel("final loss − best + 1")
        if not np.all(finite):
            ax.set_title(f"{int((~finite).sum())} start(s) failed", fontsize=9)
        ax.legend(loc="upper left")
    return ax


def profiles(profiles, *, axes=None):
    r"""Plots profile likelihoods, each with its threshold and confidence interval.

    The curve is $\mathrm{PL}(c) - \mathrm{PL}(\hat\theta)$; the dashed line is
    $\tfrac12\chi^2_1$ at the profile's level, and the shaded span the interval (to the
    edge of the grid, with an arrow, where it is open).

    **Arguments:**

    - `profiles`: a [`simlab.Profile`][], a list of them, or the dict
      [`simlab.FitResult.profile`][] returns for several names.
    - `axes`: a sequence of Axes, one per profile; `None` makes a new figure.

    **Returns:** the list of Axes.

    !!! example

        ```python
        ax = simlab.plot.profiles(result.profile(["alpha", "gamma"]))
        ```
    """
    profiles = list(profiles.values()) if isinstance(profiles, dict) else profiles
    profiles = [profiles] if not isinstance(profiles, list | tuple) else list(profiles)
    if not profiles:
        raise ValueError("profiles is empty: pass at least one simlab.Profile.")
    with style():
        if axes is None:
            figure, axes = plt.subplots(
                1, len(profiles), figsize=(3.4 * len(profiles), 3.2), squeeze=False
            )
            axes = list(axes[0])
        elif len(axes) != len(profiles):
            raise ValueError(f"got {len(axes)} axes for {len(profiles)} profiles.")
        for ax, profile in zip(axes, profiles, strict=True):
            values, nll = np.asarray(profile.values), np.asarray(profile.nll)
            threshold = float(profile.threshold)
            lower = values[0] if bool(profile.lower_open) else float(profile.lower)
            upper = values[-1] if bool(profile.upper_open) else float(profile.upper)
            ax.axvspan(
                lower,
                upper,
                color=COLOURS[0],
                alpha=0.12,
                label=f"{100 * profile.level:g}% interval",
            )
            ax.plot(values, nll, color=COLOURS[0], marker=".")
            ax.axhline(threshold, color=COLOURS[1], ls="--", lw=1, label="χ² threshold")
            ax.axvline(float(profile.estimate), color="0.4", lw=0.8)
            for is_open, end, sign in (
                (profile.lower_open, lower, -1),
                (profile.upper_open, upper, 1),
            ):
                if bool(is_open):
                    ax.annotate(
                        "open",
                        (end, threshold),
                        xytext=(-sign * 28, 8),
                        textcoords="offset points",
                        arrowprops=dict(arrowstyle="->"),
                    )
            ax.set_xlabel(profile.name)
            ax.set_ylim(bottom=min(0.0, float(np.nanmin(nll))) - 0.05 * threshold)
        axes[0].set_ylabel("Δ negative log-likelihood")
        axes[0].legend(loc="upper center", fontsize=8)
        axes[0].figure.tight_layout()
    return axes


def corner(posterior, *, names=None, num_bins: int = 30, figure=None):
    r"""A corner plot of posterior samples: each parameter's histogram on the diagonal, each
    pair's scatter below it.

    **Arguments:**

    - `posterior`: a [`simlab.Posterior`][].
    - `names`: the parameters to show (default: all sampled scalars).
    - `num_bins`: histogram bins.
    - `figure`: a Figure to draw on; `None` makes one.

    **Returns:** the Figure.

    !!! example

        ```python
        figure = simlab.plot.corner(simlab.sample(result, key=jr.key(0)))
        ```
    """
    draws = posterior.flat_samples()
    names = list(draws) if names is None else list(names)
    unknown = [n for n in names if n not in draws]
    if unknown or not names:
        raise ValueError(f"unknown parameters {unknown or names}; the posterior has {list(draws)}.")
    count = len(names)
    with style():
        figure = figure or plt.figure(figsize=(2.3 * count + 0.6, 2.3 * count + 0.4))
        grid = figure.subplots(count, count, squeeze=False)
        for i, row in enumerate(names):
            for j, column in enumerate(names):
                ax = grid[i][j]
                if j > i:
                    ax.set_visible(False)
                    continue
                if i == j:
                    ax.hist(draws[row], bins=num_bins, color=COLOURS[0], alpha=0.8)
                    ax.set_yticks([])
                else:
                    ax.plot(
                        draws[column],
                        draws[row],
                        ls="",
                        marker=".",
                        ms=1.5,
                        alpha=0.3,
                        color=COLOURS[0],
                    )
                if i == count - 1:
                    ax.set_xlabel(column)
                else:
                    ax.set_xticklabels([])
                if j == 0 and i > 0:
                    ax.set_ylabel(row)
        figure.tight_layout()
    return figure
