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

from .._misc import is_concrete
from .._options import SolveOptions, as_solve_options
from .._simulate import checked_ts, simulate
from ..models._base import AbstractModel
from ._transforms import IDENTITY, Transform, transform_for

# A member whose solve fails contributes this residual everywhere: large enough that any
# optimiser rejects the trial point, finite so that the fit itself never turns NaN.
FAILED_RESIDUAL = 1e8


class Experiment(eqx.Module):
    """Experiments sharing save times: observations `(batch, times, k)`, y0 `(batch, *state)`."""

    ts: Array
    observations: Array
    noise_scale: Array
    y0: Array


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


def bounds_of(model: Any, path: str) -> Transform:
    owner_path, _, name = path.rpartition(".")
    owner = get_path(model, owner_path) if owner_path else model
    if isinstance(owner, AbstractModel):
        return transform_for(owner.parameter_bounds().get(name))
    return IDENTITY


class FitProblem(eqx.Module):
    """Everything the optimiser needs; arrays are traced, the rest is static."""

    model: Any
    experiments: tuple[Experiment, ...]
    array_paths: tuple[str, ...] = eqx.field(static=True)
    module_paths: tuple[str, ...] = eqx.field(static=True)
    fit_y0: bool = eqx.field(static=True)
    observe: Callable = eqx.field(static=True)
    simulate_options: SolveOptions = eqx.field(static=True)

    @property
    def paths(self) -> tuple[str, ...]:
        return self.array_paths + self.module_paths

    @property
    def observed_names(self) -> tuple[str, ...] | None:
        """The observed state components, when `observe=` named them; else None."""
        return self.observe.names if isinstance(self.observe, SelectComponents) else None

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
            bounds_of(self.model, p).to_unconstrained(get_path(natural, p))
            for p in self.array_paths
        ]
        if self.array_paths:
            natural = eqx.tree_at(
                lambda m: [get_path(m, p) for p in self.array_paths], natural, inverse
            )
        y0s = tuple(e.y0 for e in self.experiments) if self.fit_y0 else None
        return {"model": natural, "y0": y0s}

    def build(self, u: dict[str, Any]) -> tuple[Any, tuple[Array, ...]]:
        """The model and initial states at the unconstrained point `u`."""
        natural = u["model"]
        if self.array_paths:
            values = [
                bounds_of(self.model, p).to_natural(get_path(natural, p)) for p in self.array_paths
            ]
            natural = eqx.tree_at(
                lambda m: [get_path(m, p) for p in self.array_paths], natural, values
            )
        _, static = eqx.partition(self.model, self._filter_spec())
        model = eqx.combine(natural, static)
        y0s = u["y0"] if self.fit_y0 else tuple(e.y0 for e in self.experiments)
        return model, y0s

    def residuals_at(self, model, y0s, adjoint) -> tuple[Array, Array]:
        """Weighted residuals of all experiments, flattened, and whether every solve succeeded."""
        chunks, all_ok = [], jnp.array(True)
        for experiment, y0 in zip(self.experiments, y0s, strict=True):
            residual, ok = self._experiment_residuals(model, experiment, y0, adjoint)
            chunks.append(residual.reshape(-1))
            all_ok = all_ok & jnp.all(ok)
        return jnp.concatenate(chunks), all_ok

    def residuals(self, u, adjoint) -> tuple[Array, Array]:
        model, y0s = self.build(u)
        return self.residuals_at(model, y0s, adjoint)

    def predict(self, model, y0, ts, adjoint):
        """Observed quantities along one trajectory, and whether its solve succeeded."""
        options = self.simulate_options.replace(adjoint=adjoint)
        trajectory = simulate(model, y0, ts, throw=False, options=options)
        return jax.vmap(self.observe)(trajectory.ys), trajectory.succeeded

    def _experiment_residuals(self, model, experiment, y0, adjoint):
        def predict(y0_member):
            return self.predict(model, y0_member, experiment.ts, adjoint)

        predictions, ok = jax.vmap(predict)(y0)
        ok = ok[:, None, None]
        # Double `where`: a failed member's predictions are inf, and must not reach the
        # arithmetic (or its derivatives) at all.
        safe = jnp.where(ok, predictions, experiment.observations)
        scaled = (safe - experiment.observations) / experiment.noise_scale
        return jnp.where(ok, scaled, FAILED_RESIDUAL), ok

    @property
    def num_residuals(self) -> int:
        return sum(int(np.prod(e.observations.shape)) for e in self.experiments)


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
) -> tuple[FitProblem, Layout]:
    array_paths, module_paths = _checked_params(model, params)
    is_list = isinstance(ts, list | tuple)
    if is_list:
        lengths = {len(ts), _length(observations, "observations"), _length(y0, "y0")}
        if not isinstance(noise_scale, list | tuple):
            noise_scale = [noise_scale] * len(ts)
        lengths.add(len(noise_scale))
        if len(lengths) != 1:
            raise ValueError(
                "for several data sets pass lists of equal length for ts, observations, y0 "
                f"(and noise_scale); got lengths {sorted(lengths)}."
            )
        if len(ts) == 0:
            raise ValueError("the lists of data sets are empty; pass at least one data set.")
        entries = list(zip(ts, observations, y0, noise_scale, strict=True))
    else:
        entries = [(ts, observations, y0, noise_scale)]
    state_shape = _state_shape(model, entries[0][2])
    observe_fn, num_observed = _checked_observe(model, observe, state_shape)
    experiments, batched = [], []
    for index, entry in enumerate(entries):
        where = f" (data set {index})" if is_list else ""
        experiment, is_batched = _checked_experiment(
            *entry, state_shape=state_shape, num_observed=num_observed, where=where
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
    problem = FitProblem(
        model=model,
        experiments=tuple(experiments),
        array_paths=array_paths,
        module_paths=module_paths,
        fit_y0=bool(fit_y0),
        observe=observe_fn,
        simulate_options=as_solve_options(simulate_options),
    )
    return problem, Layout(is_list=is_list, batched=tuple(batched))


def _length(value: Any, name: str) -> int:
    if not isinstance(value, list | tuple):
        raise ValueError(
            f"ts is a list (several data sets), so {name} must be a list of the same length; "
            f"got {type(value).__name__}."
        )
    return len(value)


def _checked_params(model: Any, params: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if isinstance(params, str):
        raise TypeError(f"params must be a list of names, e.g. params=[{params!r}]; got a string.")
    params = list(params)
    if not params:
        raise ValueError(
            "params is empty: name the parameters to fit, e.g. params=['alpha', 'beta']"
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
            _check_start_inside(model, path, value)
            array_paths.append(path)
        elif jtu.tree_leaves(eqx.filter(value, eqx.is_inexact_array)):
            module_paths.append(path)
        else:
            raise ValueError(
                f"{path!r} is not a floating-point array or a module holding some; it cannot "
                "be fitted."
            )
    return tuple(array_paths), tuple(module_paths)


def _check_start_inside(model: Any, path: str, value: Array) -> None:
    if not is_concrete(value):
        return
    transform = bounds_of(model, path)
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


def _checked_experiment(ts, observations, y0, noise_scale, *, state_shape, num_observed, where):
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
    _check_finite(observations, f"observations{where}", "drop or interpolate missing points")
    is_batched = observations.ndim == 3
    observations = observations if is_batched else observations[None]
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
    return Experiment(ts=ts, observations=observations, noise_scale=scale, y0=y0), is_batched


def _check_finite(value: Array, name: str, fix: str) -> None:
    if is_concrete(value) and not np.all(np.isfinite(np.asarray(value))):
        bad = int(np.sum(~np.isfinite(np.asarray(value))))
        raise ValueError(f"{name} holds {bad} NaN or inf value(s); {fix}.")
