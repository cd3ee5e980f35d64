"""The fit problem: validated data, the parameters being fitted, and the residual function."""

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from jaxtyping import Array

from .._misc import is_concrete, warn_at_caller
from .._options import SolveOptions, as_solve_options
from .._simulate import checked_ts, simulate, with_default_solver
from ..integrate._registry import counts_steps_when_traced
from ..models._base import AbstractModel
from ._noise import AbstractLeastSquaresNoise, AbstractNoise, Gaussian, noise_parameters
from ._series import from_series
from ._transforms import IDENTITY, Transform, transform_for
from ._transition import path_log_likelihood

# A member whose solve fails contributes this residual everywhere: large enough that any
# optimiser rejects the trial point, finite so that the fit itself never turns NaN.
FAILED_RESIDUAL = 1e8
FAILED_LOSS = 0.5 * FAILED_RESIDUAL**2  # the least loss of a point where a solve failed
GAUSSIAN = Gaussian()


@dataclasses.dataclass(frozen=True)
class ConcreteTimes:
    """Save times as hashable values, static in a compiled fit (new times compile anew)."""

    values: tuple[float, ...]
    dtype: str

    def array(self) -> np.ndarray:
        return np.asarray(self.values, self.dtype)


class ObservationBatch(eqx.Module):
    """Experiments' data sharing save times: observations `(batch, times, k)`, y0
    `(batch, *state)`.

    `ts` are the simulation's save times: the observation times, preceded by the start
    time `t0` when it comes before them (`skip=1`: that first row is not observed).
    Missing observations are `False` in `observed` and hold a placeholder value (1.0).
    `concrete_ts` holds the same save times as values, static rather than traced by the
    fit's compiled loop, where the solve needs its step count when traced
    (`with_concrete_times`); else `None`.
    """

    ts: Array
    observations: Array
    noise_scale: Array
    y0: Array
    observed: Array
    skip: int = eqx.field(static=True, default=0)
    concrete_ts: ConcreteTimes | None = eqx.field(static=True, default=None)

    def save_times(self) -> Array | np.ndarray:
        """The save times the solves take: the values in `concrete_ts` where held (a
        compiled fit then counts the fixed steps per interval), else `ts`."""
        return self.ts if self.concrete_ts is None else self.concrete_ts.array()


def with_concrete_times(experiment: ObservationBatch, options: SolveOptions) -> ObservationBatch:
    """`experiment` with its save times held as values (`concrete_ts`) where `options`
    ask for fixed steps of a given `dt0` and the integrator they name (or one that `"auto"`
    may take here: the kernel on a TPU) needs the number of steps per save interval when
    the solve is traced (`counts_steps_when_traced`), as a sweep keeps its save times.
    Traced times (a fit under `jax.jit` or `jax.vmap` over them) stay as they are."""
    fixed_steps = not options.adaptive and options.dt0 is not None
    if not (fixed_steps and counts_steps_when_traced(options.integrator)):
        return experiment
    if not is_concrete(experiment.ts):
        return experiment
    times = np.asarray(experiment.ts)
    concrete = ConcreteTimes(tuple(times.tolist()), str(times.dtype))
    return dataclasses.replace(experiment, concrete_ts=concrete)


@dataclasses.dataclass(frozen=True)
class SelectComponents:
    """`observe=` given as names: picks those state components (hashable, so jit caches)."""

    indices: tuple[int, ...]
    names: tuple[str, ...]

    def __call__(self, y):
        return y[jnp.asarray(self.indices)]


def observe_identity(y):
    return jnp.reshape(y, (-1,))


def get_path(tree: Any, path: str) -> Any:
    """`get_path(model, "physics.alpha")` is `model.physics.alpha`."""
    for part in path.split("."):
        tree = getattr(tree, part)
    return tree


def bounds_of(model: Any, path: str, overrides: tuple = ()) -> Transform:
    """The transform of a parameter: onto `bounds=` given to the fit, else its declared range."""
    for override_path, lower, upper in overrides:
        if override_path == path:
            return Transform(lower=lower, upper=upper)
    owner_path, _, name = path.rpartition(".")
    owner = get_path(model, owner_path) if owner_path else model
    if isinstance(owner, AbstractModel):
        return transform_for(owner.parameter_bounds().get(name))
    return IDENTITY


class FitProblem(eqx.Module):
    """Everything the optimiser needs; arrays are traced, the rest is static."""

    model: Any
    experiments: tuple[ObservationBatch, ...]
    array_paths: tuple[str, ...] = eqx.field(static=True)
    module_paths: tuple[str, ...] = eqx.field(static=True)
    fit_y0: bool = eqx.field(static=True)
    observe: Callable = eqx.field(static=True)
    simulate_options: SolveOptions = eqx.field(static=True)
    noise: AbstractNoise = GAUSSIAN
    fit_noise: bool = eqx.field(static=True, default=False)
    bounds: tuple[tuple[str, float, float], ...] = eqx.field(static=True, default=())
    # `(mask, value)`: the scalar parameters where `mask` (one flag per array path) is set
    # are held at the unconstrained `value` whatever the optimiser proposes, so a profile's
    # refits of different parameters share one program.
    pin: tuple[Array, Array] | None = None
    # For a stochastic model: the transition density whose product over each observed path
    # is the likelihood ("exact" or "euler_maruyama"; see `_transition`), else None.
    transition: str | None = eqx.field(static=True, default=None)

    @property
    def paths(self) -> tuple[str, ...]:
        return self.array_paths + self.module_paths

    def fitted_data(self) -> Any:
        """What the fit matches the model to, as a pytree (a checkpoint is resumed only
        by a fit of the same data)."""
        return self.experiments

    @property
    def observed_names(self) -> tuple[str, ...] | None:
        """The observed state components, when `observe=` named them; else None."""
        return self.observe.names if isinstance(self.observe, SelectComponents) else None

    @property
    def is_least_squares(self) -> bool:
        """Whether the likelihood is Gaussian in some residual (fitted by least squares)."""
        return self.transition is None and isinstance(self.noise, AbstractLeastSquaresNoise)

    @property
    def noise_paths(self) -> tuple[str, ...]:
        """The noise model's fitted parameters (none for least-squares noise, nor for the
        transition density of a stochastic model, whose noise is the model's own)."""
        if self.is_least_squares or self.transition is not None:
            return ()
        return tuple(noise_parameters(self.noise))

    def transform(self, path: str) -> Transform:
        return bounds_of(self.model, path, self.bounds)

    def noise_at(self, u: dict[str, Any]) -> AbstractNoise:
        """The noise model at the unconstrained point `u` (its parameters are $e^u$)."""
        if not self.noise_paths:
            return self.noise
        return eqx.tree_at(
            lambda n: [getattr(n, p) for p in self.noise_paths],
            self.noise,
            [jnp.exp(u["noise"][p]) for p in self.noise_paths],
        )

    def _filter_spec(self):
        spec = jtu.tree_map(lambda _: False, self.model)
        replacements = [
            jtu.tree_map(eqx.is_inexact_array, get_path(self.model, p)) for p in self.module_paths
        ]
        return eqx.tree_at(
            lambda m: [get_path(m, p) for p in self.paths],
            spec,
            [True] * len(self.array_paths) + replacements,
        )

    def initial_unconstrained(self) -> dict[str, Any]:
        """The starting point `u0` of the optimiser (natural values pulled through $g^{-1}$)."""
        natural, _ = eqx.partition(self.model, self._filter_spec())
        inverse = [
            self.transform(p).to_unconstrained(get_path(natural, p)) for p in self.array_paths
        ]
        if self.array_paths:
            natural = eqx.tree_at(
                lambda m: [get_path(m, p) for p in self.array_paths], natural, inverse
            )
        y0s = tuple(e.y0 for e in self.experiments) if self.fit_y0 else None
        noise = {p: jnp.log(getattr(self.noise, p)) for p in self.noise_paths}
        return {"model": natural, "y0": y0s, "noise": noise}

    def build(self, u: dict[str, Any]) -> tuple[Any, tuple[Array, ...]]:
        """The model and initial states at the unconstrained point `u`."""
        natural = u["model"]
        if self.array_paths:
            values = [
                self.transform(p).to_natural(self._pinned(i, get_path(natural, p)))
                for i, p in enumerate(self.array_paths)
            ]
            natural = eqx.tree_at(
                lambda m: [get_path(m, p) for p in self.array_paths], natural, values
            )
        _, static = eqx.partition(self.model, self._filter_spec())
        model = eqx.combine(natural, static)
        y0s = u["y0"] if self.fit_y0 else tuple(e.y0 for e in self.experiments)
        return model, y0s

    def _pinned(self, index: int, value: Array) -> Array:
        if self.pin is None or jnp.shape(value) != ():
            return value
        mask, pinned = self.pin
        return jnp.where(mask[index], pinned, value)

    def predictions_at(self, model, y0s, adjoint) -> tuple[tuple[Array, Array, Array], ...]:
        """Each experiment's `(predictions, ok, usable)` (see `_experiment_predictions`)."""
        return tuple(
            self._experiment_predictions(model, experiment, y0, adjoint)
            for experiment, y0 in zip(self.experiments, y0s, strict=True)
        )

    def residuals_from(self, predictions) -> tuple[Array, Array]:
        """Weighted residuals of all experiments, flattened, and whether every solve succeeded.

        Missing observations contribute a residual of exactly zero (and no derivative).
        """
        chunks, all_ok = [], jnp.array(True)
        for experiment, (predicted, ok, usable) in zip(self.experiments, predictions, strict=True):
            residual = self.noise.residuals(
                predicted, experiment.observations, experiment.noise_scale
            )
            residual = jnp.where(usable, residual, jnp.where(ok, 0.0, FAILED_RESIDUAL))
            chunks.append(jnp.where(experiment.observed, residual, 0.0).reshape(-1))
            all_ok = all_ok & jnp.all(ok)
        return jnp.concatenate(chunks), all_ok

    def negative_log_likelihood_from(self, predictions, noise, noise_scale=1.0):
        r"""$-\log L$ summed over the observed values (each noise scale times `noise_scale`),
        and whether every solve succeeded; a failed member costs a large finite amount."""
        total, all_ok = jnp.zeros(()), jnp.array(True)
        for experiment, (predicted, ok, usable) in zip(self.experiments, predictions, strict=True):
            nll = noise.negative_log_likelihood(
                predicted, experiment.observations, noise_scale * experiment.noise_scale
            )
            failed = FAILED_LOSS * experiment.observed.astype(total.dtype)
            total = total + jnp.sum(jnp.where(usable, nll, jnp.where(ok, 0.0, failed)))
            all_ok = all_ok & jnp.all(ok)
        return total, all_ok

    def residuals_at(self, model, y0s, adjoint) -> tuple[Array, Array]:
        return self.residuals_from(self.predictions_at(model, y0s, adjoint))

    def residuals(self, u, adjoint) -> tuple[Array, Array]:
        model, y0s = self.build(u)
        return self.residuals_at(model, y0s, adjoint)

    def negative_log_likelihood_at(self, model, y0s, noise, adjoint, noise_scale=1.0):
        if self.transition is not None:
            return self.path_negative_log_likelihood(model)
        predictions = self.predictions_at(model, y0s, adjoint)
        return self.negative_log_likelihood_from(predictions, noise, noise_scale)

    def path_negative_log_likelihood(self, model) -> tuple[Array, Array]:
        r"""$-\sum \log p(y_{k+1} \mid y_k)$ over every observed path of a stochastic model,
        and whether it is finite (a state the density excludes, e.g. a negative price)."""
        total = jnp.zeros(())
        for experiment in self.experiments:
            state_shape = experiment.y0.shape[1:]
            paths = experiment.observations.reshape(
                *experiment.observations.shape[:2], *state_shape
            )
            log_likelihood = jax.vmap(
                lambda path, ts=experiment.ts: path_log_likelihood(model, self.transition, ts, path)
            )(paths)
            total = total - jnp.sum(log_likelihood)
        finite = jnp.isfinite(total)
        return jnp.where(finite, total, FAILED_LOSS), finite

    def loss(self, u, adjoint) -> tuple[Array, Array]:
        r"""The objective the optimiser minimises at `u`: $\tfrac12\sum r^2$ for least-squares
        noise, else the negative log-likelihood; and whether every solve succeeded."""
        if self.is_least_squares:
            residuals, ok = self.residuals(u, adjoint)
            return 0.5 * jnp.sum(residuals**2), ok
        model, y0s = self.build(u)
        return self.negative_log_likelihood_at(model, y0s, self.noise_at(u), adjoint)

    def predict(self, model, y0, ts, adjoint, key=None, dt0=None):
        """Observed quantities along one trajectory, and whether its solve succeeded; for a
        stochastic model, along the path drawn from `key` in fixed steps of `dt0`."""
        options = self.simulate_options.replace(adjoint=adjoint)
        if key is not None:
            options = options.replace(adaptive=False, dt0=dt0)
        trajectory = simulate(model, y0, ts, throw=False, options=options, key=key)
        return jax.vmap(self.observe)(trajectory.ys), trajectory.succeeded

    def prediction_times(self, ts, data_set: int) -> tuple[Array, int]:
        """The save times of a prediction at `ts`, and how many leading ones are not asked
        for: the data's start `t0`, where it comes before `ts[0]`."""
        experiment = self.experiments[data_set]
        start = experiment.ts[:1]
        if experiment.skip and not (is_concrete(ts) and ts.size and bool(ts[0] == start[0])):
            return jnp.concatenate([start, ts]), 1
        return ts, 0

    def predict_experiment(self, model, y0s, ts, *, data_set, member, key=None, dt0=None):
        """The observed quantities `(len(ts), k)` of one member of one data set at the save
        times `ts`, differentiable in forward mode: what `FitResult.predict` reports."""
        y0 = y0s[data_set][member]
        return self.predict(model, y0, ts, "forward", key=key, dt0=dt0)[0]

    def _experiment_predictions(self, model, experiment, y0, adjoint):
        """Predictions `(batch, times, k)` (the data's values where unusable), each member's
        solve status `(batch, 1, 1)`, and which values are usable: observed and solved."""

        def predict(y0_member):
            return self.predict(model, y0_member, experiment.save_times(), adjoint)

        predictions, ok = jax.vmap(predict)(y0)
        predictions = predictions[:, experiment.skip :]
        ok = ok[:, None, None]
        usable = ok & experiment.observed
        # Double `where`: a failed member's predictions are inf, and must not reach the
        # arithmetic (or its derivatives) at all.
        return jnp.where(usable, predictions, experiment.observations), ok, usable

    def num_observed(self) -> Array:
        """How many values are observed (not NaN), over all experiments; for the paths of a
        stochastic model, those whose density enters the likelihood (all but the first)."""
        first = 0 if self.transition is None else 1
        return sum(jnp.sum(e.observed[:, first:]) for e in self.experiments)


# ---------------------------------------------------------------------------------------
# Validation: every bad input is reported before anything is compiled.


@dataclasses.dataclass(frozen=True)
class Layout:
    """How the user passed the data, so results come back in the same shape."""

    is_list: bool
    batched: tuple[bool, ...]


def make_problem(
    model: Any,
    ts: Any,
    observations: Any,
    *,
    y0: Any,
    params: Sequence[str],
    observe: Any,
    fit_y0: bool,
    noise_scale: Any,
    simulate_options: dict[str, Any] | SolveOptions | None,
    t0: Any = None,
    noise: AbstractNoise = GAUSSIAN,
    fit_noise: bool = False,
    bounds: dict[str, Any] | None = None,
    transition: str | None = None,
) -> tuple[FitProblem, Layout]:
    ts, observations = from_series(ts, observations)
    overrides = _checked_bounds(model, params, bounds)
    array_paths, module_paths = _checked_params(model, params, overrides, fit_y0)
    # A list of arrays is several data sets; a plain list of numbers is one time axis.
    is_list = isinstance(ts, list | tuple) and any(np.ndim(t) > 0 for t in ts)
    if is_list:
        lengths = {len(ts), _length(observations, "observations"), _length(y0, "y0")}
        if not isinstance(noise_scale, list | tuple):
            noise_scale = [noise_scale] * len(ts)
        if not isinstance(t0, list | tuple):
            t0 = [t0] * len(ts)
        lengths.add(len(noise_scale))
        lengths.add(len(t0))
        if len(lengths) != 1:
            raise ValueError(
                "for several data sets pass lists of equal length for ts, observations, y0 "
                f"(and noise_scale, t0); got lengths {sorted(lengths)}."
            )
        if len(ts) == 0:
            raise ValueError("the lists of data sets are empty; pass at least one data set.")
        entries = list(zip(ts, observations, y0, noise_scale, t0, strict=True))
    else:
        entries = [(ts, observations, y0, noise_scale, t0)]
    state_shape = _state_shape(model, entries[0][2])
    observe_fn, num_observed = _checked_observe(model, observe, state_shape)
    experiments, batched = [], []
    for index, entry in enumerate(entries):
        where = f" (data set {index})" if is_list else ""
        experiment, is_batched = _checked_experiment(
            *entry, state_shape=state_shape, num_observed=num_observed, where=where, noise=noise
        )
        experiments.append(experiment)
        batched.append(is_batched)
    if simulate_options is not None and not isinstance(simulate_options, dict | SolveOptions):
        raise TypeError(
            f"simulate_options must be a simlab.SolveOptions or a dict of simlab.simulate "
            f"keywords; got {type(simulate_options).__name__}."
        )
    given = (
        {"adjoint"} if getattr(simulate_options, "adjoint", None) is not None else set()
    ) | set(simulate_options if isinstance(simulate_options, dict) else ())
    for reserved in ("adjoint", "throw", "args"):
        if reserved in given:
            raise ValueError(
                f"simulate_options may not set {reserved!r}: fit chooses it (forward mode for "
                "least squares, reverse mode for gradient descent, throw=False throughout)."
            )
    options = as_solve_options(simulate_options)
    for experiment in experiments:  # the solver a direct simulate of the start would pick
        options = with_default_solver(model, experiment.y0[0], experiment.ts, options)
    problem = FitProblem(
        model=model,
        experiments=tuple(with_concrete_times(e, options) for e in experiments),
        array_paths=array_paths,
        module_paths=module_paths,
        fit_y0=bool(fit_y0),
        observe=observe_fn,
        simulate_options=options,
        noise=noise,
        fit_noise=bool(fit_noise),
        bounds=overrides,
        transition=transition,
    )
    _warn_if_underdetermined(problem)
    return problem, Layout(is_list=is_list, batched=tuple(batched))


class UnderdeterminedWarning(UserWarning):
    """A fit has fewer observed residuals than fitted unknowns, or, with a fitted noise scale,
    no more."""


def _warn_if_underdetermined(problem: FitProblem) -> None:
    fitted = [get_path(problem.model, p) for p in problem.paths]
    fitted += [e.y0 for e in problem.experiments] if problem.fit_y0 else []
    unknowns = sum(leaf.size for leaf in jtu.tree_leaves(eqx.filter(fitted, eqx.is_inexact_array)))
    observed = problem.num_observed()
    if not is_concrete(observed):
        return  # the observation mask is traced (fits under vmap): counted per member at run time
    if int(observed) < unknowns:
        warn_at_caller(
            f"the fit is underdetermined: {int(observed)} observed values for "
            f"{unknowns} fitted unknowns, so the data cannot determine them all; the standard "
            "errors and noise variance are undefined (nan). Add observations, or fit fewer "
            "parameters (leave some out of params, or fit_y0=False).",
            UnderdeterminedWarning,
        )
    elif int(observed) == unknowns and problem.fit_noise:
        warn_at_caller(
            f"the fit leaves no degrees of freedom for its noise scale: {int(observed)} observed "
            f"values for {unknowns} fitted unknowns, so the residuals can vanish and the noise "
            "scale cannot be estimated; the standard errors, noise variance, log_likelihood, "
            "aic and bic are undefined (nan). Pass the known noise level as noise_scale=, add "
            "observations, or fit fewer parameters.",
            UnderdeterminedWarning,
        )


def check_start_means(problem: FitProblem) -> None:
    """Refuses a start whose predicted mean gives an observation zero likelihood, for noise
    models defined only for a positive mean: there the loss is flat (the mean is held just
    above zero), so the optimiser would stop at once and report convergence."""
    if not problem.noise.needs_positive_mean:
        return
    model, y0s = problem.build(problem.initial_unconstrained())
    for index, (experiment, (predicted, _, usable)) in enumerate(
        zip(problem.experiments, _start_predictions(problem, model, y0s), strict=True)
    ):
        predicted, observations = np.asarray(predicted), np.asarray(experiment.observations)
        impossible = np.asarray(usable) & (
            (predicted < 0) | ((predicted == 0) & (observations > 0))
        )
        if np.any(impossible):
            member, time, quantity = (int(i[0]) for i in np.nonzero(impossible))
            names = _quantity_names(problem)
            where = f"data set {index}, " if len(problem.experiments) > 1 else ""
            where += f"member {member}, " if experiment.y0.shape[0] > 1 else ""
            raise ValueError(
                f"{type(problem.noise).__name__} noise needs a positive predicted mean, but the "
                f"starting model predicts a mean <= 0 for {int(np.sum(impossible))} observed "
                f"value(s) (e.g. {predicted[member, time, quantity]:g} for "
                f"{names[quantity] if names else f'quantity {quantity}'} at "
                f"t = {float(experiment.ts[experiment.skip + time]):g}, {where}where "
                f"{observations[member, time, quantity]:g} was observed): the likelihood is "
                "zero there and flat around it, so the fit cannot start. Start from parameters "
                "and y0 that predict positive values."
            )


def _quantity_names(problem: FitProblem) -> tuple[str, ...] | None:
    """The observed quantities' names: those `observe=` named, or the state's for `None`."""
    if problem.observe is observe_identity:
        names = tuple(getattr(problem.model, "state_names", ()))
        size = problem.experiments[0].observations.shape[-1]
        return names if len(names) == size else None
    return problem.observed_names


@eqx.filter_jit
def _start_predictions(problem: FitProblem, model, y0s):
    return problem.predictions_at(model, y0s, "forward")


def _length(value: Any, name: str) -> int:
    if not isinstance(value, list | tuple):
        raise ValueError(
            f"ts is a list (several data sets), so {name} must be a list of the same length; "
            f"got {type(value).__name__}."
        )
    return len(value)


def _checked_bounds(model: Any, params: Any, bounds: Any) -> tuple[tuple[str, float, float], ...]:
    """`bounds=` as `(path, lower, upper)`, each inside the parameter's declared range."""
    if bounds is None:
        return ()
    if not isinstance(bounds, dict):
        raise TypeError(
            f"bounds must be a dict of name -> (lower, upper), e.g. {{'rate': (0.1, 10.0)}}; got "
            f"{type(bounds).__name__}."
        )
    checked = []
    for path, pair in bounds.items():
        if isinstance(params, list | tuple) and path not in params:
            raise ValueError(f"bounds names {path!r}, which is not in params {list(params)}.")
        try:
            lower, upper = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise ValueError(
                f"bounds[{path!r}] must be a pair (lower, upper) of numbers; got {pair!r}."
            ) from None
        if not lower < upper:
            raise ValueError(f"bounds[{path!r}] = {pair!r} must have lower < upper.")
        try:
            declared = bounds_of(model, path)
        except AttributeError:
            declared = IDENTITY  # an unknown name: reported with the other params checks
        if lower < declared.lower or upper > declared.upper:
            raise ValueError(
                f"bounds[{path!r}] = ({lower:g}, {upper:g}) reaches outside the parameter's "
                f"declared range {declared.describe()}; narrow it to lie inside."
            )
        checked.append((path, lower, upper))
    return tuple(checked)


def _checked_params(
    model: Any, params: Any, overrides: tuple = (), fit_y0: bool = False
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if isinstance(params, str):
        raise TypeError(f"params must be a list of names, e.g. params=[{params!r}]; got a string.")
    params = list(params)
    if not params and not fit_y0:  # with fit_y0 the initial state alone may be fitted
        raise ValueError(
            "params is empty: name the parameters to fit, e.g. params=['alpha', 'beta'], or "
            "pass fit_y0=True to fit the initial state alone"
            + (
                f"; {type(model).__name__} has {list(model.parameter_names())}."
                if isinstance(model, AbstractModel)
                else "."
            )
        )
    if len(set(params)) != len(params):
        raise ValueError(f"params lists a name twice: {params}.")
    array_paths, module_paths = [], []
    for path in params:
        if not isinstance(path, str):
            raise TypeError(f"params must hold names (strings); got {path!r}.")
        try:
            value = get_path(model, path)
        except AttributeError:
            known = model.parameter_names() if isinstance(model, AbstractModel) else ()
            raise ValueError(
                f"unknown parameter {path!r} for {type(model).__name__}; its parameters are "
                f"{list(known)} (nested ones are named by path, e.g. 'physics.alpha')."
            ) from None
        if eqx.is_inexact_array(value):
            _check_start_inside(model, path, value, overrides)
            array_paths.append(path)
        elif jtu.tree_leaves(eqx.filter(value, eqx.is_inexact_array)):
            module_paths.append(path)
        else:
            raise ValueError(
                f"{path!r} is not a floating-point array or a module holding some; it cannot "
                "be fitted."
            )
    return tuple(array_paths), tuple(module_paths)


def _check_start_inside(model: Any, path: str, value: Array, overrides: tuple) -> None:
    if not is_concrete(value):
        return
    transform = bounds_of(model, path, overrides)
    values = np.asarray(value)
    if not np.all(transform.strictly_inside(values)):
        raise ValueError(
            f"the starting value of {path!r} ({values if values.size < 8 else 'an array'}) "
            f"must lie strictly inside {transform.describe()} so that it can be optimised "
            "through the range-keeping transform; start it inside, e.g. away from the bound."
        )


def _state_shape(model: Any, y0: Any) -> tuple[int, ...]:
    if isinstance(model, AbstractModel):
        return tuple(model.state_shape)
    return tuple(jnp.shape(y0))


def _checked_observe(model: Any, observe: Any, state_shape) -> tuple[Callable, int]:
    if observe is None:
        return observe_identity, math.prod(state_shape)
    if callable(observe):
        try:
            out = jax.eval_shape(observe, jax.ShapeDtypeStruct(state_shape, jnp.result_type(float)))
        except Exception as error:
            raise ValueError(
                f"observe(y) failed on a state of shape {state_shape}: {error}"
            ) from error
        if len(out.shape) != 1:
            raise ValueError(
                f"observe(y) must return a 1-D array of observed quantities; it returned "
                f"shape {out.shape}."
            )
        return observe, out.shape[0]
    names = [observe] if isinstance(observe, str) else list(observe)
    known = tuple(getattr(model, "state_names", ()))
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(
            f"observe names unknown state components {unknown or names}; "
            f"{type(model).__name__} has {list(known)}."
        )
    return SelectComponents(tuple(known.index(n) for n in names), tuple(names)), len(names)


def _checked_experiment(
    ts, observations, y0, noise_scale, t0, *, state_shape, num_observed, where, noise
):
    ts = checked_ts(ts)
    observations = jnp.asarray(observations)
    if not jnp.issubdtype(observations.dtype, jnp.inexact):
        observations = observations.astype(float)
    num_times = ts.shape[0]
    if observations.ndim == 1 and num_observed == 1:
        observations = observations[:, None]
    if observations.ndim not in (2, 3) or observations.shape[-2:] != (num_times, num_observed):
        raise ValueError(
            f"observations{where} must have shape (len(ts), {num_observed}) = "
            f"({num_times}, {num_observed}), or (batch, {num_times}, {num_observed}) for "
            f"several experiments sharing ts; got {observations.shape}."
        )
    observed = ~jnp.isnan(observations)
    _check_observations(observations, observed, where, noise)
    observations = jnp.where(observed, observations, 1.0)
    ts, skip = _with_start(ts, t0, where)
    is_batched = observations.ndim == 3
    observations = observations if is_batched else observations[None]
    observed = observed if is_batched else observed[None]
    y0 = jnp.asarray(y0)
    if not jnp.issubdtype(y0.dtype, jnp.inexact):
        y0 = y0.astype(float)
    expected = (observations.shape[0], *state_shape) if is_batched else state_shape
    if y0.shape != expected:
        raise ValueError(
            f"y0{where} has shape {y0.shape}; expected {expected} (the model's state shape"
            + (", one row per experiment)." if is_batched else ").")
        )
    _check_finite(y0, f"y0{where}", "pass a finite initial state")
    y0 = y0 if is_batched else y0[None]
    scale = jnp.asarray(1.0 if noise_scale is None else noise_scale, dtype=observations.dtype)
    try:
        scale = jnp.broadcast_to(
            scale, observations.shape[1:] if scale.ndim <= 2 else observations.shape
        )
        scale = jnp.broadcast_to(scale, observations.shape)
    except ValueError:
        raise ValueError(
            f"noise_scale{where} of shape {scale.shape} does not broadcast to the observations' "
            f"shape {observations.shape[-2:]}; pass a scalar, one value per observed quantity, "
            "or one per point."
        ) from None
    if is_concrete(scale) and not np.all(np.isfinite(scale) & (np.asarray(scale) > 0)):
        raise ValueError(f"noise_scale{where} must be positive and finite everywhere.")
    experiment = ObservationBatch(
        ts=ts, observations=observations, noise_scale=scale, y0=y0, observed=observed, skip=skip
    )
    return experiment, is_batched


def _with_start(ts: Array, t0: Any, where: str) -> tuple[Array, int]:
    """The simulation's save times: `ts`, preceded by `t0` when it is given."""
    if t0 is None:
        return ts, 0
    t0 = jnp.asarray(t0, dtype=ts.dtype)
    if t0.ndim != 0:
        raise ValueError(f"t0{where} must be a scalar time; got shape {t0.shape}.")
    if is_concrete(t0) and is_concrete(ts) and not float(t0) < float(ts[0]):
        raise ValueError(
            f"t0{where} = {float(t0):g} must come before the first observation time "
            f"ts[0] = {float(ts[0]):g}; leave t0 out to start the simulation at ts[0]."
        )
    return jnp.concatenate([t0[None], ts]), 1


def _check_observations(observations: Array, observed: Array, where: str, noise) -> None:
    """No inf; NaN means missing, but not everywhere; observed values suit the noise model."""
    if not is_concrete(observations):
        return
    values, mask = np.asarray(observations), np.asarray(observed)
    if np.any(np.isinf(values)):
        raise ValueError(
            f"observations{where} hold {int(np.sum(np.isinf(values)))} inf value(s); mark a "
            "missing value with NaN, or drop the point."
        )
    if not np.any(mask):
        raise ValueError(
            f"observations{where} are all NaN: nothing is observed. NaN marks a missing value; "
            "pass at least one measured value."
        )
    noise.check_observations(values[mask], where)


def _check_finite(value: Array, name: str, fix: str) -> None:
    if is_concrete(value) and not np.all(np.isfinite(np.asarray(value))):
        bad = int(np.sum(~np.isfinite(np.asarray(value))))
        raise ValueError(f"{name} holds {bad} NaN or inf value(s); {fix}.")
