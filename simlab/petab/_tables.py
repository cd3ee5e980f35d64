"""The PEtab tables as index arrays: which value each model constant and each measurement's
placeholder takes, in each simulation condition.

Every such value is an entry of one vector: the linear values of the parameter table's
parameters (estimated ones from the optimisation vector, fixed ones at their nominal
values), followed by the literal numbers the tables use. Tables then become integer
arrays that index it, and a likelihood is a few gathers.
"""

import dataclasses
import math

import numpy as np
import pandas as pd
import petab.v1 as petab

from ._observables import CompiledObservable
from ._sbml import Network


@dataclasses.dataclass(frozen=True, eq=False)
class Group:
    """The measurements of one observable in one condition."""

    observable: CompiledObservable
    rows: np.ndarray  # their positions in the measurement table
    time_index: np.ndarray  # into the condition's save times
    observable_values: np.ndarray  # (rows, placeholders): indices into the value vector
    noise_values: np.ndarray
    measured: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class Condition:
    id: str
    times: np.ndarray  # the save times: 0, then the measurement times
    constant_values: np.ndarray  # per model constant: index into the value vector
    groups: tuple[Group, ...]


@dataclasses.dataclass(frozen=True, eq=False)
class Tables:
    """The PEtab problem as arrays (compared by identity: a static field of a problem)."""

    table_ids: tuple[str, ...]  # every parameter of the parameter table
    free: np.ndarray  # positions of the estimated ones in `table_ids`
    scales: tuple[str, ...]  # the scale of each estimated parameter
    nominal_linear: np.ndarray  # every parameter's nominal value, linear
    nominal_scaled: np.ndarray  # the estimated parameters' nominal values, on their scales
    literals: np.ndarray
    conditions: tuple[Condition, ...]
    measurement_df: pd.DataFrame


def read_tables(problem: petab.Problem, network: Network) -> Tables:
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
            raise ValueError(f"PEtab: {where} names {value!r}, which the parameter table lacks.")
        value = float(value)
        if math.isnan(value):
            raise ValueError(f"PEtab: {where} is empty.")
        return len(table_ids) + literals.setdefault(value, len(literals))

    observables = {
        observable_id: CompiledObservable(row, network, table_ids)
        for observable_id, row in problem.observable_df.iterrows()
    }
    measurements = problem.measurement_df.reset_index(drop=True)
    conditions = []
    for condition_id in pd.unique(measurements[petab.C.SIMULATION_CONDITION_ID]):
        constant_values = np.array(
            [
                index(value, f"the value of {name} in condition {condition_id}")
                for name, value in _constant_values(problem, network, condition_id).items()
            ],
            dtype=np.int32,
        )
        rows = measurements[measurements[petab.C.SIMULATION_CONDITION_ID] == condition_id]
        times = np.unique(np.concatenate([[0.0], rows[petab.C.TIME].to_numpy(float)]))
        groups = []
        for observable_id in pd.unique(rows[petab.C.OBSERVABLE_ID]):
            if observable_id not in observables:
                raise ValueError(f"PEtab: observable {observable_id!r} is not in the table.")
            observable = observables[observable_id]
            chosen = rows[rows[petab.C.OBSERVABLE_ID] == observable_id]
            values = {}
            for kind, names in (
                (petab.C.OBSERVABLE_PARAMETERS, observable.observable_placeholders),
                (petab.C.NOISE_PARAMETERS, observable.noise_placeholders),
            ):
                table = []
                for position, row in chosen.iterrows():
                    where = f"{kind} of measurement {position}"
                    overrides = petab.measurements.split_parameter_replacement_list(
                        row.get(kind, np.nan)
                    )
                    if len(overrides) != len(names):
                        raise ValueError(
                            f"PEtab: {where} gives {len(overrides)} values for the "
                            f"{len(names)} placeholders of {observable_id}."
                        )
                    table.append([index(value, where) for value in overrides])
                values[kind] = np.array(table, dtype=np.int32).reshape(len(chosen), len(names))
            groups.append(
                Group(
                    observable=observable,
                    rows=chosen.index.to_numpy(),
                    time_index=np.searchsorted(times, chosen[petab.C.TIME].to_numpy(float)),
                    observable_values=values[petab.C.OBSERVABLE_PARAMETERS],
                    noise_values=values[petab.C.NOISE_PARAMETERS],
                    measured=chosen[petab.C.MEASUREMENT].to_numpy(float),
                )
            )
        conditions.append(Condition(str(condition_id), times, constant_values, tuple(groups)))

    return Tables(
        table_ids=table_ids,
        free=free,
        scales=scales,
        nominal_linear=parameters[petab.C.NOMINAL_VALUE].to_numpy(float),
        nominal_scaled=np.asarray(problem.x_nominal_free_scaled, dtype=float),
        literals=np.array(sorted(literals, key=literals.get), dtype=float),
        conditions=tuple(conditions),
        measurement_df=problem.measurement_df,
    )


def _constant_values(problem: petab.Problem, network: Network, condition_id) -> dict:
    """Each model constant's value in a condition: the condition table's entry, else the
    parameter table's parameter of that name, else the SBML value."""
    row = problem.condition_df.loc[condition_id] if problem.condition_df is not None else None
    values = {}
    for name, sbml_value in network.constants.items():
        value = row.get(name, np.nan) if row is not None else np.nan
        if isinstance(value, str) or not math.isnan(float(value)):
            values[name] = value
        elif name in problem.parameter_df.index:
            values[name] = name
        else:
            values[name] = sbml_value
    return values


def _refuse_unsupported(problem: petab.Problem, network: Network) -> None:
    measurements = problem.measurement_df
    column = petab.C.PREEQUILIBRATION_CONDITION_ID
    if column in measurements and measurements[column].map(_is_set).any():
        raise NotImplementedError("PEtab: preequilibration (preequilibrationConditionId).")
    times = measurements[petab.C.TIME].to_numpy(float)
    if np.isinf(times).any():
        raise NotImplementedError("PEtab: steady-state measurements (time = inf).")
    if (times < 0).any():
        raise ValueError("PEtab: measurement times must not be negative.")
    if problem.mapping_df is not None and len(problem.mapping_df):
        raise NotImplementedError("PEtab: the mapping table.")
    if problem.condition_df is not None:
        sbml = problem.model.sbml_model
        for column in problem.condition_df.columns:
            if column == petab.C.CONDITION_NAME:
                continue
            if sbml.getSpecies(column) is not None:
                raise NotImplementedError(
                    f"PEtab: initial values set in the condition table (species {column})."
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
    return not petab.is_empty(value)
