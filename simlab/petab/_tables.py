"""The PEtab tables as index arrays: which value each model constant, each overridden
initial state and each measurement's placeholder takes, in each experiment.

Every such value is an entry of one vector: the linear values of the parameter table's
parameters (estimated ones from the optimisation vector, fixed ones at their nominal
values), followed by the literal numbers the tables use. Tables then become integer
arrays that index it, and a likelihood is a few gathers.

An experiment is a simulation condition, preceded by its preequilibration condition where
the measurement table names one. All experiments share the SBML model, so they are solved
together (`jax.vmap`) on the union of their measurement times; the measurements of one
observable are then evaluated together, whatever their experiment.
"""

import copy
import dataclasses
import math
import re

import numpy as np
import pandas as pd
import petab.v1 as petab

from ._observables import CompiledObservable
from ._sbml import Network

NO_OVERRIDE = -1
"""In `Experiments.initial_values`: the state keeps its SBML (or preequilibrated) value."""


@dataclasses.dataclass(frozen=True, eq=False)
class Experiments:
    """Experiments solved together: the rows of each array are the experiments."""

    ids: tuple[str, ...]  # the simulation condition ids
    constant_values: np.ndarray  # (experiments, constants): indices into the value vector
    initial_values: np.ndarray  # (experiments, states): indices, or NO_OVERRIDE
    # Preequilibration: the same for the preequilibration condition (None: none).
    preequilibration_ids: tuple[str, ...] | None = None
    preequilibration_constants: np.ndarray | None = None
    preequilibration_initial: np.ndarray | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class Group:
    """The measurements of one observable, in any experiment."""

    observable: CompiledObservable
    rows: np.ndarray  # their positions in the measurement table
    experiment: np.ndarray  # index into the experiments (all batches, in order)
    time_index: np.ndarray  # into the save times; len(times) for steady state (time = inf)
    observable_values: np.ndarray  # (rows, placeholders): indices into the value vector
    noise_values: np.ndarray  # (rows, observable placeholders + noise placeholders)
    measured: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class Tables:
    """The PEtab problem as arrays (compared by identity: a static field of a problem)."""

    table_ids: tuple[str, ...]  # every parameter of the parameter table
    free: np.ndarray  # positions of the estimated ones in `table_ids`
    scales: tuple[str, ...]  # the scale of each estimated parameter
    nominal_linear: np.ndarray  # every parameter's nominal value, linear
    nominal_scaled: np.ndarray  # the estimated parameters' nominal values, on their scales
    literals: np.ndarray
    times: np.ndarray  # the save times of every experiment: 0, then the measurement times
    steady_state_measured: bool  # some measurements are at time = inf
    batches: tuple[Experiments, ...]  # without, then with preequilibration
    groups: tuple[Group, ...]
    measurement_df: pd.DataFrame

    @property
    def condition_ids(self) -> tuple[str, ...]:
        return tuple(pd.unique(np.array([i for b in self.batches for i in b.ids], dtype=object)))


def read_tables(problem: petab.Problem, network: Network) -> Tables:
    problem = _mapped(problem)
    _refuse_unsupported(problem, network)
    parameters = problem.parameter_df
    table_ids = tuple(parameters.index)
    estimated = parameters[petab.C.ESTIMATE].astype(int).to_numpy() == 1
    free = np.flatnonzero(estimated)
    scales = tuple(parameters[petab.C.PARAMETER_SCALE].iloc[free])
    literals: dict[float, int] = {}

    def index(value, where: str) -> int:
        if isinstance(value, str):
            if value in table_ids:
                return table_ids.index(value)
            try:
                value = float(value)
            except ValueError:
                raise ValueError(
                    f"PEtab: {where} names {value!r}, which the parameter table lacks."
                ) from None
        value = float(value)
        if math.isnan(value):
            raise ValueError(f"PEtab: {where} is empty.")
        return len(table_ids) + literals.setdefault(value, len(literals))

    observables = {
        observable_id: CompiledObservable(row, network, table_ids)
        for observable_id, row in problem.observable_df.iterrows()
    }
    measurements = problem.measurement_df.reset_index(drop=True)
    simulation = measurements[petab.C.SIMULATION_CONDITION_ID].astype(str)
    column = petab.C.PREEQUILIBRATION_CONDITION_ID
    if column in measurements:
        preequilibration = measurements[column].map(lambda v: str(v) if _is_set(v) else "")
    else:
        preequilibration = pd.Series("", index=measurements.index)
    pairs = list(dict.fromkeys(zip(preequilibration, simulation, strict=True)))
    # Experiments without preequilibration first, then those with it.
    pairs = [p for p in pairs if not p[0]] + [p for p in pairs if p[0]]
    position = {pair: i for i, pair in enumerate(pairs)}

    def constants_of(condition_id) -> np.ndarray:
        return np.array(
            [
                index(value, f"the value of {name} in condition {condition_id}")
                for name, value in _constant_values(problem, network, condition_id).items()
            ],
            dtype=np.int32,
        )

    def initial_of(condition_id) -> np.ndarray:
        out = np.full(len(network.states), NO_OVERRIDE, dtype=np.int32)
        for name, value in _initial_values(problem, network, condition_id).items():
            out[network.states.index(name)] = index(
                value, f"the initial value of {name} in condition {condition_id}"
            )
        return out

    batches = []
    for with_preequilibration in (False, True):
        chosen = [p for p in pairs if bool(p[0]) == with_preequilibration]
        if not chosen:
            continue
        batch = Experiments(
            ids=tuple(s for _, s in chosen),
            constant_values=np.stack([constants_of(s) for _, s in chosen]),
            initial_values=np.stack([initial_of(s) for _, s in chosen]),
        )
        if with_preequilibration:
            batch = dataclasses.replace(
                batch,
                preequilibration_ids=tuple(p for p, _ in chosen),
                preequilibration_constants=np.stack([constants_of(p) for p, _ in chosen]),
                preequilibration_initial=np.stack([initial_of(p) for p, _ in chosen]),
            )
        batches.append(batch)

    all_times = measurements[petab.C.TIME].to_numpy(float)
    times = np.unique(np.concatenate([[0.0], all_times[np.isfinite(all_times)]]))
    groups = []
    for observable_id in pd.unique(measurements[petab.C.OBSERVABLE_ID]):
        if observable_id not in observables:
            raise ValueError(f"PEtab: observable {observable_id!r} is not in the table.")
        observable = observables[observable_id]
        chosen = measurements[measurements[petab.C.OBSERVABLE_ID] == observable_id]
        values = {}
        for kind, count in (
            (petab.C.OBSERVABLE_PARAMETERS, len(observable.observable_placeholders)),
            (petab.C.NOISE_PARAMETERS, len(observable.noise_placeholders)),
        ):
            table = []
            for row_position, row in chosen.iterrows():
                where = f"{kind} of measurement {row_position}"
                overrides = petab.measurements.split_parameter_replacement_list(
                    row.get(kind, np.nan)
                )
                if len(overrides) != count:
                    raise ValueError(
                        f"PEtab: {where} gives {len(overrides)} values for the "
                        f"{count} placeholders of {observable_id}."
                    )
                table.append([index(value, where) for value in overrides])
            values[kind] = np.array(table, dtype=np.int32).reshape(len(chosen), count)
        chosen_times = chosen[petab.C.TIME].to_numpy(float)
        groups.append(
            Group(
                observable=observable,
                rows=chosen.index.to_numpy(),
                experiment=np.array(
                    [
                        position[pair]
                        for pair in zip(
                            preequilibration[chosen.index], simulation[chosen.index], strict=True
                        )
                    ],
                    dtype=np.int32,
                ),
                time_index=np.where(
                    np.isinf(chosen_times), len(times), np.searchsorted(times, chosen_times)
                ),
                observable_values=values[petab.C.OBSERVABLE_PARAMETERS],
                noise_values=np.concatenate(
                    [values[petab.C.OBSERVABLE_PARAMETERS], values[petab.C.NOISE_PARAMETERS]],
                    axis=1,
                ),
                measured=chosen[petab.C.MEASUREMENT].to_numpy(float),
            )
        )

    return Tables(
        table_ids=table_ids,
        free=free,
        scales=scales,
        nominal_linear=parameters[petab.C.NOMINAL_VALUE].to_numpy(float),
        nominal_scaled=np.asarray(problem.x_nominal_free_scaled, dtype=float),
        literals=np.array(sorted(literals, key=literals.get), dtype=float),
        times=times,
        steady_state_measured=bool(np.isinf(all_times).any()),
        batches=tuple(batches),
        groups=tuple(groups),
        measurement_df=problem.measurement_df,
    )


def _model_ids(problem: petab.Problem) -> dict[str, str]:
    """The mapping table: each PEtab entity id's model entity id."""
    table = problem.mapping_df
    if table is None or not len(table):
        return {}
    return {str(k): str(v) for k, v in table[petab.C.MODEL_ENTITY_ID].items()}


def _mapped(problem: petab.Problem) -> petab.Problem:
    """`problem` with its formulas and condition columns naming model entities by their
    model ids where the mapping table gives PEtab ids for them. Parameter table ids stay:
    `_constant_values` looks a model constant up there by its PEtab id."""
    model_ids = _model_ids(problem)
    if not model_ids:
        return problem
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, model_ids)) + r")\b")

    def resolved(formula):
        if not isinstance(formula, str):
            return formula
        return pattern.sub(lambda match: model_ids[match.group(0)], formula)

    problem = copy.copy(problem)
    observables = problem.observable_df.copy()
    for column in (petab.C.OBSERVABLE_FORMULA, petab.C.NOISE_FORMULA):
        if column in observables:
            observables[column] = observables[column].map(resolved)
    problem.observable_df = observables
    if problem.condition_df is not None:
        problem.condition_df = problem.condition_df.rename(columns=model_ids)
    return problem


def _condition_row(problem: petab.Problem, condition_id):
    if problem.condition_df is None:
        return None
    if condition_id not in problem.condition_df.index:
        raise ValueError(f"PEtab: condition {condition_id!r} is not in the condition table.")
    return problem.condition_df.loc[condition_id]


def _constant_values(problem: petab.Problem, network: Network, condition_id) -> dict:
    """Each model constant's value in a condition: the condition table's entry, else the
    parameter table's parameter of that name, else the SBML value."""
    row = _condition_row(problem, condition_id)
    petab_ids = {model_id: petab_id for petab_id, model_id in _model_ids(problem).items()}
    values = {}
    for name, sbml_value in network.constants.items():
        value = row.get(name, np.nan) if row is not None else np.nan
        # The parameter table may name it by its PEtab id or by its model id.
        table_id = next(
            (i for i in (petab_ids.get(name), name) if i in problem.parameter_df.index), None
        )
        if _is_set(value):
            values[name] = value
        elif table_id is not None:
            values[name] = table_id
        else:
            values[name] = sbml_value
    return values


def _initial_values(problem: petab.Problem, network: Network, condition_id) -> dict:
    """The initial values that a condition sets (species columns of the condition table;
    an empty entry keeps the model's value)."""
    row = _condition_row(problem, condition_id)
    if row is None:
        return {}
    return {name: row[name] for name in network.states if name in row.index and _is_set(row[name])}


def _refuse_unsupported(problem: petab.Problem, network: Network) -> None:
    measurements = problem.measurement_df
    times = measurements[petab.C.TIME].to_numpy(float)
    if (times < 0).any():
        raise ValueError("PEtab: measurement times must not be negative.")
    if problem.condition_df is not None:
        sbml = problem.model.sbml_model
        for column in problem.condition_df.columns:
            if column == petab.C.CONDITION_NAME:
                continue
            if column in network.states:
                continue
            if sbml.getSpecies(column) is not None:
                raise NotImplementedError(
                    f"PEtab: the condition table sets species {column}, which the model "
                    "assigns by a rule."
                )
            if column in network.derived:
                raise NotImplementedError(
                    f"PEtab: the condition table sets {column}, which the model assigns."
                )
            if column not in network.constants:
                raise ValueError(
                    f"PEtab: the condition table sets {column!r}, unknown to the model."
                )


def _is_set(value) -> bool:
    if isinstance(value, str):
        return bool(value.strip()) and value.strip().lower() != "nan"
    return not petab.is_empty(value)
