"""The figure of a fit: data points, fitted curves and their uncertainty band."""

import math

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
    prediction_band: bool = True,
    labels=None,
    data_set: int = 0,
    member: int = 0,
    time_label: str = "time",
    value_label: str | None = None,
    ax=None,
):
    r"""Plots observations as points and the fitted model as curves with uncertainty bands.

    Two bands, both $\pm z$ standard errors with $z$ = `band_width` (1.96: 95%):

    - the *confidence band of the mean*, $\hat h(t) \pm z\,\sigma_h(t)$, $\sigma_h$ the
      delta-method standard error of the fitted curve ([`simlab.FitResult.predict`][]):
      where the true curve lies;
    - the *prediction band* (lighter, `prediction_band=True`), $\hat h(t) \pm
      z\sqrt{\sigma_h(t)^2 + \hat\sigma^2 s^2}$, $\hat\sigma^2$ the fit's noise variance
      and $s$ the noise scale: where new observations are expected to fall.

    The legend sits above the axes, inside the figure (constrained layout), so that a plain
    `savefig` keeps it.

    **Arguments:**

    - `result`: a [`simlab.FitResult`][].
    - `ts`, `observations`: the data of the fitted data set, `(T,)` and `(T, k)`.
    - `num_points`: how many times the curves are evaluated at, across `ts`.
    - `band_width`: standard errors on each side of the bands.
    - `prediction_band`: also draw the band of new observations.
    - `labels`: names of the `k` observed quantities (default: the model's state names
      when the whole state is observed, else `"observable i"`).
    - `data_set`, `member`: which data set / batch member to draw (fits to several).
    - `time_label`, `value_label`: axis labels (give units; `value_label=None` uses the
      model's `state_units` when the observed quantities share one).
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes.

    !!! example

        ```python
        import simlab.plot

        data = simlab.datasets.lynx_hare()
        ax = simlab.plot.fit_curves(result, data.ts, data.observations,
                                    time_label=f"time ({data.time_unit})")
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
    fine = np.linspace(ts[0], ts[-1], num_points)
    prediction, confidence, spread = bands(result, fine, band_width, data_set, member)
    if prediction.shape[1] != observations.shape[1]:
        raise ValueError(
            f"the fit observes {prediction.shape[1]} quantities but observations has "
            f"{observations.shape[1]} columns."
        )
    labels = _labels(result, prediction.shape[1]) if labels is None else list(labels)
    level = f"{100 * math.erf(band_width / math.sqrt(2)):.3g}%"
    figure, ax = new_axes(ax, figsize=(6.5, 4.2), layout="constrained")
    with style():
        for j, label in enumerate(labels):
            colour = COLOURS[j % len(COLOURS)]
            first = j == 0
            if prediction_band and np.all(np.isfinite(spread[:, j])):
                ax.fill_between(
                    fine, prediction[:, j] - spread[:, j], prediction[:, j] + spread[:, j],
                    color=colour, alpha=0.10, linewidth=0,
                    label=f"{level} prediction band (new observations)" if first else None,
                )  # fmt: skip
            ax.fill_between(
                fine, prediction[:, j] - confidence[:, j], prediction[:, j] + confidence[:, j],
                color=colour, alpha=0.30, linewidth=0,
                label=f"{level} confidence band of the mean" if first else None,
            )  # fmt: skip
            ax.plot(fine, prediction[:, j], color=colour, label=f"{label} (fit)")
            ax.plot(ts, observations[:, j], "o", color=colour, markersize=4, label=label)
        ax.set_xlabel(time_label)
        ax.set_ylabel(
            _value_label(result, prediction.shape[1]) if value_label is None else value_label
        )
        # Above the axes: inside, the legend would hide peaks of the data. Constrained
        # layout makes room for it, so a plain savefig keeps it.
        ax.legend(frameon=False, ncols=2, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return ax


def bands(result, ts, band_width: float = 1.96, data_set: int = 0, member: int = 0):
    """`(prediction, confidence, spread)` at `ts`, each `(len(ts), k)`: the fitted curve,
    and the half-widths of its confidence band and of the prediction band."""
    prediction, stderr = result.predict(jnp.asarray(ts), data_set=data_set, member=member)
    prediction, stderr = np.asarray(prediction), np.asarray(stderr)
    # The noise scale of each observed quantity (its median over times, if it varies).
    scale = np.median(np.asarray(result.problem.experiments[data_set].noise_scale[member]), 0)
    observation_sd = np.sqrt(float(result.noise_variance)) * scale
    spread = band_width * np.sqrt(stderr**2 + observation_sd**2)
    return prediction, band_width * stderr, spread


def _value_label(result, num_observed: int) -> str:
    model = result.model
    names, units = getattr(model, "state_names", ()), getattr(model, "state_units", ())
    units = dict(zip(names, units, strict=False))  # no units declared: ()
    observed = result.problem.observed_names or getattr(model, "state_names", ())
    found = {units.get(name, "") for name in observed} if len(observed) == num_observed else {""}
    (unit,) = found if len(found) == 1 else ("",)
    return f"observed value ({unit})" if unit else "observed value"


def _labels(result, num_observed: int) -> list[str]:
    observed = result.problem.observed_names
    if observed:
        return list(observed)
    names = list(getattr(result.model, "state_names", ()) or ())
    if len(names) == num_observed:
        return names
    return [f"observable {j}" for j in range(num_observed)]
