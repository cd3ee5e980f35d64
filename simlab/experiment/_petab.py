"""Experiment files whose model is a PEtab problem: `[model] petab = "problem.yaml"`.

The problem is read by `simlab.petab.load` (imported here, and only when a file names a
problem: petab is an optional extra), fitted by `PetabProblem.fit` and stored as any fit
experiment's fit is (`_run.record_fit`); the run adds the measurements and the fitted
curves of every measured series, which the figure kind `petab_fit` (`_figures`) draws one
panel per observable.
"""

import dataclasses
import pathlib
import time
from typing import Any

import numpy as np

from ._check import Checker
from ._figures import figure_entries
from ._run import Outcome, _number, record_fit
from ._spec import (
    MAX_STEPS_LIMIT,
    Experiment,
    FigureSpec,
    FitSpec,
    TimeSpan,
    _check_inside_project,
    _fit_profiles,
)

CURVE_POINTS = 200
"""The fitted curves are drawn at this many times from 0 to the last measured time."""
MODEL_KEYS = ("petab",)
SOLVER_KEYS = ("rtol", "atol", "max_steps")
FIT_KEYS = ("starts", "seed", "max_steps", "rtol", "atol", "profiles")
TOP_LEVEL_KEYS = ("description", "model", "solver", "fit", "figures")
FIGURE_KINDS = ("petab_fit", "loss", "waterfall", "profiles")
NEEDS = {
    "fit": "a [fit] table",
    "fit.starts": "a multi-start fit: fit.starts = N",
    "fit.profiles": "a [fit.profiles] table",
    "petab": "a PEtab problem",
}
# What a PEtab problem gives instead of the tables and keys that other experiments set.
CONFLICTS = {
    "initial_state": "the initial state comes from the problem's SBML model and condition table",
    "time": "the times are the measurement table's (the fitted curves are drawn from 0 to the "
    "last measured time)",
    "data": "the data are the problem's measurement table",
    "sweep": "sweeps of a PEtab problem run from Python (simlab.petab), not from a file",
    "event": "events of a PEtab problem are not read",
    "sensitivity": "sensitivity analyses of a PEtab problem run from Python, not from a file",
    "continuation": "continuation of a PEtab problem runs from Python, not from a file",
    "ensemble": "a PEtab problem is deterministic",
    "model.name": "the model is the problem's SBML file",
    "model.parameters": "the nominal values are the parameter table's (nominalValue)",
    "model.preset": "the model is the problem's SBML file",
    "model.grid": "the model is the problem's SBML file",
    "solver.name": "a PEtab problem is solved by rodas5p",
    "solver.adaptive": "a PEtab problem is solved with adaptive steps",
    "solver.dt0": "a PEtab problem is solved with adaptive steps",
    "fit.parameters": "the estimated parameters are the parameter table's rows with estimate = 1",
    "fit.bounds": "the bounds are the parameter table's lowerBound and upperBound",
    "fit.fit_initial_state": "the initial states are the SBML model's and the condition table's",
    "fit.t0": "every experiment of a PEtab problem starts at time 0",
    "fit.noise": "the noise model is the observable table's (noiseDistribution, noiseFormula)",
    "fit.noise_scale": "the noise scales are the observable table's noiseFormula",
    "fit.fit_noise": "noise parameters are estimated as rows of the parameter table",
    "fit.method": "a PEtab problem is fitted by quasi-Newton (BFGS) on its likelihood",
    "fit.sampling": "posterior sampling of a PEtab problem is not available from a file",
}
SERIES_COLUMNS = (
    "observableId",
    "preequilibrationConditionId",
    "simulationConditionId",
    "observableParameters",
    "noiseParameters",
)


@dataclasses.dataclass(frozen=True)
class PetabSpec:
    """`[model] petab = PATH`: the file as written, and the problem read from it (a
    `simlab.petab.PetabProblem`)."""

    file: str
    problem: Any


def parse_petab(
    check: Checker,
    config: dict,
    path: pathlib.Path,
    *,
    description: str,
    quick: bool,
    data_file: Any = None,
) -> Experiment:
    """An experiment whose `[model]` names a PEtab problem, checked completely (the
    problem is read, nothing is compiled); `config` is resolved (`[quick]` applied)."""
    if data_file is not None:
        raise check.fail(
            "model.petab",
            "takes its measurements from the problem's measurement table; --data replaces a "
            "[data] table's CSV, so leave it out.",
        )
    _refuse_conflicts(check, config)
    model_table = check.table(config, "model", "model")
    check.keys(model_table, "model", MODEL_KEYS)
    solver_table = check.table(config, "solver", "solver", required=False) or {}
    check.keys(solver_table, "solver", SOLVER_KEYS)
    tolerances = {
        "rtol": check.number(solver_table, "rtol", "solver", default=1e-10, positive=True),
        "atol": check.number(solver_table, "atol", "solver", default=1e-12, positive=True),
        "max_steps": check.integer(solver_table, "max_steps", "solver", default=100_000),
    }
    _check_steps(check, "solver.max_steps", tolerances["max_steps"])
    file = check.string(model_table, "petab", "model")
    problem = _load(check, file, tolerances)
    fit = _fit(check, config, problem)
    model = problem.model(problem.condition_ids[0])
    resolved = dict(config)
    if "figures" not in resolved:  # the data with the fitted curves, and the fit's figures
        resolved["figures"] = [{"kind": kind} for kind in _default_figures(fit)]
    spec = PetabSpec(file, problem)
    return Experiment(
        name=path.stem,
        description=description,
        path=path,
        model=model,
        y0=np.asarray(model.initial_state()),
        time=TimeSpan(0.0, _last_time(problem), CURVE_POINTS),
        solver={"solver": "rodas5p", **tolerances},
        data=None,
        fit=fit,
        sweep=None,
        figures=_figures(check, resolved, model, fit, spec),
        config=resolved,
        quick=quick,
        petab=spec,
    )


def _refuse_conflicts(check: Checker, config: dict) -> None:
    """The tables and keys other experiments set that a PEtab problem gives itself."""
    for dotted, reason in CONFLICTS.items():
        *parents, key = dotted.split(".")
        table = config
        for parent in parents:
            table = table.get(parent) if isinstance(table.get(parent), dict) else {}
        if key in table:
            raise check.fail(
                dotted,
                f"does not go with a PEtab problem (model.petab): {reason}; remove it.",
            )


def _check_steps(check: Checker, key: str, steps: int | None) -> None:
    if steps is not None and steps > MAX_STEPS_LIMIT:
        raise check.fail(key, f"is {steps}; at most {MAX_STEPS_LIMIT:.0e} steps are allowed.")


def _load(check: Checker, file: str, tolerances: dict):
    """The problem of `[model] petab`, a path relative to the experiment file; every way
    it cannot be read is an `ExperimentError` naming the key."""
    import jax

    relative = pathlib.Path(file)
    yaml_path = relative if relative.is_absolute() else check.path.parent / relative
    _check_inside_project(
        check,
        yaml_path,
        "model.petab",
        "copy the problem's folder next to the experiment file, or run from a folder that "
        "holds both",
    )
    if not yaml_path.is_file():
        raise check.fail(
            "model.petab",
            f"no such file {str(yaml_path)!r}; give the problem's YAML file, relative to the "
            "experiment file.",
        )
    try:
        from .. import petab as simlab_petab
    except ImportError as error:
        raise check.fail("model.petab", f"cannot be read: {error}.") from None
    if not jax.config.jax_enable_x64:
        raise check.fail(
            "model.petab",
            "a PEtab problem is solved in float64: call jax.config.update('jax_enable_x64', "
            "True) before loading the experiment (the simlab command does).",
        )
    try:
        problem = simlab_petab.load(yaml_path, **tolerances)
    except NotImplementedError as error:
        raise check.fail("model.petab", f"uses what simlab does not read: {error}") from None
    except Exception as error:  # petab, libsbml and pandas fail on bad tables variously
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise check.fail(
            "model.petab",
            f"{str(yaml_path)!r} cannot be read as a PEtab problem "
            f"({type(error).__name__}: {reason}).",
        ) from None
    if not problem.condition_ids:
        raise check.fail("model.petab", f"{str(yaml_path)!r} has no measurements to fit or draw.")
    return problem


def _fit(check: Checker, config: dict, problem) -> FitSpec | None:
    """`[fit]`: the keywords of `PetabProblem.fit` a file can give, and the profiles."""
    table = check.table(config, "fit", "fit", required=False)
    if table is None:
        return None
    check.keys(table, "fit", FIT_KEYS)
    parameters = tuple(problem.parameter_ids)
    if not parameters:
        raise check.fail("fit", "has nothing to fit: the parameter table estimates nothing.")
    from ..petab._fit import scaled_bounds

    try:
        scaled_bounds(problem)  # a fit searches within finite bounds on each scale
    except ValueError as error:
        raise check.fail("fit", f"needs finite bounds: {error}") from None
    fit = FitSpec(
        parameters=parameters,
        fit_initial_state=False,
        method=None,
        max_steps=check.integer(table, "max_steps", "fit", default=None),
        rtol=check.number(table, "rtol", "fit", default=1e-8, positive=True),
        atol=check.number(table, "atol", "fit", default=1e-8, positive=True),
        noise="petab",
        starts=check.integer(table, "starts", "fit", default=None, minimum=2),
        seed=check.integer(table, "seed", "fit", default=0, minimum=0),
        profiles=_fit_profiles(check, table, parameters),
    )
    _check_steps(check, "fit.max_steps", fit.max_steps)
    return fit


def _default_figures(fit: FitSpec | None) -> list[str]:
    kinds = ["petab_fit"]
    if fit is not None:
        kinds += ["waterfall"] if fit.starts is not None else ["loss"]
        kinds += ["profiles"] if fit.profiles is not None else []
    return kinds


def _figures(check: Checker, config: dict, model, fit, spec) -> tuple[FigureSpec, ...]:
    """The `[[figures]]` a PEtab experiment draws, each checked for what it needs."""
    tables = {
        "fit": fit,
        "fit.starts": fit and fit.starts,
        "fit.profiles": fit and fit.profiles,
        "petab": spec,
    }
    figures, names = [], set()
    for where, entry, kind in figure_entries(check, config):
        if kind.name not in FIGURE_KINDS:
            raise check.fail(
                f"{where}.kind",
                f"{kind.name!r} is not drawn for a PEtab problem; use one of {list(FIGURE_KINDS)}.",
            )
        for table in kind.needs:  # said for a PEtab problem, whose bounds are its own
            if tables[table] is None:
                raise check.fail(f"{where}.kind", f"{kind.name!r} needs {NEEDS[table]}.")
        kind.check(check, entry, where, model, tables)
        figure = FigureSpec(kind.name, {k: v for k, v in entry.items() if k != "kind"})
        if figure.name in names:
            raise check.fail(f"{where}.name", f"{figure.name!r} is used twice; give each a name.")
        names.add(figure.name)
        figures.append(figure)
    return tuple(figures)


def _last_time(problem) -> float:
    """The last finite measurement time (steady-state measurements are at `inf`)."""
    times = problem.petab_problem.measurement_df["time"].to_numpy(float)
    finite = times[np.isfinite(times)]
    last = float(finite.max()) if finite.size else 0.0
    return last if last > 0 else 1.0


# -- the run -------------------------------------------------------------------------------


def compute_petab(experiment: Experiment, *, quiet: bool = False) -> Outcome:
    """The fit (when `[fit]` asks), its starts and profiles; then the simulated value of
    every measurement and every measured series on the curve grid, at the estimates (at
    the nominal values without a fit)."""
    import jax
    import jax.numpy as jnp
    import jax.random as jr

    say = (lambda message: None) if quiet else (lambda message: print(message, flush=True))
    problem, spec = experiment.petab.problem, experiment.fit
    arrays: dict[str, np.ndarray] = {}
    metrics: dict[str, Any] = {"experiment": experiment.name, "description": experiment.description}
    wall: dict[str, float] = {}
    x, log_likelihood = problem.nominal, None
    if spec is not None:
        say(
            f"fitting {len(problem.parameter_ids)} parameters of the PEtab problem "
            f"{experiment.petab.file} ..."
        )
        started = time.perf_counter()
        result = problem.fit(
            starts=spec.starts,
            key=jr.key(spec.seed) if spec.starts is not None else None,
            max_steps=spec.max_steps,
            rtol=spec.rtol,
            atol=spec.atol,
            progress=False if quiet else None,
            throw=False,
        )
        record_fit(result, spec, arrays, metrics, wall, say, started, noise="petab")
        for name, scale in zip(problem.parameter_ids, problem.scales, strict=True):
            metrics["fit"]["parameters"][name]["scale"] = scale
        x = jnp.stack([jnp.asarray(result.params[name]) for name in problem.parameter_ids])
        log_likelihood = float(result.log_likelihood)
    started = time.perf_counter()
    measured = problem.petab_problem.measurement_df
    simulated = problem.simulate(x)["simulation"].to_numpy(float)
    curves = problem.simulate(x, times=experiment.time.ts())
    series, index, numbers = _series(curves)
    arrays["petab_curve_ts"] = experiment.time.ts()
    arrays["petab_curves"] = np.stack(
        [
            curves.loc[index == number].sort_values("time")["simulation"].to_numpy(float)
            for number in range(len(series))
        ]
    )
    arrays["petab_data_ts"] = measured["time"].to_numpy(float)
    arrays["petab_data_values"] = measured["measurement"].to_numpy(float)
    arrays["petab_data_simulated"] = simulated
    # The curves' series are the measurement table's: every measurement has one.
    arrays["petab_data_series"] = np.array([numbers[key] for key in _keys(measured)], dtype=int)
    if log_likelihood is None:
        log_likelihood = float(jax.jit(problem.log_likelihood)(x))
    metrics["petab"] = {
        "problem": experiment.petab.file,
        "parameter_ids": list(problem.parameter_ids),
        "scales": list(problem.scales),
        "conditions": list(problem.condition_ids),
        "num_measurements": len(measured),
        "series": series,
        "log_likelihood": _number(log_likelihood),
        "at": "estimates" if spec is not None else "nominal values",
    }
    wall["curves"] = time.perf_counter() - started
    say(f"log-likelihood at the {metrics['petab']['at']}: {log_likelihood:.6g}")
    metrics["wall_seconds"] = wall
    return Outcome(arrays=arrays, metrics=metrics)


def _keys(table) -> list[tuple[str, ...]]:
    """Each row's series: its observable, conditions and placeholder overrides."""
    columns = [column for column in SERIES_COLUMNS if column in table]
    values = table[columns].astype(object).where(table[columns].notna(), "")
    return [tuple(str(v) for v in row) for row in values.itertuples(index=False)]


def _series(curves) -> tuple[list[dict[str, str]], np.ndarray, dict]:
    """The distinct series of a simulation table, in the order it names them, each with
    its observable, conditions, observable overrides and label; each row's series number;
    and the number of each series' key."""
    numbers: dict[tuple[str, ...], int] = {}
    index = np.array([numbers.setdefault(key, len(numbers)) for key in _keys(curves)])
    columns = [column for column in SERIES_COLUMNS if column in curves]
    records = []
    for key in numbers:
        entry = dict(zip(columns, key, strict=True))
        condition = entry["simulationConditionId"]
        preequilibration = entry.get("preequilibrationConditionId", "")
        records.append(
            {
                "observable": entry["observableId"],
                "condition": condition,
                "preequilibration": preequilibration,
                "overrides": entry.get("observableParameters", ""),
                "label": f"{preequilibration} → {condition}" if preequilibration else condition,
            }
        )
    return records, index, numbers
