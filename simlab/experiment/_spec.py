"""Experiment files: TOML parsed with `tomllib` and checked completely before anything compiles.

Every problem is reported as an `ExperimentError` naming the file, the key and the fix, so
a typo costs a second, not a compile.
"""

import csv
import dataclasses
import math
import pathlib
import tomllib
from typing import Any

import numpy as np

from .._solvers import SOLVERS
from ..grid import Grid
from ..models import AbstractGridModel, AbstractModel, GrayScott
from ._check import Checker, ExperimentError as ExperimentError
from ._fields import initial_field, model_classes
from ._figures import figure_entries

DATASETS = ("lynx_hare",)
SWEEP_MODES = ("grid", "zip")
OBSERVABLES = ("final_state", "peak", "final_field")
GRID_FIELDS = ("gaussian", "sine", "gray_scott_seed", "kassam_trefethen")
TOP_LEVEL_KEYS = (
    "description",
    "model",
    "initial_state",
    "time",
    "solver",
    "data",
    "fit",
    "sweep",
    "figures",
    "quick",
)


@dataclasses.dataclass(frozen=True)
class TimeSpan:
    start: float
    stop: float
    num_points: int

    def ts(self) -> np.ndarray:
        return np.linspace(self.start, self.stop, self.num_points)


@dataclasses.dataclass(frozen=True)
class DataSpec:
    """Observations to fit: `ts` `(T,)`, `observations` `(T, k)` of the `observed` states."""

    source: str
    ts: np.ndarray
    observations: np.ndarray
    observed: tuple[str, ...] | None
    true_parameters: dict[str, float] = dataclasses.field(default_factory=dict)
    noise: float = 0.0
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class FitSpec:
    parameters: tuple[str, ...]
    fit_initial_state: bool
    method: str
    max_steps: int | None
    rtol: float
    atol: float


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """`axes` holds each swept name's values; a relative span is resolved after the fit."""

    axes: dict[str, dict[str, Any]]
    mode: str
    observable: str
    around_fit: bool


@dataclasses.dataclass(frozen=True)
class FigureSpec:
    kind: str
    options: dict[str, Any]

    @property
    def name(self) -> str:
        return self.options.get("name", self.kind)


@dataclasses.dataclass(frozen=True)
class Experiment:
    """A checked experiment, ready to run with [`simlab.experiment.run`][].

    **Attributes:** `name`, `description`, `path` (the file), `model` (the starting model),
    `y0`, `time`, `solver` (keywords for `simulate`), `data`, `fit`, `sweep`, `figures`,
    `config` (the resolved TOML table, with `quick` overrides applied) and `quick`.
    """

    name: str
    description: str
    path: pathlib.Path
    model: AbstractModel
    y0: np.ndarray
    time: TimeSpan
    solver: dict[str, Any]
    data: DataSpec | None
    fit: FitSpec | None
    sweep: SweepSpec | None
    figures: tuple[FigureSpec, ...]
    config: dict[str, Any]
    quick: bool = False


def deep_merge(base: dict, overrides: dict) -> dict:
    """`base` with `overrides` applied, table by table (overrides win)."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load(path: str | pathlib.Path, *, quick: bool = False) -> Experiment:
    """Parses and checks an experiment file; nothing is compiled or run.

    **Arguments:**

    - `path`: the TOML file.
    - `quick`: apply the file's `[quick]` table, a reduced version for tests and previews.

    **Returns:** an [`simlab.experiment.Experiment`][].

    **Raises:** `ExperimentError` (a `ValueError`) naming the file, the key and the fix.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise ExperimentError(
            f"{path}: no such experiment file; check the path or run `simlab list`."
        )
    try:
        with path.open("rb") as handle:
            config = tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ExperimentError(f"{path}: not valid TOML ({error}); fix the syntax there.") from None
    except UnicodeDecodeError:
        raise ExperimentError(f"{path}: not a UTF-8 text file; save it as UTF-8.") from None
    return parse(config, path, quick=quick)


def parse(config: dict, path: pathlib.Path, *, quick: bool = False) -> Experiment:
    """Checks an already parsed TOML table (see [`simlab.experiment.load`][])."""
    check = Checker(path)
    check.keys(config, "", TOP_LEVEL_KEYS)
    overrides = check.table(config, "quick", "quick", required=False) or {}
    resolved = {k: v for k, v in config.items() if k != "quick"}
    if quick:
        resolved = deep_merge(resolved, overrides)
    elif overrides:  # the [quick] table is checked on every run, not only the first --quick
        try:
            parse(config, path, quick=True)
        except ExperimentError as error:
            raise ExperimentError(f"{error} (with the [quick] table applied)") from None
    description = check.string(resolved, "description", "description", default="")
    model = _model(check, resolved)
    y0 = _initial_state(check, resolved, model)
    time = _time(check, resolved)
    solver = _solver(check, resolved)
    data = _data(check, resolved, model)
    fit = _fit(check, resolved, model, data)
    sweep = _sweep(check, resolved, model, fit)
    figures = _figures(check, resolved, model, fit, sweep)
    _check_sizes(check, y0, time, sweep, fit, solver)
    return Experiment(
        name=path.stem,
        description=description,
        path=path,
        model=model,
        y0=y0,
        time=time,
        solver=solver,
        data=data,
        fit=fit,
        sweep=sweep,
        figures=figures,
        config=resolved,
        quick=quick,
    )


def _model(check: Checker, config: dict) -> AbstractModel:
    table = check.table(config, "model", "model")
    check.keys(table, "model", ("name", "parameters", "grid"))
    classes = model_classes()
    name = check.string(table, "name", "model")
    if name not in classes:
        raise check.fail("model.name", f"unknown model {name!r}; use one of {sorted(classes)}.")
    cls = classes[name]
    values = check.table(table, "parameters", "model.parameters", required=False) or {}
    known = cls.parameter_names()
    defaults = {f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
    for key in values:
        if key not in known:
            raise check.fail(
                f"model.parameters.{key}",
                f"{name} has no parameter {key!r}; its parameters are {list(known)}.",
            )
    for key in known:
        if key not in values and key not in defaults:
            raise check.fail(f"model.parameters.{key}", f"is missing; {name} needs a value for it.")
    bounds = cls.parameter_bounds()
    parameters = {}
    for key in values:
        value = check.number(values, key, "model.parameters")
        if not bounds[key].contains(np.asarray(value)):
            raise check.fail(
                f"model.parameters.{key}",
                f"is {value!r}, outside its valid range {bounds[key].describe()}.",
            )
        parameters[key] = value
    settings = {}
    if issubclass(cls, AbstractGridModel):
        settings["grid"] = _grid(check, table)
    elif "grid" in table:
        raise check.fail("model.grid", f"{name} is not a grid model; remove [model.grid].")
    try:
        return cls(**parameters, **settings)
    except (TypeError, ValueError) as error:
        raise check.fail("model", f"{name} refused these settings: {error}") from None


def _grid(check: Checker, table: dict) -> Grid:
    grid = check.table(table, "grid", "model.grid")
    check.keys(grid, "model.grid", ("shape", "extent", "boundary"))
    shape = grid.get("shape")
    if (
        not isinstance(shape, list)
        or not 1 <= len(shape) <= 3
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 3 for n in shape)
    ):
        raise check.fail("model.grid.shape", f"must be a list of 1-3 integers >= 3; got {shape!r}.")
    _check_memory(check, "model.grid.shape", "one field", math.prod(shape) * FLOAT_BYTES)
    extent = check.number(grid, "extent", "model.grid", positive=True)
    boundary = check.string(
        grid,
        "boundary",
        "model.grid",
        default="periodic",
        choices=("periodic", "dirichlet", "neumann"),
    )
    return Grid(tuple(shape), extent=extent, boundary=boundary)


def _initial_state(check: Checker, config: dict, model: AbstractModel) -> np.ndarray:
    table = check.table(config, "initial_state", "initial_state")
    if isinstance(model, AbstractGridModel):
        return _grid_field(check, table, model)
    names = model.state_names
    check.keys(table, "initial_state", names)
    missing = [name for name in names if name not in table]
    if missing:
        raise check.fail(
            f"initial_state.{missing[0]}",
            f"is missing; give a number for each state component {list(names)}.",
        )
    return np.array([check.number(table, name, "initial_state") for name in names])


def _grid_field(check: Checker, table: dict, model: AbstractGridModel) -> np.ndarray:
    check.keys(table, "initial_state", ("field", "amplitude", "width", "seed", "noise"))
    kind = check.string(table, "field", "initial_state", choices=GRID_FIELDS)
    if (kind == "gray_scott_seed") != isinstance(model, GrayScott):
        raise check.fail(
            "initial_state.field",
            f"{kind!r} does not suit {type(model).__name__}; use 'gray_scott_seed' for "
            "GrayScott and 'gaussian' or 'sine' for single-field models.",
        )
    options = {
        "amplitude": check.number(table, "amplitude", "initial_state", default=1.0),
        "width": check.number(table, "width", "initial_state", default=0.1, positive=True),
        "noise": check.number(table, "noise", "initial_state", default=0.0),
        "seed": check.integer(table, "seed", "initial_state", default=0, minimum=0),
    }
    return initial_field(kind, model.grid, **options)


def _time(check: Checker, config: dict) -> TimeSpan:
    table = check.table(config, "time", "time")
    check.keys(table, "time", ("start", "stop", "num_points"))
    start = check.number(table, "start", "time", default=0.0)
    stop = check.number(table, "stop", "time")
    if not stop > start:
        raise check.fail("time.stop", f"must be greater than time.start ({start}); got {stop}.")
    return TimeSpan(start, stop, check.integer(table, "num_points", "time", minimum=2))


def _solver(check: Checker, config: dict) -> dict[str, Any]:
    table = check.table(config, "solver", "solver", required=False) or {}
    check.keys(table, "solver", ("name", "rtol", "atol", "max_steps", "adaptive", "dt0"))
    options: dict[str, Any] = {}
    if "name" in table:
        options["solver"] = check.string(table, "name", "solver", choices=tuple(SOLVERS))
    for key in ("rtol", "atol"):
        if key in table:
            options[key] = check.number(table, key, "solver", positive=True)
    if "max_steps" in table:
        options["max_steps"] = check.integer(table, "max_steps", "solver")
    options.update(_fixed_steps(check, table))
    return options


def _fixed_steps(check: Checker, table: dict) -> dict[str, Any]:
    """`adaptive = false` with a step `dt0` (fixed-step solvers such as "etdrk4" need both)."""
    options: dict[str, Any] = {}
    if "adaptive" in table:
        options["adaptive"] = check.boolean(table, "adaptive", "solver", default=True)
    if "dt0" in table:
        options["dt0"] = check.number(table, "dt0", "solver", positive=True)
    if options.get("adaptive") is False and "dt0" not in options:
        raise check.fail("solver.dt0", "is missing; adaptive = false takes fixed steps of dt0.")
    return options


def _data(check: Checker, config: dict, model: AbstractModel) -> DataSpec | None:
    table = check.table(config, "data", "data", required=False)
    if table is None:
        return None
    check.keys(
        table,
        "data",
        (
            "dataset",
            "csv",
            "time_column",
            "columns",
            "synthetic",
            "true_parameters",
            "noise",
            "seed",
            "num_points",
        ),
    )
    sources = [key for key in ("dataset", "csv", "synthetic") if key in table]
    if len(sources) != 1:
        raise check.fail(
            "data", "needs exactly one of dataset = NAME, csv = PATH or synthetic = true."
        )
    if "dataset" in table:
        name = check.string(table, "dataset", "data", choices=DATASETS)
        from .. import datasets

        records = getattr(datasets, name)()
        return DataSpec(
            f"dataset:{name}", np.asarray(records.ts), np.asarray(records.observations), None
        )
    if "csv" in table:
        return _csv_data(check, table, model)
    return _synthetic_data(check, table, model)


def _csv_data(check: Checker, table: dict, model: AbstractModel) -> DataSpec:
    relative = pathlib.Path(check.string(table, "csv", "data"))
    csv_path = relative if relative.is_absolute() else check.path.parent / relative
    _check_inside_project(check, csv_path)
    if not csv_path.is_file():
        raise check.fail(
            "data.csv",
            f"no such file {str(csv_path)!r}; the path is relative to the experiment file.",
        )
    time_column = check.string(table, "time_column", "data", default="t")
    names = model.state_names
    columns = check.names(table, "columns", "data", names) if "columns" in table else names
    # No message below quotes the file: it may hold anything (never echo its content).
    try:
        with csv_path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    except UnicodeDecodeError:
        raise check.fail(
            "data.csv", f"{str(csv_path)!r} is not UTF-8 text; save it as UTF-8."
        ) from None
    except (OSError, csv.Error) as error:
        raise check.fail(
            "data.csv", f"{str(csv_path)!r} cannot be read as CSV ({type(error).__name__})."
        ) from None
    if len(rows) < 2:
        raise check.fail(
            "data.csv",
            f"{str(csv_path)!r} holds {len(rows)} data row(s); a fit needs at least 2 times.",
        )
    for column in (time_column, *columns):
        if column not in rows[0]:
            raise check.fail(
                "data.columns",
                f"{str(csv_path)!r} has no column {column!r} in its header; name the columns "
                "with data.time_column and data.columns.",
            )
    for number, row in enumerate(rows, start=2):
        if None in row or None in row.values():
            raise check.fail(
                "data.csv",
                f"{str(csv_path)!r}: data row {number - 1} has a different number of values "
                "than the header; give every row one value per column.",
            )
    try:
        ts = np.array([float(row[time_column]) for row in rows])
        values = np.array([[float(row[c]) for c in columns] for row in rows])
    except ValueError:
        raise check.fail(
            "data.csv",
            f"{str(csv_path)!r} holds a value that is not a number in the columns "
            f"{[time_column, *columns]}; use plain decimal numbers.",
        ) from None
    if not np.all(np.isfinite(values)) or not np.all(np.diff(ts) > 0):
        raise check.fail(
            "data.csv", f"{str(csv_path)!r} needs finite values and strictly increasing times."
        )
    return DataSpec(f"csv:{csv_path}", ts, values, tuple(columns))


def _check_inside_project(check: Checker, path: pathlib.Path) -> None:
    """A data path read from a TOML file must stay in the experiment's folder or the project
    (the current folder): an experiment file cannot make simlab read files elsewhere."""
    resolved = path.resolve()
    roots = (check.path.resolve().parent, pathlib.Path.cwd().resolve())
    if not any(resolved.is_relative_to(root) for root in roots):
        raise check.fail(
            "data.csv",
            f"{str(path)!r} lies outside the experiment's folder and the current project; copy "
            "the data file next to the experiment file.",
        )


FLOAT_BYTES = 8
MEMORY_LIMIT = 8 * 2**30  # the arrays one run may hold; more is refused at --check
MAX_STEPS_LIMIT = 10**7


def _check_memory(check: Checker, key: str, what: str, num_bytes: int | float) -> None:
    if num_bytes > MEMORY_LIMIT:
        raise check.fail(
            key,
            f"is too large: {what} would need {num_bytes / 2**30:.3g} GiB of memory, above the "
            f"{MEMORY_LIMIT / 2**30:g} GiB a run may use; reduce it.",
        )


def _check_sizes(check: Checker, y0: np.ndarray, time, sweep, fit, solver) -> None:
    """Refuses sizes a run could not hold, naming the memory they would need."""
    _check_memory(
        check, "time.num_points", "the saved trajectory", time.num_points * y0.size * FLOAT_BYTES
    )
    for key, steps in (
        ("solver.max_steps", solver.get("max_steps")),
        ("fit.max_steps", fit.max_steps if fit else None),
    ):
        if steps is not None and steps > MAX_STEPS_LIMIT:
            raise check.fail(key, f"is {steps}; at most {MAX_STEPS_LIMIT:.0e} steps are allowed.")
    if sweep is not None:
        nums = [axis["num"] for axis in sweep.axes.values()]
        members = math.prod(nums) if sweep.mode == "grid" else max(nums)
        _check_memory(
            check,
            "sweep.parameters",
            f"{members:.3g} members' results",
            members * y0.size * FLOAT_BYTES,
        )


def _synthetic_data(check: Checker, table: dict, model: AbstractModel) -> DataSpec:
    if table["synthetic"] is not True:
        raise check.fail("data.synthetic", "must be true (or remove it).")
    truth = check.table(table, "true_parameters", "data.true_parameters")
    bounds = model.parameter_bounds()
    for key in truth:
        if key not in bounds:
            raise check.fail(
                f"data.true_parameters.{key}",
                f"{type(model).__name__} has no parameter {key!r}; its parameters are "
                f"{list(bounds)}.",
            )
        value = check.number(truth, key, "data.true_parameters")
        if not bounds[key].contains(np.asarray(value)):
            raise check.fail(
                f"data.true_parameters.{key}",
                f"is {value!r}, outside its valid range {bounds[key].describe()}.",
            )
    return DataSpec(
        "synthetic",
        ts=np.zeros(0),
        observations=np.zeros((0, 0)),
        observed=None,
        true_parameters={k: float(v) for k, v in truth.items()},
        noise=check.number(table, "noise", "data", default=0.0),
        seed=check.integer(table, "seed", "data", default=0, minimum=0),
    )


def _fit(check: Checker, config: dict, model: AbstractModel, data: DataSpec | None):
    table = check.table(config, "fit", "fit", required=False)
    if table is None:
        return None
    if data is None:
        raise check.fail("fit", "needs data to fit; add a [data] table.")
    check.keys(
        table, "fit", ("parameters", "fit_initial_state", "method", "max_steps", "rtol", "atol")
    )
    return FitSpec(
        parameters=check.names(table, "parameters", "fit", model.parameter_names()),
        fit_initial_state=check.boolean(table, "fit_initial_state", "fit", default=False),
        method=check.string(
            table, "method", "fit", default="least_squares", choices=("least_squares", "gradient")
        ),
        max_steps=check.integer(table, "max_steps", "fit", default=None),
        rtol=check.number(table, "rtol", "fit", default=1e-8, positive=True),
        atol=check.number(table, "atol", "fit", default=1e-12, positive=True),
    )


def _sweep(check: Checker, config: dict, model: AbstractModel, fit: FitSpec | None):
    table = check.table(config, "sweep", "sweep", required=False)
    if table is None:
        return None
    check.keys(table, "sweep", ("parameters", "mode", "observable", "around_fit"))
    around_fit = check.boolean(table, "around_fit", "sweep", default=False)
    if around_fit and fit is None:
        raise check.fail("sweep.around_fit", "needs a [fit] table (or set it to false).")
    axes_table = check.table(table, "parameters", "sweep.parameters")
    if not axes_table:
        raise check.fail("sweep.parameters", "is empty; name at least one parameter to sweep.")
    sweepable = model.parameter_names() + model.state_names
    axes = {}
    for name, axis in axes_table.items():
        where = f"sweep.parameters.{name}"
        if name not in sweepable:
            raise check.fail(where, f"cannot be swept; the choices are {list(sweepable)}.")
        axes[name] = _sweep_axis(check, axis, where, model, name)
    mode = check.string(table, "mode", "sweep", default="grid", choices=SWEEP_MODES)
    if mode == "zip" and len({axis["num"] for axis in axes.values()}) > 1:
        raise check.fail("sweep.mode", "'zip' needs the same number of values on every axis.")
    observable = check.string(
        table, "observable", "sweep", default="final_state", choices=OBSERVABLES
    )
    if (observable == "final_field") != isinstance(model, AbstractGridModel):
        raise check.fail(
            "sweep.observable",
            "use 'final_field' for grid models and 'final_state' or 'peak' for the others.",
        )
    return SweepSpec(axes=axes, mode=mode, observable=observable, around_fit=around_fit)


def _sweep_axis(check: Checker, axis: Any, where: str, model, name: str) -> dict[str, Any]:
    if not isinstance(axis, dict):
        raise check.fail(
            where, f"must be a table such as {{ start = 0.1, stop = 1.0, num = 8 }}; got {axis!r}."
        )
    check.keys(axis, where, ("values", "start", "stop", "num", "relative_span"))
    if "values" in axis:
        values = axis["values"]
        if (
            not isinstance(values, list)
            or not values
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        ):
            raise check.fail(
                f"{where}.values", f"must be a non-empty list of numbers; got {values!r}."
            )
        resolved = {"values": [float(v) for v in values], "num": len(values)}
    elif "relative_span" in axis:
        span = check.number(axis, "relative_span", where, positive=True)
        if span >= 1:
            raise check.fail(f"{where}.relative_span", f"must be below 1 (±100%); got {span}.")
        resolved = {"relative_span": span, "num": check.integer(axis, "num", where, minimum=2)}
    else:
        start = check.number(axis, "start", where)
        stop = check.number(axis, "stop", where)
        if not stop > start:
            raise check.fail(f"{where}.stop", f"must be greater than start ({start}); got {stop}.")
        resolved = {"start": start, "stop": stop, "num": check.integer(axis, "num", where)}
    bounds = model.parameter_bounds().get(name)
    if bounds is not None:
        ends = resolved.get("values") or [resolved.get("start"), resolved.get("stop")]
        ends = [v for v in ends if v is not None]
        if ends and not np.all(bounds.contains(np.asarray(ends))):
            raise check.fail(where, f"reaches outside {name}'s valid range {bounds.describe()}.")
    return resolved


def _figures(check: Checker, config: dict, model, fit, sweep) -> tuple[FigureSpec, ...]:
    figures, names = [], set()
    for where, entry, kind in figure_entries(check, config):
        kind.check(check, entry, where, model, {"fit": fit, "sweep": sweep})
        figure = FigureSpec(
            kind.name, {key: value for key, value in entry.items() if key != "kind"}
        )
        if figure.name in names:
            raise check.fail(f"{where}.name", f"{figure.name!r} is used twice; give each a name.")
        names.add(figure.name)
        figures.append(figure)
    return tuple(figures)
