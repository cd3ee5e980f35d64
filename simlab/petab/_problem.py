"""A PEtab problem as an Equinox module: its log-likelihood, simulation table and models."""

import functools
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import petab.v1 as petab
from jaxtyping import Array, ArrayLike, Float

from .._simulate import simulate as simulate_model
from ._model import CompiledNetwork, SBMLModel, sbml_model
from ._noise import negative_log_likelihood, unscale
from ._sbml import read_network
from ._tables import Condition, Tables, read_tables


class PetabProblem(eqx.Module):
    """A PEtab parameter estimation problem (read by [`simlab.petab.load`][]).

    - `parameter_ids`: the estimated parameters, in the order of the vector `x` that the
      methods take;
    - `nominal`: their nominal values on their PEtab scales (`scales`: lin, log or log10);
    - `condition_ids`: the simulation conditions that have measurements;
    - `petab_problem`: the `petab.v1.Problem` it was read from.

    `x` is always on the parameter scales; `None` stands for `nominal`. Each condition is
    solved from time 0 with Rodas5P at tolerances `rtol` and `atol`.
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
        return tuple(condition.id for condition in self._tables.conditions)

    def log_likelihood(self, x: Float[ArrayLike, " p"] | None = None) -> Float[Array, ""]:
        """The PEtab log-likelihood of all measurements at `x` (larger is better; priors of
        the parameter table are not part of it). Traceable: `jax.jit`, `jax.grad` and
        `jax.jvp` go through the solves.

        Its derivative is computed in forward mode (the sensitivities of the estimated
        parameters carried through each solve), which `jax.grad` contracts: with the few
        parameters of a PEtab problem this compiles and runs faster than reverse mode
        through the solver's steps."""
        x = self._x(x)
        return _log_likelihood(self, x)

    def simulate(self, x: Float[ArrayLike, " p"] | None = None) -> pd.DataFrame:
        """The PEtab simulation table at `x`: the measurement table with the simulated
        value of each measurement in the column `simulation` instead of `measurement`."""
        simulated = np.asarray(jax.jit(self._simulated_values)(x if x is None else jnp.asarray(x)))
        table = self._tables.measurement_df.copy()
        table = table.rename(columns={petab.C.MEASUREMENT: petab.C.SIMULATION})
        table[petab.C.SIMULATION] = simulated
        return table

    def model(self, condition_id: str, x: Float[ArrayLike, " p"] | None = None) -> SBMLModel:
        """The simlab model of one simulation condition at `x`; its `initial_state()` is
        the state at time 0, so `simlab.simulate(model, model.initial_state(), ts)` solves
        the condition."""
        for condition in self._tables.conditions:
            if condition.id == condition_id:
                return sbml_model(self._compiled, self._values(x)[condition.constant_values])
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

    def _solve(self, condition: Condition, values, adjoint=None) -> Float[Array, "times states"]:
        model = sbml_model(self._compiled, values[condition.constant_values])
        trajectory = simulate_model(
            model,
            model.initial_state(),
            jnp.asarray(condition.times, values.dtype),
            solver="rodas5p",
            rtol=self.rtol,
            atol=self.atol,
            max_steps=self.max_steps,
            adjoint=adjoint,
        )
        return trajectory.ys

    def _observe(self, condition: Condition, values, ys) -> list[Float[Array, " rows"]]:
        constants = values[condition.constant_values]
        theta = values[: len(self._tables.table_ids)]
        simulated = []
        for group in condition.groups:
            ts = jnp.asarray(condition.times, values.dtype)[group.time_index]
            function = jax.vmap(group.observable.value, in_axes=(0, 0, None, None, 0))
            value = function(
                ts, ys[group.time_index], constants, theta, values[group.observable_values]
            )
            simulated.append(jnp.broadcast_to(value, ts.shape))
        return simulated

    def _sigma(self, condition: Condition, group, values, ys, simulated):
        constants = values[condition.constant_values]
        theta = values[: len(self._tables.table_ids)]
        ts = jnp.asarray(condition.times, values.dtype)[group.time_index]
        function = jax.vmap(group.observable.sigma, in_axes=(0, 0, None, None, 0))
        sigma = function(ts, ys[group.time_index], constants, theta, values[group.noise_values])
        return jnp.broadcast_to(sigma, simulated.shape)

    def _log_likelihood(self, x, adjoint=None) -> Float[Array, ""]:
        values = self._values(x)
        total = jnp.zeros((), values.dtype)
        for condition in self._tables.conditions:
            ys = self._solve(condition, values, adjoint)
            for group, simulated in zip(
                condition.groups, self._observe(condition, values, ys), strict=True
            ):
                sigma = self._sigma(condition, group, values, ys, simulated)
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
        return total

    def _simulated_values(self, x) -> Float[Array, " measurements"]:
        values = self._values(x)
        out = jnp.zeros(len(self._tables.measurement_df), values.dtype)
        for condition in self._tables.conditions:
            ys = self._solve(condition, values)
            for group, simulated in zip(
                condition.groups, self._observe(condition, values, ys), strict=True
            ):
                out = out.at[group.rows].set(simulated)
        return out


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _log_likelihood(problem: PetabProblem, x):
    return problem._log_likelihood(x)


@_log_likelihood.defjvp
def _log_likelihood_jvp(problem: PetabProblem, primals, tangents):
    (x,), (dx,) = primals, tangents

    def value_twice(x):
        value = problem._log_likelihood(x, adjoint="forward")
        return value, value

    gradient, value = jax.jacfwd(value_twice, has_aux=True)(x)
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
    `NotImplementedError` naming the feature for what is not supported (SBML events, rate
    and algebraic rules, preequilibration, steady-state measurements, initial values in the
    condition table, ...).
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
