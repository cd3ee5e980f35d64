"""The figure of a fit: data points, fitted curves and their uncertainty band."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._fit._noise import LogNormal
from .._fit._uncertainty import natural_values, with_natural_values
from ._style import COLOURS, new_axes, style


def fit_curves(
    result,
    ts,
    observations,
    *,
    num_points: int = 200,
    band_width: float = 1.96,
    prediction_band: bool = True,
    posterior=None,
    num_draws: int = 200,
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
      and $s$ the noise scale: where new observations are expected to fall (under
      log-normal noise the same in $\log y$, a band that widens with the curve; none for
      count noise).

    With `posterior` (a [`simlab.Posterior`][] of this fit), the confidence band is the
    *posterior band* instead: the model simulated from `num_draws` posterior draws, and at
    each time the central interval of those curves at the same level (the quantiles
    $\tfrac12(1 \mp \text{level})$), with the posterior median dashed; the delta-method
    band's edges stay as thin lines, for comparison.

    A fit with `t0` draws its curves from `t0` (a dashed line), where its initial state
    holds. The legend sits above the axes, inside the figure (constrained layout), so that a plain
    `savefig` keeps it.

    **Arguments:**

    - `result`: a [`simlab.FitResult`][].
    - `ts`, `observations`: the data of the fitted data set, `(T,)` and `(T, k)`.
    - `num_points`: how many times the curves are evaluated at, across `ts`.
    - `band_width`: standard errors on each side of the bands.
    - `prediction_band`: also draw the band of new observations.
    - `posterior`, `num_draws`: draw the band of curves simulated from this many draws of
      a [`simlab.Posterior`][] (evenly spaced through its pooled chains).
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
    experiment = result.problem.experiments[data_set]
    t0 = float(experiment.ts[0]) if experiment.skip else None  # the fit started before ts[0]
    fine = (
        np.linspace(ts[0], ts[-1], num_points)
        if t0 is None
        else np.linspace(t0, ts[-1], num_points + 1)[1:]  # from t0, where y0 holds
    )
    prediction, stderr = result.predict(jnp.asarray(fine), data_set=data_set, member=member)
    prediction, stderr = np.asarray(prediction), np.asarray(stderr)
    confidence = band_width * stderr
    lower, upper = prediction_limits(result, prediction, stderr, band_width, data_set, member)
    if prediction.shape[1] != observations.shape[1]:
        raise ValueError(
            f"the fit observes {prediction.shape[1]} quantities but observations has "
            f"{observations.shape[1]} columns."
        )
    labels = _labels(result, prediction.shape[1]) if labels is None else list(labels)
    coverage = math.erf(band_width / math.sqrt(2))
    level = f"{100 * coverage:.3g}%"
    curves = None
    if posterior is not None:
        curves = posterior_curves(
            result, posterior, fine, num_draws=num_draws, data_set=data_set, member=member
        )
    figure, ax = new_axes(ax, figsize=(6.5, 4.2), layout="constrained")
    with style():
        for j, label in enumerate(labels):
            colour = COLOURS[j % len(COLOURS)]
            first = j == 0
            if prediction_band and np.all(np.isfinite(upper[:, j] - lower[:, j])):
                ax.fill_between(
                    fine, lower[:, j], upper[:, j],
                    color=colour, alpha=0.10, linewidth=0,
                    label=f"{level} prediction band (new observations)" if first else None,
                )  # fmt: skip
            if curves is None:
                ax.fill_between(
                    fine, prediction[:, j] - confidence[:, j], prediction[:, j] + confidence[:, j],
                    color=colour, alpha=0.30, linewidth=0,
                    label=f"{level} confidence band of the mean" if first else None,
                )  # fmt: skip
            else:
                _posterior_band(ax, fine, curves[:, :, j], coverage, colour, first)
                for sign in (-1, 1):
                    ax.plot(
                        fine, prediction[:, j] + sign * confidence[:, j], color=colour, lw=0.6,
                        ls=":", label=f"{level} delta-method band" if first and sign < 0 else None,
                    )  # fmt: skip
            ax.plot(fine, prediction[:, j], color=colour, label=f"{label} (fit)")
            ax.plot(ts, observations[:, j], "o", color=colour, markersize=4, label=label)
        if t0 is not None:
            ax.axvline(t0, color="0.5", lw=0.8, ls="--", label=f"t0 = {t0:g} (start)")
        ax.set_xlabel(time_label)
        ax.set_ylabel(
            _value_label(result, prediction.shape[1]) if value_label is None else value_label
        )
        # Above the axes: inside, the legend would hide peaks of the data. Constrained
        # layout makes room for it, so a plain savefig keeps it.
        ax.legend(frameon=False, ncols=2, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return ax


def posterior_band(
    ts,
    curves,
    *,
    level: float = 0.95,
    data=None,
    fitted=None,
    labels=None,
    legend_title: str | None = None,
    time_label: str = "time",
    value_label: str = "observed value",
    ax=None,
):
    r"""Plots the posterior predictive band of stored curves: at each time, the central
    interval at `level` of the curves simulated from posterior draws, and their median.

    **Arguments:**

    - `ts`: the times of the curves, `(T,)`.
    - `curves`: `(num_draws, T, k)`, e.g. from [`simlab.plot.posterior_curves`][].
    - `level`: the band's probability (quantiles $	frac12(1 \mp 	ext{level})$).
    - `data`: optional `(data_ts, observations)`, drawn as points (NaN: not observed).
    - `fitted`: optional `(T, k)` fitted curve, drawn as a line.
    - `labels`: names of the `k` quantities.
    - `legend_title`: a line above the legend entries (e.g. how many draws were simulated).
    - `time_label`, `value_label`: axis labels.
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes.

    !!! example

        ```python
        curves = simlab.plot.posterior_curves(result, posterior, ts)
        ax = simlab.plot.posterior_band(ts, curves, data=(data.ts, data.observations))
        ```
    """
    ts, curves = np.asarray(ts, dtype=float), np.asarray(curves, dtype=float)
    if curves.ndim != 3 or curves.shape[1] != ts.shape[0]:
        raise ValueError(
            f"curves must have shape (num_draws, len(ts), k); got {curves.shape} for "
            f"{ts.shape[0]} times."
        )
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), e.g. 0.95; got {level!r}.")
    count = curves.shape[2]
    labels = [f"observable {j}" for j in range(count)] if labels is None else list(labels)
    figure, ax = new_axes(ax, figsize=(6.5, 4.2), layout="constrained")
    with style():
        for j, label in enumerate(labels):
            colour = COLOURS[j % len(COLOURS)]
            _posterior_band(ax, ts, curves[:, :, j], level, colour, j == 0)
            if fitted is not None:
                ax.plot(ts, np.asarray(fitted)[:, j], color=colour, label=f"{label} (fit)")
            if data is not None:
                data_ts, observations = (np.asarray(a, dtype=float) for a in data)
                ax.plot(data_ts, observations[:, j], "o", color=colour, markersize=4, label=label)
        ax.set_xlabel(time_label)
        ax.set_ylabel(value_label)
        ax.legend(
            frameon=False,
            ncols=2,
            loc="lower center",
            bbox_to_anchor=(0.5, 1.0),
            title=legend_title,
            title_fontsize=9,
        )
    return ax


def _posterior_band(ax, ts, curves, level: float, colour, first: bool) -> None:
    """One quantity's band `(num_draws, T)` and its median, labelled once."""
    lower, median, upper = np.nanquantile(curves, [0.5 - level / 2, 0.5, 0.5 + level / 2], 0)
    ax.fill_between(
        ts, lower, upper, color=colour, alpha=0.30, linewidth=0,
        label=f"{100 * level:.3g}% posterior band" if first else None,
    )  # fmt: skip
    ax.plot(ts, median, color=colour, ls="--", lw=1, label="posterior median" if first else None)


def posterior_curves(result, posterior, ts, *, num_draws: int = 200, data_set=0, member=0):
    r"""The fitted model's observed quantities at `ts`, simulated from posterior draws.

    Each draw $	heta^{(s)}$ of the fitted scalars (parameters and fitted initial states)
    is put into the model, which is simulated as in [`simlab.FitResult.predict`][]; the
    draws are `num_draws` evenly spaced ones through the pooled chains, all simulated as
    one vmapped, compiled solve. Their spread at each time is the posterior uncertainty of
    the curve (no observation noise added).

    **Arguments:**

    - `result`: the [`simlab.FitResult`][] the posterior was drawn for.
    - `posterior`: its [`simlab.Posterior`][].
    - `ts`: save times (from the data's first time, or from the fit's `t0`).
    - `num_draws`: how many draws to simulate (at most all of them).
    - `data_set`, `member`: which data set and batch member supplies the initial state.

    **Returns:** an array `(num_draws, len(ts), k)`.
    """
    if not isinstance(num_draws, int) or num_draws < 1:
        raise ValueError(f"num_draws must be a positive integer; got {num_draws!r}.")
    problem = result.problem
    y0s = tuple(e.y0 for e in problem.experiments)
    size = natural_values(problem, result.model, y0s).size
    labels = result.covariance_labels[:size]
    draws = posterior.flat_samples()
    missing = [label for label in labels if label not in draws]
    if missing:
        raise ValueError(
            f"the posterior has no draws of {missing}; pass the Posterior that simlab.sample "
            "drew for this fit."
        )
    total = draws[labels[0]].size if labels else 1
    chosen = np.unique(np.linspace(0, total - 1, min(num_draws, total)).round().astype(int))
    thetas = np.stack([draws[label][chosen] for label in labels], axis=-1)
    ts = jnp.asarray(ts, dtype=float)
    return np.asarray(
        _simulate_draws(
            result, jnp.asarray(thetas).reshape(chosen.size, size), ts, data_set, member
        )
    )


@eqx.filter_jit
def _simulate_draws(result, thetas, ts, data_set: int, member: int):
    problem, model = result.problem, result.model
    y0s = tuple(e.y0 for e in problem.experiments)
    experiment = problem.experiments[data_set]
    if experiment.skip:  # the simulation starts at t0, before the first time asked for
        ts = jnp.concatenate([experiment.ts[:1], ts])

    def one(theta):
        drawn_model, drawn_y0s = with_natural_values(problem, model, y0s, theta)
        predicted, _ = problem.predict(drawn_model, drawn_y0s[data_set][member], ts, "forward")
        return predicted[experiment.skip :]

    return jax.vmap(one)(thetas)


def bands(result, ts, band_width: float = 1.96, data_set: int = 0, member: int = 0):
    """`(prediction, confidence, spread)` at `ts`, each `(len(ts), k)`: the fitted curve,
    and the half-widths of its confidence band and of the prediction band (its upper
    half-width under log-normal noise, where the band is not symmetric)."""
    prediction, stderr = result.predict(jnp.asarray(ts), data_set=data_set, member=member)
    prediction, stderr = np.asarray(prediction), np.asarray(stderr)
    _, upper = prediction_limits(result, prediction, stderr, band_width, data_set, member)
    return prediction, band_width * stderr, upper - prediction


def prediction_limits(result, prediction, stderr, band_width: float, data_set=0, member=0):
    r"""The prediction band's `(lower, upper)`: where new observations are expected.

    Additive noise: $\hat h \pm z\sqrt{\sigma_h^2 + \hat\sigma^2 s^2}$. Log-normal noise
    is additive in $\log y$, so the band is $\hat h\,e^{\pm z \sqrt{(\sigma_h/\hat h)^2 +
    \hat\sigma^2 s^2}}$ ($\sigma_h/\hat h$ the standard error of $\log\hat h$)."""
    # The noise scale of each observed quantity (its median over times, if it varies).
    scale = np.median(np.asarray(result.problem.experiments[data_set].noise_scale[member]), 0)
    observation_sd = np.sqrt(float(result.noise_variance)) * scale
    if isinstance(result.problem.noise, LogNormal):
        with np.errstate(divide="ignore", invalid="ignore"):
            spread = band_width * np.sqrt((stderr / prediction) ** 2 + observation_sd**2)
        return prediction * np.exp(-spread), prediction * np.exp(spread)
    spread = band_width * np.sqrt(stderr**2 + observation_sd**2)
    return prediction - spread, prediction + spread


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
