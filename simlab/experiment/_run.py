"""Running a checked experiment: data, fit, simulation, sweep; then a results folder."""

import dataclasses
import json
import time
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from .. import _fit, _sensitivity, _simulate, _steady_state, _sweep
from .._options import SolveOptions
from .._results import status_code, status_name
from ..models import AbstractGridModel
from ..parallel import member_mesh
from ._fields import OBSERVABLE_FUNCTIONS
from ._folder import CONTINUATION_ARRAYS
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
        say(f"fitting {list(experiment.fit.parameters)} of {type(model).__name__} ...")
        started = time.perf_counter()
        result = _fit.fit(
            model,
            data.ts,
            data.observations,
            y0=y0,
            params=list(experiment.fit.parameters),
            observe=list(data.observed) if data.observed else None,
            fit_y0=experiment.fit.fit_initial_state,
            method=experiment.fit.method,
            max_steps=experiment.fit.max_steps,
            rtol=experiment.fit.rtol,
            atol=experiment.fit.atol,
            simulate_options=SolveOptions.from_mapping(experiment.solver),
            progress=False if quiet else None,
            throw=False,
        )
        model, y0 = result.model, jnp.asarray(result.y0)
        arrays["fit_loss_history"] = np.asarray(result.loss_history)[: int(result.num_steps)]
        if not isinstance(model, AbstractGridModel):
            prediction, stderr = result.predict(ts)
            arrays["fit_prediction"], arrays["fit_prediction_stderr"] = map(
                np.asarray, (prediction, stderr)
            )
        metrics["fit"] = _fit_metrics(result, model)
        wall["fit"] = time.perf_counter() - started
        say(_fit_line(metrics["fit"]))

    started = time.perf_counter()
    trajectory = _simulate.simulate(
        model,
        y0,
        ts,
        throw=False,
        options=SolveOptions.from_mapping(experiment.solver),
        event=None if experiment.event is None else experiment.event(model),
    )
    arrays["simulation_ts"], arrays["simulation_ys"] = np.asarray(ts), np.asarray(trajectory.ys)
    metrics["simulation"] = {
        "succeeded": bool(trajectory.succeeded),
        "num_steps": int(trajectory.stats["num_steps"]),
    }
    if experiment.event is not None:
        metrics["simulation"]["event"] = _event_metrics(trajectory)
    wall["simulation"] = time.perf_counter() - started

    if experiment.sweep is not None:
        started = time.perf_counter()
        axes = sweep_axes(experiment, model)
        say(f"sweeping {' x '.join(f'{name} ({len(v)})' for name, v in axes.items())} ...")
        mesh = member_mesh(list(devices)) if devices is not None else None
        sweep_result = _sweep.sweep(
            model,
            axes,
            y0,
            ts,
            mode=experiment.sweep.mode,
            observable=OBSERVABLE_FUNCTIONS[experiment.sweep.observable],
            mesh=mesh,
            store=sweep_store,
            progress=not quiet,
            options=SolveOptions.from_mapping(experiment.solver),
            event=experiment.event,
        )
        metrics["sweep"] = _sweep_metrics(sweep_result)
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
        branch = _steady_state.continuation(
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
    clean = np.asarray(
        _simulate.simulate(
            truth,
            jnp.asarray(experiment.y0),
            ts,
            options=SolveOptions.from_mapping(experiment.solver),
        ).ys
    )
    noise = data.noise * np.random.default_rng(data.seed).standard_normal(clean.shape)
    return dataclasses.replace(data, ts=ts, observations=clean + noise)


def _number(value) -> float | None:
    """A JSON-safe float: `None` for inf and NaN (JSON has neither)."""
    value = float(value)
    return value if np.isfinite(value) else None


def _fit_metrics(result, model) -> dict[str, Any]:
    units = model.parameter_units()
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
        progress=not quiet,
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
