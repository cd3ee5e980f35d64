"""A PEtab problem as an Equinox module: its log-likelihood, simulation table and models."""

import copy
import dataclasses
import functools
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import petab.v1 as petab
from jaxtyping import Array, ArrayLike, Float

from .._results import RESULTS
from .._simulate import simulate as simulate_model
from ._derivative import value_and_gradient
from ._events import solve as solve_with_events
from ._fit import fit_petab
from ._model import CompiledNetwork, SBMLModel, sbml_model
from ._noise import negative_log_likelihood, unscale
from ._sbml import read_network
from ._tables import NO_OVERRIDE, Experiments, Tables, read_tables

STEADY_STATE_TIME = 1e8
"""How long a preequilibration (or a steady-state measurement) is solved for."""
STEADY_STATE_TOLERANCE = 1e3
"""A state counts as steady when each rate is below this many times `atol + rtol |y|`."""


class PetabProblem(eqx.Module):
    """A PEtab parameter estimation problem (read by [`simlab.petab.load`][]).

    - `parameter_ids`: the estimated parameters, in the order of the vector `x` that the
      methods take;
    - `nominal`: their nominal values on their PEtab scales (`scales`: lin, log or log10);
    - `condition_ids`: the simulation conditions that have measurements;
    - `petab_problem`: the `petab.v1.Problem` it was read from.

    `x` is always on the parameter scales; `None` stands for `nominal`. Each experiment (a
    simulation condition, after its preequilibration condition where the measurement table
    names one) is solved from time 0 with Rodas5P at tolerances `rtol` and `atol`; all
    experiments are solved together under `jax.vmap`, at the union of their measurement
    times. A preequilibration, or a measurement at `time = inf`, takes the state after a
    solve to `t = 1e8` as the steady state (checked: every rate below
    `1e3 (atol + rtol |y|)`, or the log-likelihood is `NaN`).
    """

    parameter_ids: tuple[str, ...] = eqx.field(static=True)
    scales: tuple[str, ...] = eqx.field(static=True)
    petab_problem: petab.Problem = eqx.field(static=True)
    rtol: float = eqx.field(static=True)
    atol: float = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    _compiled: CompiledNetwork = eqx.field(static=True)
    _tables: Tables = eqx.field(static=True)

    # Every field is static (the tables are NumPy arrays in an object compared by identity),
    # so that a problem and its bound methods hash: `jax.jit(problem.log_likelihood)` works.

    @property
    def nominal(self) -> Float[Array, " p"]:
        """The nominal values of the estimated parameters, on their scales."""
        return jnp.asarray(self._tables.nominal_scaled)

    @property
    def condition_ids(self) -> tuple[str, ...]:
        """The simulation conditions that have measurements, in the table's order."""
        return self._tables.condition_ids

    def log_likelihood(self, x: Float[ArrayLike, " p"] | None = None) -> Float[Array, ""]:
        """The PEtab log-likelihood of all measurements at `x` (larger is better; priors of
        the parameter table are not part of it); `NaN` when a solve fails. Traceable:
        `jax.jit`, `jax.grad` and `jax.jvp` go through the solves.

        Its derivative is computed in forward mode (the sensitivities of the estimated
        parameters carried through each solve), which `jax.grad` contracts: with the few
        parameters of a PEtab problem this compiles and runs faster than reverse mode
        through the solver's steps."""
        x = self._x(x)
        return _log_likelihood(self, x)

    def simulate(
        self, x: Float[ArrayLike, " p"] | None = None, times: ArrayLike | None = None
    ) -> pd.DataFrame:
        """The PEtab simulation table at `x`: the measurement table with the simulated
        value of each measurement in the column `simulation` instead of `measurement`.

        With `times`, the table has a row at each of these times for every distinct
        measured series (an observable in an experiment, with its placeholder overrides),
        in the order the measurement table first names them: the fitted curves to draw
        through the data.

        !!! example

            ```python
            curves = problem.simulate(x, times=np.linspace(0.0, 240.0, 121))
            ```
        """
        problem = self if times is None else self.at_times(times)
        x = x if x is None else jnp.asarray(x)
        simulated = np.asarray(jax.jit(problem._simulated_values)(x))
        table = problem._tables.measurement_df.copy()
        table = table.rename(columns={petab.C.MEASUREMENT: petab.C.SIMULATION})
        table[petab.C.SIMULATION] = simulated
        return table

    def fit(
        self,
        *,
        starts: int | Float[ArrayLike, "starts p"] | None = None,
        key: jax.Array | None = None,
        x0: Float[ArrayLike, " p"] | None = None,
        optimiser=None,
        max_steps: int | None = None,
        rtol: float = 1e-8,
        atol: float = 1e-8,
        progress: bool | None = None,
        throw: bool = True,
        covariance: bool = True,
    ):
        """Maximum-likelihood estimates of the estimated parameters, on their scales and
        within the parameter table's bounds, by [`simlab.fit`][]'s machinery: a
        [`simlab.FitResult`][] whose `params` are keyed by parameter id, with standard
        errors from the Hessian of $-\\log L$, `profile(parameter_id)` and
        `predict(ts, data_set=i)` (the series measured in the `i`-th of `condition_ids`,
        at `ts`).

        **Arguments:**

        - `starts`, `key`: run this many fits from points drawn by Latin hypercube sampling,
          uniform on each parameter's scale within its bounds (log-uniform in its linear
          value where a lin-scale lower bound is positive), as batched, compiled loops;
          `result.starts` keeps every start. A drawn point at which the model cannot be
          simulated is drawn again (`result.starts.draws`): on Fujita's box, eight decades
          either side of 1, 34 of 100 first draws (key 0) fail. Without `starts`, one fit
          from `x0`. Or `starts` is an array of start points, shape `(starts, p)`, each row
          on the parameter scales in the order of `parameter_ids` and within the bounds
          (another tool's starts, say), kept as given; `key` is then not needed.
        - `x0`: the start of a single fit, on the parameter scales (default: `nominal`),
          within the bounds.
        - `optimiser`: an `optimistix.AbstractMinimiser` (default BFGS at `rtol`, `atol`).
        - `max_steps`: the most optimiser steps of each start (default 2000).
        - `progress`, `throw`, `covariance`: as for [`simlab.fit`][].

        The optimiser works on each parameter mapped onto its closed range by a sine
        ($x = a + (b - a)(1 + \\sin v)/2$ on $[a, b]$, as MINUIT bounds its parameters), so every
        iterate is within the bounds, an estimate on a bound is reached at a finite $v$,
        and a start is never stranded where the map is flat (as in a sigmoid's tails).
        A trial point whose solve fails costs a large finite loss and is rejected.

        !!! example

            ```python
            result = problem.fit(starts=20, key=jax.random.key(0))
            result.log_likelihood, result.params["k_phos"], result.profile("k_phos")
            ```
        """
        return fit_petab(
            self,
            starts=starts,
            key=key,
            x0=x0,
            optimiser=optimiser,
            max_steps=max_steps,
            rtol=rtol,
            atol=atol,
            progress=progress,
            throw=throw,
            covariance=covariance,
        )

    def at_times(self, times: ArrayLike) -> "PetabProblem":
        """The problem whose measurement table holds every distinct measured series of
        this one (its first row's condition, observable and overrides) at each of `times`,
        with no measured values (NaN)."""
        times = np.asarray(times, dtype=float)
        if times.ndim != 1 or times.size == 0 or not np.all(np.isfinite(times)):
            raise ValueError(
                f"PEtab: times must be a non-empty 1-D array of finite times; got {times}."
            )
        if np.any(times < 0):
            raise ValueError("PEtab: experiments start at time 0; times must not be negative.")
        problem = copy.copy(self.petab_problem)
        problem.measurement_df = _series_at(problem.measurement_df, times)
        return dataclasses.replace(self, _tables=read_tables(problem, self._compiled.network))

    def model(self, condition_id: str, x: Float[ArrayLike, " p"] | None = None) -> SBMLModel:
        """The simlab model of one simulation condition at `x`. Its `initial_state()` is
        the SBML state at time 0; [`initial_state`][simlab.petab.PetabProblem.initial_state]
        adds the condition table's initial values and the preequilibration, so
        `simlab.simulate(model, problem.initial_state(condition_id), ts)` solves the
        condition (without the SBML model's events)."""
        batch, row = self._find(condition_id)
        return sbml_model(self._compiled, self._values(x)[batch.constant_values[row]])

    def initial_state(
        self, condition_id: str, x: Float[ArrayLike, " p"] | None = None
    ) -> Float[Array, " states"]:
        """The state at time 0 of a simulation condition at `x`: the SBML initial values
        with the condition table's species values over them, or the steady state of its
        preequilibration condition with those values over it."""
        batch, row = self._find(condition_id)
        values = self._values(x)
        return self._initial_states(batch, values)[row]

    def _find(self, condition_id: str) -> tuple[Experiments, int]:
        for batch in self._tables.batches:
            if condition_id in batch.ids:
                return batch, batch.ids.index(condition_id)
        raise ValueError(
            f"PEtab: no simulation condition {condition_id!r} with measurements; the "
            f"conditions are {list(self.condition_ids)}."
        )

    def _x(self, x) -> Float[Array, " p"]:
        x = self.nominal if x is None else jnp.asarray(x, self.nominal.dtype)
        if x.shape != self.nominal.shape:
            raise ValueError(
                f"PEtab: x has shape {x.shape}; the problem has {len(self.parameter_ids)} "
                f"estimated parameters {list(self.parameter_ids)}."
            )
        return x

    def _values(self, x) -> Float[Array, " v"]:
        """The value vector that the tables index: every table parameter, then literals."""
        x = self._x(x)
        theta = jnp.asarray(self._tables.nominal_linear, x.dtype)
        theta = theta.at[self._tables.free].set(unscale(x, self.scales))
        return jnp.concatenate([theta, jnp.asarray(self._tables.literals, x.dtype)])

    def _solve(self, constants, y0, ts, adjoint=None):
        """One experiment from `y0` at the save times `ts`: the states, and whether the
        solve succeeded."""
        trajectory = self._trajectory(constants, y0, ts, adjoint=adjoint)
        return trajectory.ys, trajectory.result == RESULTS.successful

    def _trajectory(self, constants, y0, ts, event=None, args=None, *, adjoint=None):
        """The solve from `y0` at `ts[0]` with these constants, saved at `ts` (stopped by
        `event`, whose condition gets `args`)."""
        return simulate_model(
            sbml_model(self._compiled, constants),
            y0,
            ts,
            solver="rodas5p",
            rtol=self.rtol,
            atol=self.atol,
            max_steps=self.max_steps,
            adjoint=adjoint,
            throw=False,
            event=event,
            args=args,
        )

    def _solve_with_events(self, constants, y0, ts, adjoint=None):
        """`_solve` through the model's events: also the constants at each save time."""
        trajectory = functools.partial(self._trajectory, adjoint=adjoint)
        return solve_with_events(self._compiled.events, trajectory, constants, y0, ts)

    def _steady_state(self, constants, y0, adjoint=None):
        """The steady state reached from `y0`: the state after a solve to
        `STEADY_STATE_TIME`, and whether the solve succeeded and its rate there is below
        the tolerances."""
        ts = jnp.array([0.0, STEADY_STATE_TIME], y0.dtype)
        ys, ok = self._solve(constants, y0, ts, adjoint)
        state = ys[-1]
        rate = self._compiled.rate(ts[-1], state, constants)
        scale = self.atol + self.rtol * jnp.abs(state)
        settled = jnp.all(jnp.abs(rate) <= STEADY_STATE_TOLERANCE * scale)
        return state, ok & settled

    def _initial_states(self, batch: Experiments, values, adjoint=None):
        """The initial states of a batch of experiments `(experiments, states)`."""
        return self._initial_states_and_status(batch, values, adjoint)[0]

    def _initial_states_and_status(self, batch: Experiments, values, adjoint=None):
        if batch.preequilibration_ids is None:
            constants = values[batch.constant_values]
            start = jax.vmap(self._compiled.initial)(constants)
            return _override(start, batch.initial_values, values), jnp.ones(len(batch.ids), bool)
        constants = values[batch.preequilibration_constants]
        start = jax.vmap(self._compiled.initial)(constants)
        start = _override(start, batch.preequilibration_initial, values)
        steady, ok = jax.vmap(functools.partial(self._steady_state, adjoint=adjoint))(
            constants, start
        )
        return _override(steady, batch.initial_values, values), ok

    def _states(self, values, adjoint=None):
        """Every experiment's states at the save times (and at steady state, last, where
        measurements ask for it): `(experiments, times, states)`, every experiment's
        constants (with events: at each save time, `(experiments, times, constants)`), and
        whether every solve succeeded."""
        tables = self._tables
        ts = jnp.asarray(tables.times, values.dtype)
        if self._compiled.events is not None:  # `load` refuses steady states with events
            (batch,) = tables.batches
            y0 = self._initial_states(batch, values, adjoint)
            solve = functools.partial(self._solve_with_events, adjoint=adjoint)
            ys, constants, ok = jax.vmap(solve, in_axes=(0, 0, None))(
                values[batch.constant_values], y0, ts
            )
            return ys, constants, jnp.all(ok)
        solve = jax.vmap(functools.partial(self._solve, adjoint=adjoint), in_axes=(0, 0, None))
        steady = jax.vmap(functools.partial(self._steady_state, adjoint=adjoint))
        states, constants, ok = [], [], jnp.ones((), bool)
        for batch in tables.batches:
            batch_constants = values[batch.constant_values]
            y0, started = self._initial_states_and_status(batch, values, adjoint)
            if len(tables.times) > 1:
                ys, solved = solve(batch_constants, y0, ts)
            else:  # only time 0 (and steady state) is measured
                ys, solved = y0[:, None], jnp.ones((), bool)
            ok = ok & jnp.all(started) & jnp.all(solved)
            if tables.steady_state_measured:
                final, settled = steady(batch_constants, y0)
                ys = jnp.concatenate([ys, final[:, None]], axis=1)
                ok = ok & jnp.all(settled)
            states.append(ys)
            constants.append(batch_constants)
        return jnp.concatenate(states), jnp.concatenate(constants), ok

    def _observe(self, values, ys, constants):
        """Each group's simulated values and noise parameters."""
        tables = self._tables
        theta = values[: len(tables.table_ids)]
        ts = jnp.concatenate(
            [jnp.asarray(tables.times, values.dtype), jnp.full((1,), jnp.inf, values.dtype)]
        )
        out = []
        for group in tables.groups:
            t = ts[group.time_index]
            y = ys[group.experiment, group.time_index]
            c = constants[group.experiment]
            if c.ndim == 3:  # events: the constants at each save time
                c = c[jnp.arange(len(t)), group.time_index]
            observable = group.observable
            value = jax.vmap(observable.value, in_axes=(0, 0, 0, None, 0))(
                t, y, c, theta, values[group.observable_values]
            )
            sigma = jax.vmap(observable.sigma, in_axes=(0, 0, 0, None, 0))(
                t, y, c, theta, values[group.noise_values]
            )
            out.append((jnp.broadcast_to(value, t.shape), jnp.broadcast_to(sigma, t.shape)))
        return out

    def _log_likelihood(self, x, adjoint=None) -> Float[Array, ""]:
        values = self._values(x)
        ys, constants, ok = self._states(values, adjoint)
        total = jnp.zeros((), values.dtype)
        for group, (simulated, sigma) in zip(
            self._tables.groups, self._observe(values, ys, constants), strict=True
        ):
            observable = group.observable
            total = total - jnp.sum(
                negative_log_likelihood(
                    simulated,
                    jnp.asarray(group.measured),
                    sigma,
                    observable.transformation,
                    observable.distribution,
                )
            )
        return jnp.where(ok, total, jnp.nan)

    def _simulated_values(self, x, adjoint=None) -> Float[Array, " measurements"]:
        values = self._values(x)
        ys, constants, ok = self._states(values, adjoint)
        out = jnp.zeros(len(self._tables.measurement_df), values.dtype)
        for group, (simulated, _) in zip(
            self._tables.groups, self._observe(values, ys, constants), strict=True
        ):
            out = out.at[group.rows].set(simulated)
        return jnp.where(ok, out, jnp.nan)


def _series_at(measurements: pd.DataFrame, times: np.ndarray) -> pd.DataFrame:
    """A measurement table with each distinct series of `measurements` at each of `times`."""
    keys = [
        column
        for column in (
            petab.C.OBSERVABLE_ID,
            petab.C.PREEQUILIBRATION_CONDITION_ID,
            petab.C.SIMULATION_CONDITION_ID,
            petab.C.OBSERVABLE_PARAMETERS,
            petab.C.NOISE_PARAMETERS,
        )
        if column in measurements
    ]
    series = measurements.drop_duplicates(subset=keys)[keys]
    table = series.loc[series.index.repeat(len(times))].reset_index(drop=True)
    table[petab.C.TIME] = np.tile(times, len(series))
    table[petab.C.MEASUREMENT] = np.nan
    return table


def _override(states, indices, values):
    """`states` with the entries whose index is not `NO_OVERRIDE` taken from `values`."""
    indices = jnp.asarray(indices)
    return jnp.where(indices != NO_OVERRIDE, values[jnp.maximum(indices, 0)], states)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _log_likelihood(problem: PetabProblem, x):
    return problem._log_likelihood(x)


@_log_likelihood.defjvp
def _log_likelihood_jvp(problem: PetabProblem, primals, tangents):
    (x,), (dx,) = primals, tangents
    value, gradient = value_and_gradient(problem, x)
    return value, jnp.dot(gradient, dx)


def load(
    path: str | os.PathLike,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    max_steps: int = 100_000,
) -> PetabProblem:
    """Reads a PEtab (version 1) problem from its YAML file, with the `petab` library, and
    its SBML model with libsbml.

    Needs float64 (`jax.config.update("jax_enable_x64", True)`): likelihoods of stiff
    reaction networks are compared at tolerances float32 cannot reach. Raises
    `NotImplementedError` naming the feature for what is not supported (SBML events with a
    delay or a priority, algebraic rules, compartments of varying size, ...).
    """
    if not jax.config.jax_enable_x64:
        raise RuntimeError(
            "simlab.petab solves in float64: call jax.config.update('jax_enable_x64', True) "
            "before loading a problem."
        )
    problem = petab.Problem.from_yaml(os.fspath(path))
    if not isinstance(problem.model, petab.models.sbml_model.SbmlModel):
        raise NotImplementedError(f"PEtab: models of type {type(problem.model).__name__}.")
    network = read_network(problem.model.sbml_document)
    tables = read_tables(problem, network)
    preequilibrated = any(b.preequilibration_ids is not None for b in tables.batches)
    if network.events and (tables.steady_state_measured or preequilibrated):
        raise NotImplementedError(
            "PEtab: SBML events with preequilibration or steady-state measurements."
        )
    return PetabProblem(
        parameter_ids=tuple(problem.x_free_ids),
        scales=tables.scales,
        petab_problem=problem,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
        _compiled=CompiledNetwork(network),
        _tables=tables,
    )
