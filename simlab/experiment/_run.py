"""Running a checked experiment: data, fit, simulation, sweep; then a results folder."""

import contextlib
import dataclasses
import json
import logging
import time
import warnings
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from .. import _continuation, _fit, _sensitivity, _simulate, _sweep
from .._options import SolveOptions
from .._results import status_code, status_name
from ..models import AbstractGridModel
from ..parallel import member_mesh
from ._fields import OBSERVABLE_FUNCTIONS, PathObservable, with_first_passage
from ._folder import CONTINUATION_ARRAYS, PROFILE_ARRAYS
from ._spec import DataSpec, Experiment


@dataclasses.dataclass
class Outcome:
    """What a run produced, before it is written: arrays, metrics and (maybe) a sweep."""

    arrays: dict[str, np.ndarray]
    metrics: dict[str, Any]


def compute(
    experiment: Experiment,
    *,
    sweep_store: Any = None,
    devices: Sequence[jax.Device] | None = None,
    quiet: bool = False,
) -> Outcome:
    """Runs the experiment's data generation, fit, simulation, sweep, sensitivity analysis
    and continuation, in that order."""
    say = (lambda message: None) if quiet else (lambda message: print(message, flush=True))
    arrays: dict[str, np.ndarray] = {}
    metrics: dict[str, Any] = {"experiment": experiment.name, "description": experiment.description}
    wall: dict[str, float] = {}
    model, y0 = experiment.model, jnp.asarray(experiment.y0)
    ts = experiment.time.ts()

    data = experiment.data
    if data is not None and data.source == "synthetic":
        data = _synthetic(experiment, data)
        metrics["true_parameters"] = data.true_parameters
    if data is not None:
        arrays["data_ts"], arrays["data_observations"] = data.ts, data.observations

    if experiment.fit is not None:
        model, y0, fitted = _run_fit(experiment, data, arrays, metrics, wall, say, quiet)

    started = time.perf_counter()
    save_ts, skip = simulation_times(experiment)
    ensemble = experiment.ensemble
    key = None if ensemble is None else jr.key(ensemble.seed)
    trajectory = _simulate.simulate(
        model,
        y0,
        save_ts,
        throw=False,
        options=SolveOptions.from_mapping(experiment.solver),
        # A stochastic path's event is read off the path; it is the sweep's path 0.
        event=None if experiment.event is None or key is not None else experiment.event(model),
        key=None if key is None else jr.fold_in(key, 0),
    )
    if key is not None and experiment.event is not None:
        trajectory = with_first_passage(experiment.event, trajectory)
    arrays["simulation_ts"], arrays["simulation_ys"] = (
        np.asarray(ts),
        np.asarray(trajectory.ys)[skip:],
    )
    metrics["simulation"] = {
        "succeeded": bool(trajectory.succeeded),
        "status": status_name(int(status_code(trajectory.result))),
        "num_steps": int(trajectory.stats["num_steps"]),
    }
    if experiment.event is not None:
        metrics["simulation"]["event"] = _event_metrics(trajectory)
    wall["simulation"] = time.perf_counter() - started

    if experiment.fit is not None and experiment.fit.sampling is not None:
        started = time.perf_counter()
        _run_sampling(experiment, fitted, arrays, metrics, say, quiet)
        wall["sampling"] = time.perf_counter() - started

    if experiment.sweep is not None:
        started = time.perf_counter()
        axes = sweep_axes(experiment, model)
        say(f"sweeping {' x '.join(f'{name} ({len(v)})' for name, v in axes.items())} ...")
        mesh = member_mesh(list(devices)) if devices is not None else None
        observable = OBSERVABLE_FUNCTIONS[experiment.sweep.observable]
        paths = {}
        if ensemble is not None:  # every path's observables kept, events read off the paths
            paths = dict(paths=ensemble.paths, key=key, keep_paths=True)
            if experiment.event is not None:
                observable = PathObservable(experiment.event, observable)
        sweep_result = _sweep.sweep(
            model,
            axes,
            y0,
            save_ts,
            mode=experiment.sweep.mode,
            observable=observable,
            mesh=mesh,
            store=sweep_store,
            progress=False if quiet else None,
            options=SolveOptions.from_mapping(experiment.solver),
            event=None if ensemble is not None else experiment.event,
            **paths,
        )
        metrics["sweep"] = _sweep_metrics(sweep_result)
        if ensemble is not None:
            metrics["sweep"]["ensemble"] = _ensemble_statistics(sweep_result, ensemble)
        wall["sweep"] = time.perf_counter() - started
        say(f"sweep: {sweep_result.summary()}")

    if experiment.sensitivity is not None:
        started = time.perf_counter()
        spec = experiment.sensitivity
        say(f"sensitivity ({spec.method}) to {list(spec.ranges)} ...")
        indices = sensitivity_indices(experiment, model, y0, devices=devices, quiet=quiet)
        sensitivity_arrays, metrics["sensitivity"] = _sensitivity_record(indices)
        arrays.update(sensitivity_arrays)
        wall["sensitivity"] = time.perf_counter() - started

    if experiment.continuation is not None:
        started = time.perf_counter()
        spec = experiment.continuation
        say(f"following fixed points over {spec.parameter} ({spec.num} values) ...")
        branch = _continuation.continuation(
            model,
            spec.parameter,
            spec.values(),
            jnp.asarray(spec.initial_guess),
            oscillations=spec.oscillations,
        )
        continuation_arrays, metrics["continuation"] = _continuation_record(branch)
        arrays.update(continuation_arrays)
        wall["continuation"] = time.perf_counter() - started
    metrics["wall_seconds"] = wall
    return Outcome(arrays=arrays, metrics=metrics)


def sweep_axes(experiment: Experiment, model) -> dict[str, np.ndarray]:
    """The swept values of every name; relative spans are centred on the (fitted) model."""
    axes = {}
    for name, axis in experiment.sweep.axes.items():
        if "values" in axis:
            axes[name] = np.asarray(axis["values"])
        elif "relative_span" in axis:
            centre = _centre(experiment, model, name)
            span = axis["relative_span"]
            axes[name] = centre * np.linspace(1 - span, 1 + span, axis["num"])
        else:
            axes[name] = np.linspace(axis["start"], axis["stop"], axis["num"])
    return axes


def _centre(experiment: Experiment, model, name: str) -> float:
    if name in model.parameter_names():
        return float(getattr(model, name))
    return float(experiment.y0[model.state_names.index(name)])


def _synthetic(experiment: Experiment, data: DataSpec) -> DataSpec:
    """Snapshots of the model with the true parameters, at the experiment's times, plus
    Gaussian noise drawn from `data.seed` (the same solve the fitted model reuses compiled)."""
    truth = eqx.tree_at(
        lambda m: [getattr(m, name) for name in data.true_parameters],
        experiment.model,
        [jnp.asarray(value) for value in data.true_parameters.values()],
    )
    ts = experiment.time.ts()
    save_ts, skip = simulation_times(experiment)
    clean = np.asarray(
        _simulate.simulate(
            truth,
            jnp.asarray(experiment.y0),
            save_ts,
            options=SolveOptions.from_mapping(experiment.solver),
        ).ys
    )[skip:]
    noise = data.noise * np.random.default_rng(data.seed).standard_normal(clean.shape)
    return dataclasses.replace(data, ts=ts, observations=clean + noise)


def simulation_times(experiment: Experiment) -> tuple[np.ndarray, int]:
    """The times a simulation saves at, and how many leading ones are not kept: the
    experiment's times, preceded by the fit's `t0` (where the initial state holds) if any."""
    ts = experiment.time.ts()
    t0 = experiment.fit.t0 if experiment.fit is not None else None
    return (ts, 0) if t0 is None else (np.concatenate([np.asarray([t0]), ts]), 1)


def _run_fit(experiment: Experiment, data: DataSpec, arrays, metrics, wall, say, quiet: bool):
    """The fit, its multi-start record and its profiles, stored; returns the fitted model,
    its initial state and the `FitResult`."""
    spec, model = experiment.fit, experiment.model
    say(f"fitting {list(spec.parameters)} of {type(model).__name__} ...")
    started = time.perf_counter()
    noise_scale = spec.noise_scale
    result = _fit.fit(
        model,
        data.ts,
        data.observations,
        y0=jnp.asarray(experiment.y0),
        params=list(spec.parameters),
        observe=list(data.observed) if data.observed else None,
        fit_y0=spec.fit_initial_state,
        t0=spec.t0,
        noise=spec.noise,
        noise_scale=None if noise_scale is None else jnp.asarray(noise_scale, dtype=float),
        fit_noise=spec.fit_noise,
        bounds=spec.bounds or None,
        starts=spec.starts,
        key=jr.key(spec.seed) if spec.starts is not None else None,
        method=spec.method,
        max_steps=spec.max_steps,
        rtol=spec.rtol,
        atol=spec.atol,
        simulate_options=SolveOptions.from_mapping(experiment.solver),
        progress=False if quiet else None,
        throw=False,
    )
    fitted, y0 = result.model, jnp.asarray(result.y0)
    if not isinstance(fitted, AbstractGridModel):
        prediction, stderr = result.predict(experiment.time.ts())
        arrays["fit_prediction"], arrays["fit_prediction_stderr"] = map(
            np.asarray, (prediction, stderr)
        )
    record_fit(result, spec, arrays, metrics, wall, say, started, noise=spec.noise)
    return fitted, y0, result


def record_fit(result, spec, arrays, metrics, wall, say, started: float, **extra) -> None:
    """A finished fit stored: its loss history, `metrics["fit"]` (with `extra` entries),
    its starts, then the profiles `spec.profiles` asks for, with their wall times."""
    arrays["fit_loss_history"] = np.asarray(result.loss_history)[: int(result.num_steps)]
    metrics["fit"] = {**_fit_metrics(result, result.model), **extra}
    if result.starts is not None:
        metrics["fit"]["starts"] = _store_starts(result.starts, arrays)
    wall["fit"] = time.perf_counter() - started
    say(_fit_line(metrics["fit"]))
    if spec.profiles is not None:
        started = time.perf_counter()
        say(f"profiling {list(spec.profiles.parameters)} ...")
        profiles = result.profile(
            list(spec.profiles.parameters),
            level=spec.profiles.level,
            num_points=spec.profiles.num_points,
            span=spec.profiles.span,
        )
        metrics["fit"]["profiles"] = {
            name: _store_profile(profile, arrays) for name, profile in profiles.items()
        }
        wall["profiles"] = time.perf_counter() - started


def _store_starts(starts, arrays) -> dict[str, Any]:
    """Every start's loss, convergence, starting and end point (columns in `names` order)."""
    names = list(starts.params)
    arrays["fit_starts_loss"] = np.asarray(starts.loss)
    arrays["fit_starts_converged"] = np.asarray(starts.converged)
    arrays["fit_starts_draws"] = np.asarray(starts.draws)
    arrays["fit_starts_initial"] = np.stack([np.asarray(starts.initial[n]) for n in names], -1)
    arrays["fit_starts_params"] = np.stack([np.asarray(starts.params[n]) for n in names], -1)
    return {
        "names": names,
        "num_starts": int(starts.loss.shape[0]),
        "num_converged": int(np.sum(starts.converged)),
        "num_redrawn": int(np.sum(starts.draws > 1)),
        "best": int(starts.best),
        "best_loss": _number(starts.loss[starts.best]),
    }


def _store_profile(profile, arrays) -> dict[str, Any]:
    """A profile's grid, rise and convergence as arrays; its interval as metrics."""
    for field in PROFILE_ARRAYS:
        arrays[f"profile_{profile.name}_{field}"] = np.asarray(getattr(profile, field))
    return {
        "estimate": _number(profile.estimate),
        "lower": _number(profile.lower),
        "upper": _number(profile.upper),
        "lower_open": bool(profile.lower_open),
        "upper_open": bool(profile.upper_open),
        "threshold": _number(profile.threshold),
        "level": profile.level,
    }


def _run_sampling(experiment: Experiment, result, arrays, metrics, say, quiet: bool) -> None:
    """NUTS draws, their ArviZ summary and the posterior predictive curves, stored."""
    from .. import _sample
    from ..plot._fit import posterior_curves

    spec = experiment.fit.sampling
    say(f"sampling the posterior: {spec.num_chains} chains of {spec.num_samples} draws ...")
    posterior = _sample.sample(
        result,
        priors=dict(spec.priors),
        num_samples=spec.num_samples,
        num_warmup=spec.num_warmup,
        num_chains=spec.num_chains,
        key=jr.key(spec.seed),
    )
    names = list(posterior.samples)
    arrays["posterior_samples"] = np.stack([np.asarray(posterior.samples[n]) for n in names], -1)
    arrays["posterior_divergent"] = np.asarray(posterior.divergent)
    arrays["posterior_log_density"] = np.asarray(posterior.log_density)
    arrays["posterior_acceptance_rate"] = np.asarray(posterior.acceptance_rate)
    with arviz_silenced(quiet):
        import arviz

        table = arviz.summary(posterior.to_arviz(), hdi_prob=0.95, round_to="none")
    metrics["sampling"] = {
        "names": names,
        "num_chains": spec.num_chains,
        "num_samples": spec.num_samples,
        "num_warmup": spec.num_warmup,
        "num_divergent": int(np.sum(posterior.divergent)),
        "summary": {
            name: {column: _number(table.loc[name, column]) for column in table.columns}
            for name in names
        },
    }
    if not isinstance(result.model, AbstractGridModel):
        arrays["posterior_predictive"] = posterior_curves(
            result, posterior, experiment.time.ts(), num_draws=spec.num_predictive
        )
    worst = max((entry.get("r_hat") or 1.0) for entry in metrics["sampling"]["summary"].values())
    say(f"sampling: {metrics['sampling']['num_divergent']} divergent, largest R-hat {worst:.3f}")


@contextlib.contextmanager
def arviz_silenced(quiet: bool):
    """ArviZ warns through Python's warnings (its first import announces a coming release)
    and through its own logger (a chain too short for a diagnostic); a quiet run prints
    neither."""
    if not quiet:
        yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz

        # ArviZ logs through a logger of its own, outside logging's tree (which
        # `logging.disable` would reach only through caches it does not clear).
        logger = getattr(arviz, "_log", logging.getLogger("arviz"))
        disabled, logger.disabled = logger.disabled, True
        try:
            yield
        finally:
            logger.disabled = disabled


def _number(value) -> float | None:
    """A JSON-safe float: `None` for inf and NaN (JSON has neither)."""
    value = float(value)
    return value if np.isfinite(value) else None


def _fit_metrics(result, model) -> dict[str, Any]:
    units = model.parameter_units() if hasattr(model, "parameter_units") else {}
    parameters = {
        name: {
            "value": _number(value),
            "stderr": _number(result.stderr[name]),
            "unit": units.get(name, ""),
        }
        for name, value in result.params.items()
    }
    metrics = {
        "parameters": parameters,
        "loss": _number(result.loss),
        "noise_variance": _number(result.noise_variance),
        "converged": bool(result.converged),
        "num_steps": int(result.num_steps),
        "status": status_name(int(status_code(result.result))),
    }
    names = getattr(model, "state_names", ())
    if names and np.ndim(result.y0) == 1:
        metrics["initial_state"] = {
            name: {"value": _number(value), "stderr": _number(error)}
            for name, value, error in zip(names, result.y0, result.y0_stderr, strict=True)
        }
    return metrics


def _fit_line(fit: dict[str, Any]) -> str:
    parts = [
        f"{name} = {_format(entry['value'], entry['stderr'])}"
        for name, entry in fit["parameters"].items()
    ]
    state = "converged" if fit["converged"] else f"NOT converged ({fit['status']})"
    return f"fit {state} in {fit['num_steps']} steps: " + ", ".join(parts)


def _format(value, stderr) -> str:
    if stderr is None:
        return f"{value:.4g} ± unidentifiable"
    return f"{value:.4g} ± {stderr:.2g}"


def _sweep_metrics(result) -> dict[str, Any]:
    observables = {}
    for name, values in result.observables.items():
        finite = values[np.isfinite(values)]
        observables[name] = {
            "min": _number(finite.min()) if finite.size else None,
            "max": _number(finite.max()) if finite.size else None,
            "shape": list(values.shape[1:]),
        }
    return {
        "names": list(result.names),
        "units": dict(result.units),
        "mode": result.mode,
        "num_members": result.num_members,
        "num_failed": result.num_failed,
        "summary": result.summary(),
        "observables": observables,
        "ranges": {
            name: [_number(result.parameter(name).min()), _number(result.parameter(name).max())]
            for name in result.names
        },
        "grid_axes": None if result.grid_axes is None else [a.tolist() for a in result.grid_axes],
        "stats": {key: value for key, value in result.stats.items() if key != "seconds"},
    }


def _ensemble_statistics(result, ensemble) -> dict[str, Any]:
    """Per swept point (the paths are the last members of each), the count of paths with a
    finite value, the mean and its standard error of every scalar observable."""
    values = result.values[:: ensemble.paths]
    points = {
        name: values[:, index].tolist() for index, name in enumerate(result.names) if name != "path"
    }
    statistics = {}
    for name, observed in result.observables.items():
        if observed.ndim != 1:
            continue
        per_point = observed.reshape(-1, ensemble.paths)
        finite = np.isfinite(per_point)
        count = finite.sum(axis=1)
        with warnings.catch_warnings():  # a point whose paths all failed: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(per_point, axis=1)
            error = np.nanstd(per_point, axis=1, ddof=1) / np.sqrt(count)
        statistics[name] = {
            "count": count.tolist(),
            "mean": [_number(v) for v in mean],
            "standard_error": [_number(v) for v in error],
        }
    return {
        "paths": ensemble.paths,
        "seed": ensemble.seed,
        "points": points,
        "statistics": statistics,
    }


def _event_metrics(trajectory) -> dict[str, Any]:
    """The time of the `[event]` in the simulation and the state there (`None`: no event)."""
    state = np.asarray(trajectory.event_state)
    return {
        "time": _number(trajectory.event_time),
        "state": {
            name: _number(value) for name, value in zip(trajectory.state_names, state, strict=True)
        },
    }


def sensitivity_indices(experiment: Experiment, model, y0, *, devices=None, quiet=True):
    """The `[sensitivity]` table run through [`simlab.sensitivity`][] (an `xarray.Dataset`),
    its design drawn with `jax.random.key(seed)`."""
    spec = experiment.sensitivity
    return _sensitivity.sensitivity(
        model,
        {name: list(bounds) for name, bounds in spec.ranges.items()},
        y0,
        experiment.time.ts(),
        observable=OBSERVABLE_FUNCTIONS[spec.observable],
        method=spec.method,
        num_samples=spec.num_samples,
        key=jr.key(spec.seed),
        second_order=spec.second_order,
        num_levels=spec.num_levels,
        num_resamples=spec.num_resamples,
        conf_level=spec.conf_level,
        mesh=member_mesh(list(devices)) if devices is not None else None,
        progress=False if quiet else None,
        event=experiment.event,
        **experiment.solver,
    )


def _sensitivity_record(indices) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The indices as arrays (`sensitivity_<variable>`) and what rebuilds the dataset (the
    variables' dims, the parameters, the attrs), with a table of the scalar indices."""
    attrs = {
        key: value.item() if isinstance(value, np.generic) else value
        for key, value in indices.attrs.items()
    }
    parameters = [str(name) for name in indices["parameter"].values]
    arrays = {f"sensitivity_{name}": np.asarray(value) for name, value in indices.items()}
    measures = ("S1", "ST") if attrs["method"] == "sobol" else ("mu_star", "sigma")
    table = {}
    for output in json.loads(attrs["outputs"]):
        if indices[f"{output}_{measures[0]}"].dims != ("parameter",):
            continue
        table[output] = {
            name: {
                measure: _number(indices[f"{output}_{measure}"].values[index])
                for measure in (*measures, *(f"{m}_conf" for m in measures))
                if f"{output}_{measure}" in indices
            }
            for index, name in enumerate(parameters)
        }
    record = {
        "method": attrs["method"],
        "parameters": parameters,
        "ranges": {
            name: [float(low), float(high)]
            for name, low, high in zip(
                parameters, indices["lower"].values, indices["upper"].values, strict=True
            )
        },
        "num_members": int(attrs["num_members"]),
        "variables": {name: list(value.dims) for name, value in indices.items()},
        "attrs": attrs,
        "indices": table,
    }
    return arrays, record


def _continuation_record(branch) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The branch as arrays (`continuation_<field>`) and its bifurcations as JSON."""
    arrays = {
        name: np.asarray(getattr(branch, name.removeprefix("continuation_")))
        for name in CONTINUATION_ARRAYS
    }
    bifurcations = [
        {
            "kind": point.kind,
            "value": float(point.value),
            "index": int(point.index),
            "state": [float(v) for v in np.asarray(point.state)],
            "eigenvalues_real": [float(v) for v in np.real(point.eigenvalues)],
            "eigenvalues_imag": [float(v) for v in np.imag(point.eigenvalues)],
        }
        for point in branch.bifurcations
    ]
    record = {
        "parameter": branch.parameter,
        "num_points": int(branch.values.size),
        "num_failed": int(np.sum(~branch.succeeded)),
        "bifurcations": bifurcations,
    }
    return arrays, record
