"""Experiment files: TOML parsed with `tomllib` and checked completely before anything compiles.

Every problem is reported as an `ExperimentError` naming the file, the key and the fix, so
a typo costs a second, not a compile.
"""

import csv
import dataclasses
import math
import pathlib
import tomllib
import warnings
from typing import Any

import jax.numpy as jnp
import jax.random as jr
import numpy as np

from .._fit._fit import METHODS
from .._fit._noise import NOISE_MODELS, AbstractLeastSquaresNoise
from .._options import SolveOptions
from .._sensitivity import METHODS as SENSITIVITY_METHODS, _checked_sizes as check_sensitivity_sizes
from .._simulate import STABLE_STEP_SAFETY
from ..integrate._loops import fixed_steps_per_interval
from ..integrate._mass import has_mass_matrix, mass_matrix_of
from ..integrate._registry import select_integrator
from ..integrate._sde import checked_stochastic_inputs, is_stochastic
from ..integrate._selection import default_solver
from ..integrate._solvers import SOLVERS, resolve_solver
from ..models import AbstractGridModel, AbstractModel, GrayScott, NavierStokes2D
from ._check import FLOAT_BYTES, Checker, ExperimentError as ExperimentError, check_memory
from ._fields import StateEvent, initial_field
from ._figures import figure_entries
from ._model import model_from_config

DATASETS = ("lynx_hare",)
SWEEP_MODES = ("grid", "zip")
OBSERVABLES = ("final_state", "peak", "final_field", "event")
SENSITIVITY_OBSERVABLES = ("final_state", "peak", "event")
EVENT_DIRECTIONS = {"rising": 1, "falling": -1, "either": 0}
EXTREMA = {"maximum": -1, "minimum": 1}  # the direction in which the rate crosses zero
GRID_FIELDS = (
    "gaussian",
    "sine",
    "gray_scott_seed",
    "kassam_trefethen",
    "taylor_green",
    "random_vorticity",
    "kolmogorov_laminar",
)
VORTICITY_FIELDS = ("taylor_green", "random_vorticity", "kolmogorov_laminar")
FIT_KEYS = (
    "parameters",
    "fit_initial_state",
    "method",
    "max_steps",
    "rtol",
    "atol",
    "t0",
    "noise",
    "noise_scale",
    "fit_noise",
    "starts",
    "bounds",
    "seed",
    "profiles",
    "sampling",
)
TOP_LEVEL_KEYS = (
    "description",
    "model",
    "initial_state",
    "time",
    "solver",
    "data",
    "fit",
    "sweep",
    "event",
    "sensitivity",
    "continuation",
    "ensemble",
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
class ProfileSpec:
    """`[fit.profiles]`: the parameters profiled, the level, the grid (see `FitResult.profile`)."""

    parameters: tuple[str, ...]
    level: float
    num_points: int
    span: float


@dataclasses.dataclass(frozen=True)
class SamplingSpec:
    """`[fit.sampling]`: NUTS settings (see `simlab.sample`), uniform priors by name, and how
    many draws are simulated for the posterior predictive band."""

    num_samples: int
    num_warmup: int
    num_chains: int
    seed: int
    priors: dict[str, tuple[float, float]]
    num_predictive: int


@dataclasses.dataclass(frozen=True)
class FitSpec:
    """`[fit]`: the keywords of `simlab.fit` an experiment file can give, checked."""

    parameters: tuple[str, ...]
    fit_initial_state: bool
    method: str | None
    max_steps: int | None
    rtol: float
    atol: float
    t0: float | None = None
    noise: str = "gaussian"
    noise_scale: float | tuple[float, ...] | None = None
    fit_noise: bool | None = None
    starts: int | None = None
    bounds: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    seed: int = 0
    profiles: ProfileSpec | None = None
    sampling: SamplingSpec | None = None


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """`axes` holds each swept name's values; a relative span is resolved after the fit."""

    axes: dict[str, dict[str, Any]]
    mode: str
    observable: str
    around_fit: bool


@dataclasses.dataclass(frozen=True)
class SensitivitySpec:
    """The `[sensitivity]` table: the arguments of [`simlab.sensitivity`][]; `ranges` maps
    each varied name to `(lower, upper)`, `seed` makes the design's key."""

    method: str
    ranges: dict[str, tuple[float, float]]
    observable: str
    num_samples: int
    seed: int
    second_order: bool
    num_levels: int
    num_resamples: int
    conf_level: float


@dataclasses.dataclass(frozen=True)
class ContinuationSpec:
    """The `[continuation]` table: [`simlab.continuation`][] of `parameter` over
    `num` values from `start` to `stop`, from `initial_guess`."""

    parameter: str
    start: float
    stop: float
    num: int
    initial_guess: np.ndarray
    oscillations: bool

    def values(self) -> np.ndarray:
        return np.linspace(self.start, self.stop, self.num)


@dataclasses.dataclass(frozen=True)
class EnsembleSpec:
    """The `[ensemble]` of a stochastic model: `paths` per swept point, and the `seed` of
    the key `jax.random.key(seed)`; path `p` draws from `fold_in(key, p)`."""

    paths: int
    seed: int


@dataclasses.dataclass(frozen=True)
class FirstPassageSweep:
    """A sweep of first-passage times over the paths of a stochastic model: the `[sweep]`
    with `observable = "event"`, its `[event]` and the initial state the paths start at."""

    sweep: SweepSpec
    event: StateEvent
    y0: np.ndarray


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
    `config` (the resolved TOML table, with `quick` overrides applied), `quick`, `event`
    (the `[event]`, a builder of each member's `simlab.Event`), `sensitivity`,
    `continuation` and `ensemble` (the paths and seed of a stochastic model); `petab` (the
    problem and its file) where `[model]` names a PEtab problem, whose first condition's
    SBML model and SBML initial state are then `model` and `y0`.
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
    event: StateEvent | None = None
    sensitivity: SensitivitySpec | None = None
    continuation: ContinuationSpec | None = None
    ensemble: EnsembleSpec | None = None
    petab: Any = None


def deep_merge(base: dict, overrides: dict) -> dict:
    """`base` with `overrides` applied, table by table (overrides win)."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load(
    path: str | pathlib.Path, *, quick: bool = False, data: str | pathlib.Path | None = None
) -> Experiment:
    """Parses and checks an experiment file; nothing is compiled or run.

    **Arguments:**

    - `path`: the TOML file.
    - `quick`: apply the file's `[quick]` table, a reduced version for tests and previews.
    - `data`: a CSV file that replaces the file's data source (`simlab run EXP --data
      PATH`), relative to the current folder. Named by the user rather than by the file, it
      may lie anywhere, while a `csv` path in the file must stay inside the experiment's
      folder or the project. The `[data]` table's `time_column` and `columns` still apply.

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
    return parse(config, path, quick=quick, data_file=data)


def parse(
    config: dict,
    path: pathlib.Path,
    *,
    quick: bool = False,
    data_file: str | pathlib.Path | None = None,
) -> Experiment:
    """Checks an already parsed TOML table (see [`simlab.experiment.load`][]); `data_file`
    is `load`'s `data`."""
    check = Checker(path)
    check.keys(config, "", TOP_LEVEL_KEYS)
    if data_file is not None:
        config = _with_data_file(check, config, pathlib.Path(data_file))
    overrides = check.table(config, "quick", "quick", required=False) or {}
    resolved = {k: v for k, v in config.items() if k != "quick"}
    if quick:
        resolved = deep_merge(resolved, overrides)
    elif overrides:  # the [quick] table is checked on every run, not only the first --quick
        try:
            parse(config, path, quick=True, data_file=data_file)
        except ExperimentError as error:
            raise ExperimentError(f"{error} (with the [quick] table applied)") from None
    description = check.string(resolved, "description", "description", default="")
    if "petab" in check.table(resolved, "model", "model"):  # petab (an extra) loads only here
        from ._petab import parse_petab

        return parse_petab(
            check, resolved, path, description=description, quick=quick, data_file=data_file
        )
    model, preset_state = model_from_config(check, resolved)
    y0 = _initial_state(check, resolved, model, preset_state)
    time = _time(check, resolved)
    solver = _solver(check, resolved)
    ensemble = _ensemble(check, resolved, model, y0, time, solver)
    _check_fixed_step(check, model, y0, time, solver)
    data = _data(check, resolved, model, named_by_user=data_file is not None)
    fit = _fit(check, resolved, model, data, time)
    event = _event(check, resolved, model, y0, solver, time)
    sweep = _sweep(check, resolved, model, fit, event)
    sensitivity = _sensitivity(check, resolved, model, y0, event)
    continuation = _continuation(check, resolved, model, y0)
    figures = _figures(
        check, resolved, model, fit, sweep, sensitivity, continuation, ensemble, event, y0
    )
    _check_sizes(check, y0, time, sweep, fit, solver, ensemble)
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
        event=event,
        sensitivity=sensitivity,
        continuation=continuation,
        ensemble=ensemble,
    )


def _initial_state(
    check: Checker, config: dict, model: AbstractModel, preset_state: np.ndarray | None
) -> np.ndarray:
    if preset_state is not None:
        if "initial_state" in config:
            raise check.fail(
                "initial_state", "model.preset gives the initial state; remove [initial_state]."
            )
        return preset_state
    table = check.table(config, "initial_state", "initial_state")
    if isinstance(model, AbstractGridModel):
        return _grid_field(check, table, model)
    if "mode" in table and hasattr(model, "mode_shapes"):
        return _normal_mode(check, table, model)
    names = model.state_names
    check.keys(table, "initial_state", names)
    missing = [name for name in names if name not in table]
    if missing:
        raise check.fail(
            f"initial_state.{missing[0]}",
            f"is missing; give a number for each state component {list(names)}.",
        )
    return np.array([check.number(table, name, "initial_state") for name in names])


def _normal_mode(check: Checker, table: dict, model) -> np.ndarray:
    """`mode = k`, `amplitude = A`: a chain at rest with only its k-th normal mode excited,
    to the amplitude $Q_k = A$ (positions $A$ times the mode's shape)."""
    check.keys(table, "initial_state", ("mode", "amplitude"))
    shapes = np.asarray(model.mode_shapes())  # symmetric: row k is mode k's shape
    mode = check.integer(table, "mode", "initial_state")
    if mode > len(shapes):
        raise check.fail(
            "initial_state.mode", f"is {mode}; {type(model).__name__} has {len(shapes)} modes."
        )
    amplitude = check.number(table, "amplitude", "initial_state")
    return np.concatenate([amplitude * shapes[mode - 1], np.zeros(len(shapes))])


def _grid_field(check: Checker, table: dict, model: AbstractGridModel) -> np.ndarray:
    check.keys(
        table, "initial_state", ("field", "amplitude", "width", "seed", "noise", "peak_wavenumber")
    )
    kind = check.string(table, "field", "initial_state", choices=GRID_FIELDS)
    if (kind == "gray_scott_seed") != isinstance(model, GrayScott):
        raise check.fail(
            "initial_state.field",
            f"{kind!r} does not suit {type(model).__name__}; use 'gray_scott_seed' for "
            "GrayScott and 'gaussian' or 'sine' for single-field models.",
        )
    plane_flow = isinstance(model, NavierStokes2D) and not model.passive_scalar
    if kind in VORTICITY_FIELDS and not plane_flow:
        raise check.fail(
            "initial_state.field",
            f"{kind!r} is a vorticity field for NavierStokes2D without a passive scalar, "
            f"not {type(model).__name__}.",
        )
    if kind == "kolmogorov_laminar" and not model.forcing_wavenumber**2 * float(
        model.viscosity
    ) + float(model.drag):
        raise check.fail(
            "initial_state.field",
            "'kolmogorov_laminar' needs viscosity or drag to balance the forcing; give "
            "model.parameters.viscosity > 0.",
        )
    random = kind in ("random_vorticity", "kolmogorov_laminar")
    if "peak_wavenumber" in table and not random:
        raise check.fail(
            "initial_state.peak_wavenumber",
            "sets the spectrum of 'random_vorticity' and 'kolmogorov_laminar' only; remove it.",
        )
    options = {
        "amplitude": check.number(
            table, "amplitude", "initial_state", default=1.0, positive=kind == "random_vorticity"
        ),
        "width": check.number(table, "width", "initial_state", default=0.1, positive=True),
        "noise": check.number(table, "noise", "initial_state", default=0.0),
        "seed": check.integer(table, "seed", "initial_state", default=0, minimum=0),
        "peak_wavenumber": check.number(
            table, "peak_wavenumber", "initial_state", default=4.0, positive=True
        ),
    }
    if kind == "kolmogorov_laminar" and options["amplitude"] < 0:
        raise check.fail(
            "initial_state.amplitude",
            f"is the energy of the disturbance, at least 0; got {options['amplitude']}.",
        )
    return initial_field(kind, model, **options)


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


def _check_fixed_step(check: Checker, model: AbstractModel, y0, time: TimeSpan, solver) -> None:
    """A fixed step that `simulate` would refuse at the start: more steps than `max_steps`,
    or a `dt0` above the model's largest stable step for the solver."""
    options = SolveOptions.from_mapping(solver)
    if options.adaptive:
        return
    ts = time.ts()
    per_interval = fixed_steps_per_interval(ts, options.dt0)  # one int where all are equal
    steps = int(np.sum(np.broadcast_to(per_interval, (ts.size - 1,))))
    if steps > options.max_steps:
        raise check.fail(
            "solver.max_steps",
            f"is {options.max_steps}, but {steps} fixed steps of dt0 = {options.dt0:g} span "
            f"the time; set max_steps = {steps} or more, or a larger dt0.",
        )
    _check_stable_step(check, model, jnp.asarray(y0), ts, options)


def _check_stable_step(check: Checker, model: AbstractModel, y0, ts, options) -> None:
    chosen = (
        default_solver(model, y0, ts, rtol=options.rtol, atol=options.atol)[0]
        if options.solver is None
        else resolve_solver(options.solver, stiff=False, state_size=y0.size)
    )
    with warnings.catch_warnings():  # a grid too coarse is the run's warning, not a refusal
        warnings.simplefilter("ignore")
        limit = model.max_stable_step(chosen, y0)
    if limit is not None and options.dt0 > float(limit):
        raise check.fail(
            "solver.dt0",
            f"is {options.dt0:g}, above the largest stable step {float(limit):.6g} of "
            f"{type(chosen).__name__} for {type(model).__name__} ({model.step_limit}), so "
            f"the solution would blow up; set dt0 = {STABLE_STEP_SAFETY * float(limit):.3g} "
            "or less.",
        )


def _data(
    check: Checker, config: dict, model: AbstractModel, *, named_by_user: bool = False
) -> DataSpec | None:
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
        return _csv_data(check, table, model, named_by_user=named_by_user)
    return _synthetic_data(check, table, model)


def _with_data_file(check: Checker, config: dict, data: pathlib.Path) -> dict:
    """`config` reading its data from `data`, a CSV file named on the command line (which
    `_csv_data` takes from anywhere): it replaces the `[data]` table's source, in the
    `[quick]` table too, and keeps its `time_column` and `columns`."""
    table = check.table(config, "data", "data", required=False) or {}
    kept = {key: table[key] for key in ("time_column", "columns") if key in table}
    replaced = {**config, "data": {**kept, "csv": str(data.expanduser().resolve())}}
    quick = check.table(config, "quick", "quick", required=False)
    if quick is not None and "data" in quick:
        replaced["quick"] = {key: value for key, value in quick.items() if key != "data"}
    return replaced


def _csv_data(
    check: Checker, table: dict, model: AbstractModel, *, named_by_user: bool = False
) -> DataSpec:
    relative = pathlib.Path(check.string(table, "csv", "data"))
    csv_path = relative if relative.is_absolute() else check.path.parent / relative
    if not named_by_user:
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
        # utf-8-sig: spreadsheet programs start a UTF-8 file with a byte-order mark.
        with csv_path.open(newline="", encoding="utf-8-sig") as handle:
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
        # An empty cell (or nan) is a value that was not observed: NaN, left out of the fit.
        values = np.array([[float(row[c] or "nan") for c in columns] for row in rows])
    except ValueError:
        raise check.fail(
            "data.csv",
            f"{str(csv_path)!r} holds a value that is not a number in the columns "
            f"{[time_column, *columns]}; use plain decimal numbers (an empty cell: missing).",
        ) from None
    if np.any(np.isinf(values)) or not np.all(np.isfinite(ts)) or not np.all(np.diff(ts) > 0):
        raise check.fail(
            "data.csv",
            f"{str(csv_path)!r} needs finite values (empty or nan where missing) and strictly "
            "increasing times.",
        )
    unobserved = [
        c for c, column in zip(columns, values.T, strict=True) if np.all(np.isnan(column))
    ]
    if unobserved:
        raise check.fail(
            "data.columns",
            f"{str(csv_path)!r} has no value in column {unobserved[0]!r}; fill it in or leave "
            "it out of data.columns.",
        )
    return DataSpec(f"csv:{csv_path}", ts, values, tuple(columns))


def _check_inside_project(
    check: Checker,
    path: pathlib.Path,
    key: str = "data.csv",
    remedy: str = "copy the data file next to the experiment file, or name it on the command "
    "line: `simlab run EXPERIMENT --data PATH`",
) -> None:
    """A data path read from a TOML file must stay in the experiment's folder or the project
    (the current folder): an experiment file cannot make simlab read files elsewhere."""
    resolved = path.resolve()
    roots = (check.path.resolve().parent, pathlib.Path.cwd().resolve())
    if not any(resolved.is_relative_to(root) for root in roots):
        raise check.fail(
            key,
            f"{str(path)!r} lies outside the experiment's folder and the current project; "
            f"{remedy}.",
        )


MAX_STEPS_LIMIT = 10**7


def _check_sizes(check: Checker, y0: np.ndarray, time, sweep, fit, solver, ensemble) -> None:
    """Refuses sizes a run could not hold, naming the memory they would need."""
    check_memory(
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
        members *= ensemble.paths if ensemble is not None else 1
        check_memory(
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


def _fit(check: Checker, config: dict, model: AbstractModel, data, time: TimeSpan):
    table = check.table(config, "fit", "fit", required=False)
    if table is None:
        return None
    if data is None:
        raise check.fail("fit", "needs data to fit; add a [data] table.")
    check.keys(table, "fit", FIT_KEYS)
    parameters = check.names(table, "parameters", "fit", model.parameter_names())
    noise = check.string(table, "noise", "fit", default="gaussian", choices=tuple(NOISE_MODELS))
    least_squares = issubclass(NOISE_MODELS[noise], AbstractLeastSquaresNoise)
    method = check.string(table, "method", "fit", default=None, choices=METHODS)
    if method == "least_squares" and not least_squares:
        raise check.fail(
            "fit.method",
            f"'least_squares' needs Gaussian or log-normal noise; for noise = {noise!r} use "
            "'quasi_newton' or 'gradient' (or leave method out).",
        )
    for key in ("noise_scale", "fit_noise"):
        if key in table and not least_squares:
            raise check.fail(
                f"fit.{key}",
                f"is about the scale of Gaussian or log-normal noise; noise = {noise!r} has "
                "none (its spread follows from the mean), so remove it.",
            )
    if data.source != "synthetic":
        try:
            NOISE_MODELS[noise]().check_observations(data.observations, "")
        except ValueError as error:
            raise check.fail("fit.noise", f"does not suit the data: {error}") from None
    bounds = _fit_bounds(check, table, model, parameters)
    starts = check.integer(table, "starts", "fit", default=None, minimum=2)
    if starts is not None:
        _check_finite_ranges(check, "fit.starts", model, parameters, bounds, {})
    fit = FitSpec(
        parameters=parameters,
        fit_initial_state=check.boolean(table, "fit_initial_state", "fit", default=False),
        method=method,
        max_steps=check.integer(table, "max_steps", "fit", default=None),
        rtol=check.number(table, "rtol", "fit", default=1e-8, positive=True),
        atol=check.number(table, "atol", "fit", default=1e-12, positive=True),
        t0=_fit_t0(check, table, data, time),
        noise=noise,
        noise_scale=_noise_scale(check, table, _num_observed(data, model)),
        fit_noise=(
            check.boolean(table, "fit_noise", "fit", default=False)
            if "fit_noise" in table
            else None
        ),
        starts=starts,
        bounds=bounds,
        seed=check.integer(table, "seed", "fit", default=0, minimum=0),
        profiles=_fit_profiles(check, table, parameters),
    )
    return dataclasses.replace(fit, sampling=_fit_sampling(check, table, model, fit))


def _num_observed(data: DataSpec, model: AbstractModel) -> int:
    if data.source == "synthetic":  # every state is observed
        return len(model.state_names) if model.state_names else 1
    return data.observations.shape[1]


def _fit_t0(check: Checker, table: dict, data: DataSpec, time: TimeSpan) -> float | None:
    """The time `[initial_state]` holds, before the first saved time and observation."""
    t0 = check.number(table, "t0", "fit", default=None)
    if t0 is None:
        return None
    if not t0 < time.start:
        raise check.fail(
            "fit.t0",
            f"is {t0:g}: the simulation starts there, so it must come before time.start "
            f"({time.start:g}), the first saved time; lower it, or raise time.start.",
        )
    if data.source != "synthetic" and not t0 < data.ts[0]:
        raise check.fail(
            "fit.t0",
            f"is {t0:g}, not before the first observation time {data.ts[0]:g}; lower it, or "
            "remove it to start at the first observation.",
        )
    return t0


def _noise_scale(check: Checker, table: dict, num_observed: int):
    """A positive number, or one per observed quantity."""
    if "noise_scale" not in table:
        return None
    value = table["noise_scale"]
    if isinstance(value, list):
        if len(value) != num_observed:
            raise check.fail(
                "fit.noise_scale",
                f"gives {len(value)} values for {num_observed} observed quantities; give one "
                "number, or one per observed quantity.",
            )
        return tuple(
            check.number({"noise_scale": v}, "noise_scale", "fit", positive=True) for v in value
        )
    return check.number(table, "noise_scale", "fit", positive=True)


def _pair(check: Checker, value: Any, where: str, example: str) -> tuple[float, float]:
    """`[lower, upper]`: two finite numbers, lower < upper."""
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        or not all(math.isfinite(v) for v in value)
    ):
        raise check.fail(where, f"must be a pair [lower, upper] of numbers, e.g. {example}; got "
                         f"{value!r}.")  # fmt: skip
    lower, upper = (float(v) for v in value)
    if not lower < upper:
        raise check.fail(where, f"is [{lower:g}, {upper:g}]; the lower end must come first.")
    return lower, upper


def _ranges(
    check: Checker, table: dict, where: str, model: AbstractModel, parameters: tuple[str, ...]
) -> dict[str, tuple[float, float]]:
    """A table of `name = [lower, upper]` for fitted parameters: inside each parameter's
    declared range, and holding its starting value."""
    ranges = {}
    declared = model.parameter_bounds()
    for name, value in table.items():
        key = f"{where}.{name}"
        if name not in parameters:
            raise check.fail(
                key, f"is not a fitted parameter; fit.parameters are {list(parameters)}."
            )
        lower, upper = _pair(check, value, key, "[0.1, 2.0]")
        bounds = declared.get(name)
        if bounds is not None and (lower < bounds.lower or upper > bounds.upper):
            raise check.fail(
                key,
                f"= [{lower:g}, {upper:g}] reaches outside {name}'s valid range "
                f"{bounds.describe()}; narrow it to lie inside.",
            )
        start = float(getattr(model, name))
        if not lower < start < upper:
            raise check.fail(
                key,
                f"= [{lower:g}, {upper:g}] does not hold the starting value {name} = {start:g} "
                "(model.parameters); widen it or move the starting value inside.",
            )
        ranges[name] = (lower, upper)
    return ranges


def _fit_bounds(check: Checker, table: dict, model, parameters) -> dict[str, tuple[float, float]]:
    return _ranges(check, check.table(table, "bounds", "fit.bounds", required=False) or {},
                   "fit.bounds", model, parameters)  # fmt: skip


def _check_finite_ranges(check: Checker, key: str, model, parameters, *given: dict) -> None:
    """Every fitted parameter has a finite range, declared or given in one of `given`."""
    declared = model.parameter_bounds()
    for name in parameters:
        bounds = declared.get(name)
        if any(name in ranges for ranges in given) or (
            bounds is not None and math.isfinite(bounds.lower) and math.isfinite(bounds.upper)
        ):
            continue
        describe = bounds.describe() if bounds is not None else "(-inf, inf)"
        need = (
            "draws its starts from" if key == "fit.starts" else "has a uniform default prior over"
        )
        raise check.fail(
            key,
            f"{need} each parameter's range, but {name} has range {describe}; give "
            f"fit.bounds.{name} = [lower, upper]"
            + (f" or fit.sampling.priors.{name} = [lower, upper]." if key != "fit.starts" else "."),
        )


def _fit_profiles(check: Checker, table: dict, parameters) -> ProfileSpec | None:
    profiles = check.table(table, "profiles", "fit.profiles", required=False)
    if profiles is None:
        return None
    where = "fit.profiles"
    check.keys(profiles, where, ("parameters", "level", "num_points", "span"))
    names = (
        check.names(profiles, "parameters", where, parameters)
        if "parameters" in profiles
        else parameters
    )
    level = check.number(profiles, "level", where, default=0.95)
    if not 0 < level < 1:
        raise check.fail(f"{where}.level", f"must lie between 0 and 1, e.g. 0.95; got {level!r}.")
    num_points = check.integer(profiles, "num_points", where, default=21, minimum=3)
    span = check.number(profiles, "span", where, default=4.0, positive=True)
    return ProfileSpec(names, level, num_points, span)


def _fit_sampling(check: Checker, table: dict, model, fit: FitSpec) -> SamplingSpec | None:
    sampling = check.table(table, "sampling", "fit.sampling", required=False)
    if sampling is None:
        return None
    where = "fit.sampling"
    check.keys(
        sampling,
        where,
        ("num_samples", "num_warmup", "num_chains", "seed", "priors", "num_predictive"),
    )
    priors_table = check.table(sampling, "priors", f"{where}.priors", required=False) or {}
    priors = _ranges(check, priors_table, f"{where}.priors", model, fit.parameters)
    _check_finite_ranges(check, f"{where}.priors", model, fit.parameters, fit.bounds, priors)
    return SamplingSpec(
        num_samples=check.integer(sampling, "num_samples", where, default=1000),
        num_warmup=check.integer(sampling, "num_warmup", where, default=500),
        num_chains=check.integer(sampling, "num_chains", where, default=4),
        seed=check.integer(sampling, "seed", where, default=0, minimum=0),
        priors=priors,
        num_predictive=check.integer(sampling, "num_predictive", where, default=200),
    )


def _sweep(check: Checker, config: dict, model: AbstractModel, fit: FitSpec | None, event):
    table = check.table(config, "sweep", "sweep", required=False)
    if table is None:
        return None
    check.keys(table, "sweep", ("parameters", "mode", "observable", "around_fit"))
    around_fit = check.boolean(table, "around_fit", "sweep", default=False)
    if around_fit and fit is None:
        raise check.fail("sweep.around_fit", "needs a [fit] table (or set it to false).")
    axes = {
        name: _sweep_axis(check, axis, where, model, name)
        for name, axis, where in _named_entries(
            check, table, "parameters", "sweep", model, "name at least one parameter to sweep"
        )
    }
    mode = check.string(table, "mode", "sweep", default="grid", choices=SWEEP_MODES)
    if mode == "zip" and len({axis["num"] for axis in axes.values()}) > 1:
        raise check.fail("sweep.mode", "'zip' needs the same number of values on every axis.")
    observable = check.string(
        table, "observable", "sweep", default="final_state", choices=OBSERVABLES
    )
    if (observable == "final_field") != isinstance(model, AbstractGridModel):
        raise check.fail(
            "sweep.observable",
            "use 'final_field' for grid models and 'final_state', 'peak' or 'event' for the "
            "others.",
        )
    _event_needed(check, "sweep.observable", observable, event)
    return SweepSpec(axes=axes, mode=mode, observable=observable, around_fit=around_fit)


def _named_entries(
    check: Checker, table: dict, key: str, section: str, model: AbstractModel, hint: str
):
    """The `(name, value, where)` entries of the non-empty table `section.key`, each named
    after a parameter or a state of `model` (what sweeps and sensitivity analyses vary)."""
    entries = check.table(table, key, f"{section}.{key}")
    if not entries:
        raise check.fail(f"{section}.{key}", f"is empty; {hint}.")
    variable = model.parameter_names() + model.state_names
    for name, value in entries.items():
        where = f"{section}.{key}.{name}"
        if name not in variable:
            raise check.fail(where, f"cannot be varied; the choices are {list(variable)}.")
        yield name, value, where


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


def _figures(
    check: Checker,
    config: dict,
    model,
    fit,
    sweep,
    sensitivity,
    continuation,
    ensemble,
    event,
    y0,
) -> tuple[FigureSpec, ...]:
    """The `[[figures]]`, each checked against the tables (and their parts) it needs."""
    figures, names = [], set()
    passages = ensemble is not None and sweep is not None and sweep.observable == "event"
    tables = {
        "fit": fit,
        "sweep": sweep,
        "fit.starts": fit and fit.starts,
        "fit.profiles": fit and fit.profiles,
        "fit.sampling": fit and fit.sampling,
        "sensitivity": sensitivity,
        "continuation": continuation,
        "ensemble": ensemble,
        "first_passage": FirstPassageSweep(sweep, event, y0) if passages else None,
        "petab": None,
    }
    for where, entry, kind in figure_entries(check, config):
        kind.check(check, entry, where, model, tables)
        figure = FigureSpec(
            kind.name, {key: value for key, value in entry.items() if key != "kind"}
        )
        if figure.name in names:
            raise check.fail(f"{where}.name", f"{figure.name!r} is used twice; give each a name.")
        names.add(figure.name)
        figures.append(figure)
    return tuple(figures)


# -- events, sensitivity, continuation ------------------------------------------------------


def _event(
    check: Checker, config: dict, model: AbstractModel, y0, solver, time: TimeSpan
) -> StateEvent | None:
    """`[event]`: a named state crossing a `threshold` (in a `direction`), or its
    `extremum`; the time is found by root finding on the solution."""
    table = check.table(config, "event", "event", required=False)
    if table is None:
        return None
    check.keys(table, "event", ("state", "threshold", "direction", "extremum"))
    if isinstance(model, AbstractGridModel):
        raise check.fail("event", f"needs a model with named states, not {type(model).__name__}.")
    name = check.string(table, "state", "event", choices=model.state_names)
    if ("threshold" in table) == ("extremum" in table):
        raise check.fail(
            "event",
            "needs exactly one of threshold = NUMBER (the state crosses it) or extremum = "
            "'maximum' | 'minimum' (the state peaks or bottoms out).",
        )
    if "threshold" in table:
        threshold = check.number(table, "threshold", "event")
        choice = check.string(
            table, "direction", "event", default="either", choices=tuple(EVENT_DIRECTIONS)
        )
        direction = EVENT_DIRECTIONS[choice]
    else:
        if "direction" in table:
            raise check.fail(
                "event.direction", "goes with threshold; an extremum sets its own. Remove it."
            )
        threshold = None
        extremum = check.string(table, "extremum", "event", choices=tuple(EXTREMA))
        direction = EXTREMA[extremum]
        _check_rate_is_derivative(check, model, name)
    options = SolveOptions.from_mapping(solver)
    chosen = resolve_solver(
        options.solver,
        stiff=model.is_stiff,
        state_size=y0.size,
        rtol=options.rtol,
        atol=options.atol,
    )
    event = StateEvent(model.state_names.index(name), threshold, direction)
    if is_stochastic(model):  # timed on the saved path: StateEvent.first_passage
        if threshold is None:
            raise check.fail(
                "event.extremum",
                f"{type(model).__name__} is stochastic: its paths are rough, with no rate "
                "to find an extremum by; give a threshold instead.",
            )
        _check_saved_steps(check, time, options)
        return event
    try:
        select_integrator(
            chosen,
            requested=options.integrator,
            adaptive=options.adaptive,
            adjoint=options.adjoint,
            event=event,
            model=model,
        )
    except ValueError as error:
        raise check.fail(
            "event",
            f"{error} Set solver.name = 'rodas5p' (stiff) or an explicit solver such as 'tsit5'.",
        ) from error
    return event


def _ensemble(
    check: Checker, config: dict, model: AbstractModel, y0, time: TimeSpan, solver
) -> EnsembleSpec | None:
    """`[ensemble]`: the paths and seed a stochastic model needs (refused for deterministic
    ones), with a fixed-step stochastic `[solver]` allowed enough steps."""
    table = check.table(config, "ensemble", "ensemble", required=False)
    name = type(model).__name__
    if not is_stochastic(model):
        if table is not None:
            raise check.fail("ensemble", f"is for stochastic models; {name} is deterministic.")
        return None
    if table is None:
        raise check.fail(
            "ensemble",
            f"is missing; {name} is stochastic: add [ensemble] with paths = N (paths per "
            "swept point) and seed = S (the key jax.random.key(S)).",
        )
    for section in ("fit", "sensitivity", "continuation"):
        if section in config:
            raise check.fail(
                section,
                f"is for deterministic models here; {name} is stochastic (fit its paths from "
                "Python with simlab.fit, see the SDE page).",
            )
    check.keys(table, "ensemble", ("paths", "seed"))
    spec = EnsembleSpec(
        paths=check.integer(table, "paths", "ensemble"),
        seed=check.integer(table, "seed", "ensemble", default=0, minimum=0),
    )
    options = SolveOptions.from_mapping(solver)
    y0 = jnp.asarray(y0)
    chosen = (
        default_solver(model, y0, jnp.asarray(time.ts()), rtol=None, atol=None)[0]
        if options.solver is None
        else resolve_solver(options.solver, stiff=False, state_size=y0.size)
    )
    try:
        checked_stochastic_inputs(
            model, chosen, y0, jr.key(spec.seed), None, adaptive=options.adaptive
        )
    except ValueError as error:
        raise check.fail("solver", str(error)) from None
    if options.adaptive:  # SPaRK: its steps are known only as it takes them
        return spec
    steps = math.ceil((time.stop - time.start) / options.dt0 * (1 - 1e-9))
    if steps > options.max_steps:
        raise check.fail(
            "solver.max_steps",
            f"is {options.max_steps}, but {steps} steps of dt0 = {options.dt0:g} span the "
            f"time; set max_steps = {steps} or more.",
        )
    return spec


def _check_saved_steps(check: Checker, time: TimeSpan, options: SolveOptions) -> None:
    """A stochastic path's `[event]` is timed at the save times: every step must be saved."""
    if options.adaptive:
        raise check.fail(
            "event",
            "times a stochastic path at its save times, which must include every step: run "
            "it with fixed steps (solver.adaptive = false and solver.dt0), not the adaptive "
            "steps of 'spark', whose steps fall between the save times.",
        )
    dt0 = options.dt0
    spacing = (time.stop - time.start) / (time.num_points - 1)
    if spacing > dt0 * (1 + 1e-9):
        steps = math.ceil((time.stop - time.start) / dt0 * (1 - 1e-9)) + 1
        raise check.fail(
            "time.num_points",
            f"saves every {spacing:.4g}, more than the step solver.dt0 = {dt0:g}; a "
            "stochastic path's [event] is timed at the save times, so save every step: "
            f"num_points = {steps}.",
        )


def _check_rate_is_derivative(check: Checker, model: AbstractModel, name: str) -> None:
    """An extremum is where the rate f_i crosses zero: with a mass matrix that is where
    y_i' does only for a component whose row of M is a positive diagonal entry alone
    (M_ii y_i' = f_i)."""
    if not has_mass_matrix(model):
        return
    mass = np.asarray(mass_matrix_of(model, len(model.state_names)))
    index = model.state_names.index(name)
    if not (mass[index, index] > 0 and np.all(np.delete(mass[index], index) == 0)):
        raise check.fail(
            "event.extremum",
            f"needs d{name}/dt, which {type(model).__name__}'s mass matrix does not give "
            f"({name} is algebraic or coupled to other components in M y' = f). Use "
            "threshold = NUMBER instead.",
        )


def _event_needed(check: Checker, key: str, observable: str, event) -> None:
    if observable == "event" and event is None:
        raise check.fail(key, "is 'event', which needs an [event] table saying what happens.")


def _sensitivity(check: Checker, config: dict, model: AbstractModel, y0, event):
    """`[sensitivity]`: every argument of `simlab.sensitivity`, checked as it will check
    them (names, `lower < upper` inside each parameter's valid range, sample counts)."""
    table = check.table(config, "sensitivity", "sensitivity", required=False)
    if table is None:
        return None
    check.keys(
        table,
        "sensitivity",
        (
            "method",
            "ranges",
            "observable",
            "num_samples",
            "seed",
            "second_order",
            "num_levels",
            "num_resamples",
            "conf_level",
        ),
    )
    if isinstance(model, AbstractGridModel):
        raise check.fail(
            "sensitivity", f"needs a model with named states, not {type(model).__name__}."
        )
    method = check.string(
        table, "method", "sensitivity", default="sobol", choices=SENSITIVITY_METHODS
    )
    ranges = {}
    for name, bound, where in _named_entries(
        check, table, "ranges", "sensitivity", model, "give at least one name = [low, high]"
    ):
        if (
            not isinstance(bound, list)
            or len(bound) != 2
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in bound)
            or not all(math.isfinite(v) for v in bound)
        ):
            raise check.fail(where, f"must be two finite numbers [lower, upper]; got {bound!r}.")
        lower, upper = map(float, bound)
        if not lower < upper:
            raise check.fail(
                where, f"is [{lower:g}, {upper:g}]: lower must be below upper; swap them."
            )
        bounds = model.parameter_bounds().get(name)
        if bounds is not None and not np.all(bounds.contains(np.asarray([lower, upper]))):
            raise check.fail(where, f"reaches outside {name}'s valid range {bounds.describe()}.")
        ranges[name] = (lower, upper)
    observable = check.string(
        table, "observable", "sensitivity", default="final_state", choices=SENSITIVITY_OBSERVABLES
    )
    _event_needed(check, "sensitivity.observable", observable, event)
    spec = SensitivitySpec(
        method=method,
        ranges=ranges,
        observable=observable,
        num_samples=check.integer(table, "num_samples", "sensitivity", minimum=2),
        seed=check.integer(table, "seed", "sensitivity", default=0, minimum=0),
        second_order=check.boolean(table, "second_order", "sensitivity", default=True),
        num_levels=check.integer(table, "num_levels", "sensitivity", default=4, minimum=2),
        num_resamples=check.integer(table, "num_resamples", "sensitivity", default=100, minimum=2),
        conf_level=check.number(table, "conf_level", "sensitivity", default=0.95, positive=True),
    )
    try:
        check_sensitivity_sizes(
            method, spec.num_samples, spec.num_levels, spec.num_resamples, spec.conf_level
        )
    except ValueError as error:
        raise check.fail("sensitivity", str(error)) from None
    check_memory(
        check,
        "sensitivity.num_samples",
        "the design's runs",
        sensitivity_runs(spec) * y0.size * FLOAT_BYTES,
    )
    return spec


def sensitivity_runs(spec: SensitivitySpec) -> int:
    """How many simulations the design takes (SALib's Saltelli and Morris designs)."""
    num_vars = len(spec.ranges)
    if spec.method == "morris":
        return (num_vars + 1) * spec.num_samples
    return spec.num_samples * (2 * num_vars + 2 if spec.second_order else num_vars + 2)


def _continuation(check: Checker, config: dict, model: AbstractModel, y0):
    """`[continuation]`: a branch of fixed points over `num` values of one parameter."""
    table = check.table(config, "continuation", "continuation", required=False)
    if table is None:
        return None
    check.keys(table, "continuation", ("parameter", "values", "initial_guess", "oscillations"))
    if isinstance(model, AbstractGridModel):
        raise check.fail(
            "continuation", f"needs a model with named states, not {type(model).__name__}."
        )
    parameter = check.string(table, "parameter", "continuation", choices=model.parameter_names())
    values = check.table(table, "values", "continuation.values")
    check.keys(values, "continuation.values", ("start", "stop", "num"))
    start = check.number(values, "start", "continuation.values")
    stop = check.number(values, "stop", "continuation.values")
    if start == stop:
        raise check.fail("continuation.values.stop", f"must differ from start ({start}).")
    num = check.integer(values, "num", "continuation.values", minimum=2)
    bounds = model.parameter_bounds()[parameter]
    if not np.all(bounds.contains(np.asarray([start, stop]))):
        raise check.fail(
            "continuation.values", f"reaches outside {parameter}'s valid range {bounds.describe()}."
        )
    guess_table = check.table(table, "initial_guess", "continuation.initial_guess", required=False)
    if guess_table is None:
        guess = np.asarray(y0)
    else:
        names = model.state_names
        check.keys(guess_table, "continuation.initial_guess", names)
        missing = [name for name in names if name not in guess_table]
        if missing:
            raise check.fail(
                f"continuation.initial_guess.{missing[0]}",
                f"is missing; give a number for each state component {list(names)}.",
            )
        guess = np.array(
            [check.number(guess_table, name, "continuation.initial_guess") for name in names]
        )
    return ContinuationSpec(
        parameter=parameter,
        start=start,
        stop=stop,
        num=num,
        initial_guess=guess,
        oscillations=check.boolean(table, "oscillations", "continuation", default=True),
    )
