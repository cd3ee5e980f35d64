"""Fitting a PEtab problem with `simlab.fit`'s machinery: the estimated parameters, on their
PEtab scales and within the parameter table's bounds, are the fields of a module that the
fit's optimiser, multi-start, covariance and profiles treat as any model's parameters."""

import functools
import keyword
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import petab.v1 as petab
from jaxtyping import Array, ArrayLike

from .._fit._fit import FitResult, _checked_settings, fit_problem
from .._fit._problem import FAILED_LOSS, FitProblem, Layout, observe_identity
from .._fit._transforms import Transform
from .._misc import Integer
from .._options import as_solve_options
from ._derivative import value_and_gradient

MAX_STEPS = 2000
"""The default `max_steps` of `PetabProblem.fit`: BFGS steps per start. Starts from far
inside a wide box (Boehm's log10 bounds span ten decades) first cross regions where the
log-likelihood is below $-10^9$ and take several hundred steps to converge: of Boehm's
12 starts with key 0, two reach the optimum only after 584 and 879 steps."""


class PetabFitProblem(FitProblem):
    """A fit problem whose objective is a PEtab problem's negative log-likelihood.

    `model` holds the estimated parameters, on their scales, as scalar fields named by
    their PEtab ids; `bounds` are the parameter table's, on the same scales. Data set `i`
    of [`FitResult.predict`][simlab.FitResult.predict] is the problem's `i`-th simulation
    condition, and its quantities are the series measured there.
    """

    petab_problem: Any = None  # a `PetabProblem`; every field of it is static

    @property
    def is_least_squares(self) -> bool:
        return False  # noise parameters are estimated with the others: a likelihood

    @property
    def noise_paths(self) -> tuple[str, ...]:
        return ()  # noise parameters are rows of the parameter table, fitted as such

    def transform(self, path: str) -> Transform:
        (lower, upper), *_ = (b[1:] for b in self.bounds if b[0] == path)
        return Transform(lower=lower, upper=upper, closed=True)

    def fitted_data(self) -> Any:
        return self.petab_problem._tables.measurement_df[petab.C.MEASUREMENT].to_numpy(float)

    def num_observed(self) -> Array:
        return jnp.asarray(len(self.petab_problem._tables.measurement_df))

    def negative_log_likelihood_at(self, model, y0s, noise, adjoint, noise_scale=1.0):
        return negative_log_likelihood(self.petab_problem, estimates(model, self.array_paths))

    def prediction_times(self, ts, data_set: int) -> tuple[Array, int]:
        return ts, 0  # every experiment starts at time 0

    def predict_experiment(self, model, y0s, ts, *, data_set, member, key=None, dt0=None):
        problem = self.petab_problem
        condition_id = problem.condition_ids[data_set]
        at_times = problem.at_times(np.asarray(ts))
        table = at_times._tables.measurement_df
        values = at_times._simulated_values(estimates(model, self.array_paths), "forward")
        rows = np.flatnonzero(table[petab.C.SIMULATION_CONDITION_ID].astype(str) == condition_id)
        return values[rows].reshape(-1, len(ts)).T


def estimates(model, ids: tuple[str, ...]) -> Array:
    """The vector `x` of a PEtab problem from the fields of the parameter module."""
    return jnp.stack([getattr(model, name) for name in ids])


def negative_log_likelihood(problem, x) -> tuple[Array, Array]:
    """$-\\log L$ at `x`, and whether every solve succeeded; a failed point costs
    `FAILED_LOSS` and has derivative zero, so the optimiser rejects it and nothing is NaN."""
    value = _negative_log_likelihood(problem, x)
    ok = jnp.isfinite(value)
    return jnp.where(ok, value, FAILED_LOSS), ok


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _negative_log_likelihood(problem, x):
    return -problem.log_likelihood(x)


@_negative_log_likelihood.defjvp
def _negative_log_likelihood_jvp(problem, primals, tangents):
    (x,), (dx,) = primals, tangents
    value, gradient = value_and_gradient(problem, x)
    # Where a solve failed the gradient is NaN: zero it, or 0 · NaN reaches the optimiser.
    gradient = jnp.where(jnp.isfinite(value), gradient, 0.0)
    return -value, -jnp.dot(gradient, dx)


def parameter_module(problem) -> eqx.Module:
    """A module with one scalar field per estimated parameter, at its nominal value."""
    for name in problem.parameter_ids:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"PEtab: the parameter id {name!r} is not a Python identifier.")
    fields = {name: Array for name in problem.parameter_ids}
    cls = type("PetabParameters", (eqx.Module,), {"__annotations__": fields})
    return cls(**dict(zip(problem.parameter_ids, problem.nominal, strict=True)))


def scaled_bounds(problem) -> tuple[tuple[str, float, float], ...]:
    """Each estimated parameter's bounds from the parameter table, on its scale."""
    table = problem.petab_problem.parameter_df
    bounds = []
    for name, scale in zip(problem.parameter_ids, problem.scales, strict=True):
        lower, upper = (
            float(petab.scale(table.loc[name, column], scale))
            for column in (petab.C.LOWER_BOUND, petab.C.UPPER_BOUND)
        )
        if not (math.isfinite(lower) and math.isfinite(upper) and lower < upper):
            raise ValueError(
                f"PEtab: parameter {name!r} has bounds ({lower}, {upper}) on its {scale} "
                "scale; a fit needs finite bounds, lower below upper."
            )
        bounds.append((name, lower, upper))
    return tuple(bounds)


def fit_petab(
    problem,
    *,
    starts: Integer | ArrayLike | None = None,
    key: Any = None,
    x0: Any = None,
    optimiser: Any = None,
    max_steps: Integer | None = None,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    progress: bool | None = None,
    throw: bool = True,
    covariance: bool = True,
) -> FitResult:
    """`PetabProblem.fit`: see its docstring."""
    max_steps = MAX_STEPS if max_steps is None else max_steps
    method, stepper, max_steps = _checked_settings(
        "quasi_newton", optimiser, max_steps, rtol, atol, 100, None
    )
    model = parameter_module(problem)
    if x0 is not None:
        x0 = problem._x(x0)
        model = type(model)(**dict(zip(problem.parameter_ids, x0, strict=True)))
    bounds = scaled_bounds(problem)
    _check_inside(model, bounds)
    if starts is not None and np.ndim(starts) > 0:
        starts = _given_starts(problem, starts, bounds)
    fit = PetabFitProblem(
        model=model,
        experiments=(),
        array_paths=problem.parameter_ids,
        module_paths=(),
        fit_y0=False,
        observe=observe_identity,  # unused: the PEtab observables are the observations
        simulate_options=as_solve_options(None),
        bounds=bounds,
        petab_problem=problem,
    )
    return fit_problem(
        fit,
        Layout(is_list=True, batched=()),
        stepper,
        max_steps,
        starts=starts,
        key=key,
        progress=progress,
        throw=throw,
        covariance=covariance,
    )


def _given_starts(problem, starts, bounds) -> dict[str, Array]:
    """The rows of `starts` (one start each, on the parameter scales) as each parameter's
    values, after checking their shape and that they lie within the bounds."""
    points = np.asarray(starts, dtype=float)
    count = len(problem.parameter_ids)
    if points.ndim != 2 or points.shape[1] != count or points.shape[0] == 0:
        raise ValueError(
            f"PEtab: starts= takes a number of starts or an array of start points of shape "
            f"(starts, {count}) (one column per parameter id, on its scale); got shape "
            f"{points.shape}."
        )
    for column, (name, lower, upper) in enumerate(bounds):
        outside = np.flatnonzero(~((points[:, column] >= lower) & (points[:, column] <= upper)))
        if outside.size:
            raise ValueError(
                f"PEtab: start {int(outside[0])} has {name!r} = {points[outside[0], column]:g} on "
                f"its scale, outside its bounds [{lower:g}, {upper:g}]."
            )
    dtype = problem.nominal.dtype
    return {
        name: jnp.asarray(points[:, column], dtype)
        for column, name in enumerate(problem.parameter_ids)
    }


def _check_inside(model, bounds) -> None:
    for name, lower, upper in bounds:
        value = float(getattr(model, name))
        if not lower <= value <= upper:
            raise ValueError(
                f"PEtab: the start of {name!r}, {value:g} on its scale, is outside its bounds "
                f"[{lower:g}, {upper:g}]; pass x0 inside them, or starts=."
            )
