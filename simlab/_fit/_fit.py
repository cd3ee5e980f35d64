"""`fit`: parameters of a model from observations, with their uncertainty."""

import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optax
import optimistix as optx
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, ArrayLike

from .._misc import is_concrete
from .._options import SolveOptions
from .._results import RESULTS
from ._loop import Carry, GradientStepper, LeastSquaresStepper, num_scalars, run
from ._problem import FitProblem, Layout, get_path, make_problem
from ._uncertainty import covariance, covariance_labels, natural_values, with_natural_values

METHODS = ("least_squares", "gradient")
DEFAULT_MAX_STEPS = {"least_squares": 200, "gradient": 2000}
# Built once, so that every default gradient fit reuses one compiled loop.
DEFAULT_GRADIENT_OPTIMISER = optax.adam(1e-2)


class FitResult(eqx.Module):
    """The outcome of [`simlab.fit`][].

    **Attributes:**

    - `model`: the fitted model (frozen parameters exactly as given).
    - `params`: fitted parameter name → value (natural units).
    - `stderr`: fitted parameter name → standard error; `inf` where the data cannot
      identify the parameter.
    - `covariance`: covariance matrix of the fitted scalars, ordered as `covariance_labels`
      (parameters, then fitted initial states such as `"y0.prey"`).
    - `y0`, `y0_stderr`: the initial state(s), in the layout they were given; the standard
      errors are `nan` unless `fit_y0=True`.
    - `loss`: $\\tfrac12\\sum_i r_i^2$ at the optimum, $r_i$ the residuals divided by
      their noise scale.
    - `loss_history`: the loss after each step (`nan` past `num_steps`).
    - `converged`, `num_steps`, `result`: whether the optimiser met its convergence test,
      how many steps it took, and a [`simlab.RESULTS`][] status.
    - `noise_variance`: the residual variance $\\hat\\sigma^2 = 2\\,\\mathrm{loss}/(N-p)$.
    """

    model: Any
    params: dict[str, Array]
    stderr: dict[str, Array]
    covariance: Array
    y0: Any
    y0_stderr: Any
    loss: Array
    loss_history: Array
    num_steps: Array
    result: RESULTS
    noise_variance: Array
    covariance_labels: tuple[str, ...] = eqx.field(static=True)
    problem: FitProblem = eqx.field(repr=False)

    @property
    def converged(self) -> Array:
        return self.result == RESULTS.successful

    def predict(self, ts: ArrayLike, *, data_set: int = 0, member: int = 0):
        r"""The fitted model's observed quantities at `ts`, and their standard errors.

        The standard errors come from the delta method, $\operatorname{Var} h(t) \approx
        \nabla_\theta h\, \Sigma\, \nabla_\theta h^\top$, with $\Sigma$ the covariance of the
        fit; multiply by 1.96 for a 95% band.

        **Arguments:**

        - `ts`: save times, starting at the data's first time.
        - `data_set`, `member`: which data set (for fits to several) and which member of a
          batch of experiments supplies the initial state.

        **Returns:** `(prediction, stderr)`, each of shape `(len(ts), k)`.
        """
        ts = jnp.asarray(ts, dtype=float)
        problem, model = self.problem, self.model
        y0s = tuple(e.y0 for e in problem.experiments)

        def predicted(theta):
            fitted_model, fitted_y0s = with_natural_values(problem, model, y0s, theta)
            return problem.predict(fitted_model, fitted_y0s[data_set][member], ts, "forward")[0]

        theta = natural_values(problem, model, y0s)
        jacobian = jax.jacfwd(predicted)(theta)
        variance = jnp.einsum("tkp,pq,tkq->tk", jacobian, self.covariance, jacobian)
        return predicted(theta), jnp.sqrt(variance)


def fit(
    model: Any,
    ts: ArrayLike | Sequence[ArrayLike],
    observations: ArrayLike | Sequence[ArrayLike],
    *,
    y0: ArrayLike | Sequence[ArrayLike],
    params: Sequence[str],
    observe: Callable | str | Sequence[str] | None = None,
    fit_y0: bool = False,
    noise_scale: ArrayLike | Sequence[ArrayLike] | None = None,
    method: str = "least_squares",
    optimiser: Any = None,
    max_steps: int | None = None,
    rtol: float = 1e-8,
    atol: float = 1e-12,
    simulate_options: SolveOptions | dict[str, Any] | None = None,
    devices: Sequence[jax.Device] | None = None,
    progress: bool | None = None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 100,
    throw: bool = True,
) -> FitResult:
    r"""Fits model parameters (and optionally initial states) to observations.

    Minimises $\tfrac12 \sum_{e,t,j} r_{etj}^2$ with
    $r_{etj} = \big(h_j(y_e(t)) - \text{obs}_{etj}\big) / s_{etj}$: $y_e$ the simulated
    trajectory of experiment $e$, $h$ the observation map and $s$ the noise scale.
    Parameters a model declares positive or bounded are optimised through a transform
    ($\theta = a + e^u$, or $a + (b-a)\,\sigma(u)$), so every iterate is a valid model;
    parameters not named in `params` stay exactly as they are. At the optimum the
    covariance is $\hat\sigma^2 (J^\top J)^{-1}$ in natural units, $J = \partial r/\partial
    \theta$, $\hat\sigma^2 = \sum r^2 / (N - p)$; parameters the data cannot identify get an
    infinite standard error and a warning naming them.

    A trial point whose simulation fails (too many steps, a non-finite state) is rejected,
    never turned into NaN. `jax.vmap` over data sets (e.g. noise replicates) works and
    compiles once; pass `throw=False` there and read `.result`.

    **Arguments:**

    - `model`: a [`simlab.models.AbstractModel`][] (or any `eqx.Module` vector field)
      holding the starting values.
    - `ts`: the observation times, shape `(T,)`; the simulation starts at `ts[0]`.
      A list of arrays fits several data sets that share the parameters.
    - `observations`: shape `(T, k)`, or `(batch, T, k)` for several experiments sharing
      `ts` (a list of such for several data sets). No NaN or inf.
    - `y0`: the initial state at `ts[0]`, shape `model.state_shape` (or `(batch, ...)`).
    - `params`: names of the parameters to fit, e.g. `["alpha", "beta"]`. Nested ones are
      named by path (`"physics.alpha"`); a name that points to a module (e.g. a hybrid
      model's `"correction"` network) fits all its floating-point arrays.
    - `observe`: what is measured: `None` (the whole state), names of state components
      (`["I"]`), or a function `observe(y) -> (k,)` of one state.
    - `fit_y0`: also fit the initial state(s), starting from `y0`.
    - `noise_scale`: the standard deviation of each observation (scalar, per quantity
      `(k,)`, or per point), dividing the residuals: a point's weight is `1 / noise_scale²`.
    - `method`: `"least_squares"` (an Optimistix least-squares solver, Levenberg–Marquardt
      by default; few parameters) or `"gradient"` (an Optax optimiser, Adam with learning
      rate 0.01 by default; many parameters, e.g. neural networks).
    - `optimiser`: an `optimistix.AbstractLeastSquaresSolver` or an
      `optax.GradientTransformation` matching `method`.
    - `max_steps`: the most optimiser steps (default 200 for least squares, 2000 for
      gradient descent).
    - `rtol`, `atol`: convergence tolerances (of the default Levenberg–Marquardt solver;
      for gradient descent, the least relative/absolute improvement of the best loss
      that resets its 50-step patience).
    - `simulate_options`: the solve settings, a [`simlab.SolveOptions`][] or a dict of
      [`simlab.simulate`][] keywords (`solver`, `rtol`, `atol`, `max_steps`, `dt0`, ...);
      `fit` chooses the adjoint itself.
    - `devices`: run data-parallel: the batch axis of the experiments is sharded over these
      devices (e.g. `jax.devices()`) with `NamedSharding`, and `jax.jit` partitions the fit.
      Each batch size must be divisible by the number of devices.
    - `progress`: show a progress bar (default: only when stdout is a terminal).
    - `checkpoint`: a `.npz` path: the loop's state is saved there every
      `checkpoint_every` steps, and a later call with the same arguments resumes from it.
    - `throw`: raise if the fit does not converge; with `False` read `.result`.

    **Returns:** a [`simlab.FitResult`][].

    !!! example

        ```python
        import jax.numpy as jnp
        import simlab

        data = simlab.datasets.lynx_hare()
        start = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02)
        result = simlab.fit(start, data.ts, data.observations, y0=data.observations[0],
                            params=["alpha", "beta", "gamma", "delta"], fit_y0=True)
        result.params["alpha"], result.stderr["alpha"]
        ```
    """
    method, stepper, max_steps = _checked_settings(
        method, optimiser, max_steps, rtol, atol, checkpoint_every
    )
    problem, layout = make_problem(
        model,
        ts,
        observations,
        y0=y0,
        params=params,
        observe=observe,
        fit_y0=fit_y0,
        noise_scale=noise_scale,
        simulate_options=simulate_options,
    )
    arrays = jtu.tree_leaves(eqx.filter(problem, eqx.is_array))
    traced = not all(is_concrete(leaf) for leaf in arrays)
    if traced and (checkpoint is not None or devices is not None):
        raise ValueError(
            "checkpoint= and devices= need concrete data; they cannot be used inside "
            "jax.jit or jax.vmap."
        )
    if devices is not None:
        problem = _sharded(problem, list(devices))
    progress = (not traced and sys.stdout.isatty()) if progress is None else progress and not traced
    carry = run(
        problem,
        stepper,
        max_steps=max_steps,
        traced=traced,
        progress=progress,
        checkpoint=checkpoint,
        checkpoint_every=checkpoint_every,
    )
    result, unidentifiable = _result(problem, carry, layout)
    if not traced:
        _warn_unidentifiable(result.covariance_labels, np.asarray(unidentifiable))
    if throw:
        return _raise_if_failed(result, traced)
    return result


def _checked_settings(method, optimiser, max_steps, rtol, atol, checkpoint_every):
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {list(METHODS)}.")
    for name, value in (("rtol", rtol), ("atol", atol)):
        if not isinstance(value, int | float) or not value >= 0:
            raise ValueError(f"{name} must be a non-negative number; got {value!r}.")
    max_steps = DEFAULT_MAX_STEPS[method] if max_steps is None else max_steps
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer; got {max_steps!r}.")
    if not isinstance(checkpoint_every, int) or checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be a positive integer; got {checkpoint_every!r}.")
    if method == "gradient":
        optimiser = DEFAULT_GRADIENT_OPTIMISER if optimiser is None else optimiser
        if not isinstance(optimiser, optax.GradientTransformation):
            raise TypeError(
                "method='gradient' takes an optax.GradientTransformation as optimiser, e.g. "
                f"optax.adam(1e-2); got {type(optimiser).__name__}."
            )
        return method, GradientStepper(optimiser, float(rtol), float(atol)), max_steps
    optimiser = optx.LevenbergMarquardt(rtol=rtol, atol=atol) if optimiser is None else optimiser
    if not isinstance(optimiser, optx.AbstractLeastSquaresSolver):
        raise TypeError(
            "method='least_squares' takes an optimistix least-squares solver as optimiser, "
            f"e.g. optimistix.LevenbergMarquardt(rtol=1e-8, atol=1e-12); got "
            f"{type(optimiser).__name__}. For an optax optimiser use method='gradient'."
        )
    return method, LeastSquaresStepper(optimiser, float(rtol), float(atol)), max_steps


def _sharded(problem: FitProblem, devices: list) -> FitProblem:
    """Lays every experiment's batch axis out over `devices`; the parameters are replicated."""
    mesh = Mesh(np.array(devices), ("batch",))
    batch_sharding = NamedSharding(mesh, PartitionSpec("batch"))
    replicated = NamedSharding(mesh, PartitionSpec())
    experiments = []
    for index, experiment in enumerate(problem.experiments):
        batch = experiment.y0.shape[0]
        if batch % len(devices):
            raise ValueError(
                f"data set {index} has a batch of {batch} experiments, not divisible by "
                f"{len(devices)} devices; pad the batch or pass fewer devices."
            )
        experiments.append(
            type(experiment)(
                ts=jax.device_put(experiment.ts, replicated),
                observations=jax.device_put(experiment.observations, batch_sharding),
                noise_scale=jax.device_put(experiment.noise_scale, batch_sharding),
                y0=jax.device_put(experiment.y0, batch_sharding),
            )
        )
    model = jtu.tree_map(
        lambda x: jax.device_put(x, replicated) if eqx.is_array(x) else x, problem.model
    )
    return eqx.tree_at(lambda p: (p.model, p.experiments), problem, (model, tuple(experiments)))


@eqx.filter_jit
def _finish(problem: FitProblem, carry: Carry, num_fitted: int):
    model, y0s = problem.build(carry.best_u)
    residuals, solved = problem.residuals_at(model, y0s, "forward")
    loss = 0.5 * jnp.sum(residuals**2)
    if problem.array_paths or problem.fit_y0:
        cov, unidentifiable = covariance(problem, model, y0s, loss, num_fitted)
    else:
        cov, unidentifiable = jnp.zeros((0, 0)), jnp.zeros((0,), bool)
    dof = residuals.size - num_fitted
    noise_variance = jnp.where(dof > 0, 2 * loss / max(dof, 1), jnp.nan)
    return model, y0s, loss, solved, cov, unidentifiable, noise_variance


def _result(problem, carry: Carry, layout: Layout) -> tuple[FitResult, Array]:
    num_fitted = num_scalars(carry.best_u)
    model, y0s, loss, solved, cov, unidentifiable, noise_variance = _finish(
        problem, carry, num_fitted
    )
    result = RESULTS.where(
        (carry.result == RESULTS.successful) & ~carry.done,
        RESULTS.nonlinear_max_steps_reached,
        carry.result,
    )
    result = RESULTS.where(solved, result, RESULTS.nonfinite_state)
    stderr = jnp.sqrt(jnp.diag(cov))
    params, errors, offset = {}, {}, 0
    for path in problem.array_paths:
        value = get_path(model, path)
        params[path] = value
        errors[path] = stderr[offset : offset + value.size].reshape(value.shape)
        offset += value.size
    for path in problem.module_paths:
        params[path] = get_path(model, path)
    if problem.fit_y0:
        y0_errors, rest = [], stderr[offset:]
        for y0 in y0s:
            y0_errors.append(rest[: y0.size].reshape(y0.shape))
            rest = rest[y0.size :]
    else:
        y0_errors = [jnp.full_like(y0, jnp.nan) for y0 in y0s]
    experiments = tuple(
        eqx.tree_at(lambda e: e.y0, e, y) for e, y in zip(problem.experiments, y0s, strict=True)
    )
    fitted = eqx.tree_at(lambda p: (p.model, p.experiments), problem, (model, experiments))
    labels = covariance_labels(problem, getattr(model, "state_names", None))
    return FitResult(
        model=model,
        params=params,
        stderr=errors,
        covariance=cov,
        y0=_in_layout(y0s, layout),
        y0_stderr=_in_layout(y0_errors, layout),
        loss=loss,
        loss_history=carry.loss_history,
        num_steps=carry.step,
        result=result,
        noise_variance=noise_variance,
        covariance_labels=labels,
        problem=fitted,
    ), unidentifiable


def _in_layout(per_set: Sequence[Array], layout: Layout):
    shaped = [y if batched else y[0] for y, batched in zip(per_set, layout.batched, strict=True)]
    return list(shaped) if layout.is_list else shaped[0]


def _warn_unidentifiable(labels: tuple[str, ...], unidentifiable: np.ndarray) -> None:
    names = [label for label, flag in zip(labels, unidentifiable, strict=True) if flag]
    if names:
        warnings.warn(
            f"the data cannot identify {names}: the fit's Jacobian is (nearly) singular along "
            "a direction combining them, so their standard errors are reported as inf. Fix "
            "some of them (leave them out of params) or add data that separates them.",
            UnidentifiableWarning,
            stacklevel=3,
        )


class UnidentifiableWarning(UserWarning):
    """Some fitted parameters cannot be determined from the data."""


def _raise_if_failed(result: FitResult, traced: bool) -> FitResult:
    failed = result.result != RESULTS.successful
    if traced:
        return eqx.tree_at(lambda r: r.loss, result, result.result.error_if(result.loss, failed))
    if bool(failed):
        raise RuntimeError(
            f"the fit did not converge after {int(result.num_steps)} steps: "
            f"{RESULTS[result.result]} (loss {float(result.loss):.6g}). Raise max_steps, "
            "start closer to the optimum, or pass throw=False to inspect the result."
        )
    return result
