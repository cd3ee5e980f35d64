"""The figure of a fit: data points, fitted curves and their uncertainty band."""

import jax.numpy as jnp
import numpy as np

from ._style import COLOURS, new_axes, style


def fit_curves(
    result,
    ts,
    observations,
    *,
    num_points: int = 200,
    band_width: float = 1.96,
    labels=None,
    data_set: int = 0,
    member: int = 0,
    time_label: str = "time",
    value_label: str = "observed value",
    ax=None,
):
    r"""Plots observations as points and the fitted model as curves with an uncertainty band.

    The band is $\hat h(t) \pm z\,\sigma(t)$, $\sigma$ the delta-method standard error from
    the fit's covariance ([`simlab.FitResult.predict`][]) and $z$ = `band_width` (1.96:
    95%): the uncertainty of the fitted curve, not the scatter of new observations.

    **Arguments:**

    - `result`: a [`simlab.FitResult`][].
    - `ts`, `observations`: the data of the fitted data set, `(T,)` and `(T, k)`.
    - `num_points`: how many times the curves are evaluated at, across `ts`.
    - `band_width`: standard errors on each side of the band.
    - `labels`: names of the `k` observed quantities (default: the model's state names
      when the whole state is observed, else `"observable i"`).
    - `data_set`, `member`: which data set / batch member to draw (fits to several).
    - `time_label`, `value_label`: axis labels (give units).
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes.

    !!! example

        ```python
        import simlab.plot

        data = simlab.datasets.lynx_hare()
        ax = simlab.plot.fit_curves(result, data.ts, data.observations)
        ```
    """
    ts = np.asarray(ts, dtype=float)
    observations = np.asarray(observations, dtype=float)
    if observations.ndim == 1:
        observations = observations[:, None]
    if ts.ndim != 1 or observations.shape[0] != ts.shape[0]:
        raise ValueError(
            f"observations must have one row per time: ts has shape {ts.shape}, observations "
            f"{observations.shape}."
        )
    fine_ts = jnp.linspace(ts[0], ts[-1], num_points)
    prediction, stderr = result.predict(fine_ts, data_set=data_set, member=member)
    prediction, stderr = np.asarray(prediction), np.asarray(stderr)
    if prediction.shape[1] != observations.shape[1]:
        raise ValueError(
            f"the fit observes {prediction.shape[1]} quantities but observations has "
            f"{observations.shape[1]} columns."
        )
    labels = _labels(result, prediction.shape[1]) if labels is None else list(labels)
    figure, ax = new_axes(ax, figsize=(6.5, 3.8))
    with style():
        for j, label in enumerate(labels):
            colour = COLOURS[j % len(COLOURS)]
            ax.fill_between(
                np.asarray(fine_ts),
                prediction[:, j] - band_width * stderr[:, j],
                prediction[:, j] + band_width * stderr[:, j],
                color=colour,
                alpha=0.25,
                linewidth=0,
            )
            ax.plot(np.asarray(fine_ts), prediction[:, j], color=colour, label=f"{label} (fit)")
            ax.plot(ts, observations[:, j], "o", color=colour, markersize=4, label=label)
        ax.set_xlabel(time_label)
        ax.set_ylabel(value_label)
        # Below the axes: inside, the legend would hide peaks of the data.
        ax.legend(
            frameon=False,
            ncols=min(4, 2 * len(labels)),
            loc="upper center",
            bbox_to_anchor=(0.5, -0.15),
        )
    return ax


def _labels(result, num_observed: int) -> list[str]:
    observed = result.problem.observed_names
    if observed:
        return list(observed)
    names = list(getattr(result.model, "state_names", ()) or ())
    if len(names) == num_observed:
        return names
    return [f"observable {j}" for j in range(num_observed)]
