r"""`fit_moments`: a stochastic model's parameters from the moments of an observed ensemble.

The method of simulated moments with common random numbers. The observed paths give, at
each save time after the start, the ensemble's statistics $\hat m$ (mean and variance of
each component). The model simulates `paths` paths from the same start with fixed keys,
the same at every iteration, so its statistics $m(\theta)$ are a smooth function of the
parameters whose derivatives flow through the fixed-step solver (pathwise gradients).
The fit minimises $\tfrac12 (m(\theta) - \hat m)^\top \Omega^{-1} (m(\theta) - \hat m)$, with
$\Omega = \hat S\,(1/M + 1/N)$ the covariance of that difference: $\hat S$ the covariance of
one path's contributions to the statistics (its value, and its squared deviation from the
ensemble mean), estimated from the $M$ observed paths; $N$ the simulated paths. That is
the efficient weighting of the generalised method of moments, so the Gauss–Newton
covariance $(J^\top \Omega^{-1} J)^{-1}$ at the optimum is the estimator's asymptotic
covariance, simulation noise included, and $2\,\mathrm{loss}$ is Hansen's J statistic,
$\chi^2$ with (number of moments − number of parameters) degrees of freedom when the
model is right.
"""

import os
from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._misc import Integer, RealNumber, as_count, is_concrete, is_real_number
from .._options import SolveOptions, as_solve_options
from .._simulate import checked_ts, with_default_solver
from ..integrate._sde import is_stochastic
from ._fit import FitResult, _checked_settings, fit_problem
from ._noise import Gaussian
from ._problem import (
    FitProblem,
    Layout,
    ObservationBatch,
    _checked_bounds,
    _checked_params,
    observe_identity,
)

STATISTICS = ("mean", "variance")


class MomentProblem(FitProblem):
    """A fit problem whose one experiment is the ensemble's whitened statistics.

    Its `observations` are $L^{-1}\\hat m$, with $\\Omega = L L^\\top$; the predictions
    are $L^{-1} m(\\theta)$ from the paths drawn from `keys`, so the residuals are
    $L^{-1}(m(\\theta) - \\hat m)$ at unit noise scale.
    """

    keys: Any = None
    whitening: Array | None = None
    statistics: tuple[str, ...] = eqx.field(static=True, default=())

    def fitted_data(self) -> Any:
        # The simulated paths' keys and the weighting belong to the objective as much as
        # the observed statistics do.
        keys = self.keys
        if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):
            keys = jax.random.key_data(keys)
        return (self.experiments, keys, self.whitening, self.statistics)

    def _experiment_predictions(self, model, experiment, y0, adjoint):
        dt0 = self.simulate_options.dt0
        # The fixed-step SDE loop differentiates by its own rules: forward, or reverse (None).
        adjoint = "forward" if adjoint == "forward" else None

        def one_path(key):
            return self.predict(model, y0[0], experiment.ts, adjoint, key=key, dt0=dt0)

        paths, ok = jax.vmap(one_path)(self.keys)
        solved = jnp.all(ok)
        # A failed path holds inf: keep it out of the arithmetic and its derivatives.
        paths = jnp.where(solved, paths[:, experiment.skip :], 0.0)
        moments = ensemble_statistics(paths, self.statistics)
        whitened = (self.whitening @ moments.reshape(-1)).reshape(moments.shape)[None]
        ok = jnp.broadcast_to(solved, (1, 1, 1))
        usable = ok & experiment.observed
        return jnp.where(usable, whitened, experiment.observations), ok, usable


def ensemble_statistics(paths: Array, statistics: Sequence[str]) -> Array:
    """Each save time's statistics of `paths` `(paths, times, k)`: shape `(times, s·k)`,
    the `k` components' means, then their variances (unbiased), as `statistics` lists."""
    columns = {"mean": lambda: jnp.mean(paths, axis=0), "variance": lambda: _variance(paths)}
    return jnp.concatenate([columns[name]() for name in statistics], axis=-1)


def _variance(paths: Array) -> Array:
    deviations = paths - jnp.mean(paths, axis=0, keepdims=True)
    return jnp.sum(deviations**2, axis=0) / (paths.shape[0] - 1)


def path_contributions(paths: np.ndarray, statistics: Sequence[str]) -> np.ndarray:
    """Each path's contribution to the statistics, whose covariance over the paths is the
    asymptotic covariance of the ensemble's statistics times the number of paths: its value
    for the mean, its squared deviation from the mean for the variance."""
    columns = {"mean": paths, "variance": (paths - paths.mean(axis=0, keepdims=True)) ** 2}
    return np.concatenate([columns[name] for name in statistics], axis=-1)


def fit_moments(
    model: Any,
    ts: Any,
    observations: Any,
    *,
    params: Sequence[str],
    paths: Integer,
    key: Any,
    dt0: RealNumber,
    statistics: Sequence[str] = STATISTICS,
    bounds: dict[str, tuple[float, float]] | None = None,
    method: str = "least_squares",
    optimiser: Any = None,
    max_steps: Integer | None = None,
    rtol: RealNumber | None = None,
    atol: RealNumber | None = None,
    simulate_options: SolveOptions | dict[str, Any] | None = None,
    starts: Integer | None = None,
    progress: bool | None = None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: Integer = 100,
    throw: bool = True,
) -> FitResult:
    r"""Fits a stochastic model's parameters to the statistics of an observed ensemble
    (the method of simulated moments, with common random numbers).

    simlab computes each save time's mean and variance of every component over the
    observed paths, simulates `paths` paths of the model from the same start with keys
    fixed for the whole fit (path $p$ draws from `jax.random.fold_in(key, p)`), and
    minimises $\tfrac12 r^\top r$, $r = L^{-1}(m(\theta) - \hat m)$: the simulated minus the
    observed statistics, whitened by their covariance $\Omega = L L^\top$ (estimated from
    the observed paths, simulation noise included). Derivatives are pathwise, through the
    fixed-step solver. Where the transition density is known or the paths are observed
    densely, [`simlab.fit`][] by maximum likelihood uses the data better; moments suit an
    ensemble whose paths cannot be followed one by one, only summarised.

    **Arguments:**

    - `model`: a stochastic model ([`simlab.models.AbstractSDEModel`][]) holding the
      starting values.
    - `ts`: the save times, shape `(T,)`; `ts[0]` is the start, where every path is at the
      same state.
    - `observations`: the observed paths, shape `(M, T, k)` (`k` the state size). They must
      share their first state (the start); the statistics of the `T - 1` later times are
      fitted. `M` must exceed the number of fitted statistics, `(T - 1)·k·len(statistics)`,
      for their covariance to be estimated (and be well above it for a good estimate).
    - `params`: names of the parameters to fit.
    - `paths`: how many paths the model simulates (at least 2); the estimate's variance
      grows by the factor $1 + M/N$ over an exact-moment fit.
    - `key`: the `jax.random` key of the simulated paths.
    - `dt0`: the fixed step of the simulated paths.
    - `statistics`: which statistics to match: `("mean", "variance")` (default) or one
      of them.
    - `starts`: run this many fits from points drawn by Latin hypercube sampling within
      `bounds` (needed for every fitted parameter) and return the best; `result.starts`
      keeps every start. The points are drawn from a key split off `key`, so the
      simulated paths are the same with and without `starts`.
    - `bounds`, `method`, `optimiser`, `max_steps`, `rtol`, `atol`, `simulate_options`,
      `progress`, `checkpoint`, `checkpoint_every`, `throw`: as for [`simlab.fit`][]
      (`method="gradient"` runs Optax on the same objective). A checkpoint is resumed only
      by a fit with the same observed statistics, `paths`, `key` and settings.

    **Returns:** a [`simlab.FitResult`][]. Its `covariance` and `stderr` are the
    generalised method of moments' covariance $(J^\top \Omega^{-1} J)^{-1}$, $J$ the
    derivative of the simulated statistics: asymptotic in $M$, with the moments'
    covariance across times and statistics taken into account. `loss` is half Hansen's J
    statistic ($\chi^2$ with `num_observed - len(params)` degrees of freedom for a right
    model), and `noise_variance` that $\chi^2$ per degree of freedom (near 1 for a right
    model). `profile` works as for `fit`; `predict(ts, key=...)` draws one fitted path
    from `ts[0]` of the fit, at `ts` from that time on.

    !!! example

        ```python
        result = simlab.fit_moments(start, ts, observed_paths, params=["theta", "sigma"],
                                    paths=500, key=jax.random.key(1), dt0=0.01)
        result.params["theta"], result.stderr["theta"]
        ```
    """
    name = type(model).__name__
    if not is_stochastic(model):
        raise ValueError(
            f"fit_moments fits the ensemble statistics of a stochastic model; {name} is "
            "deterministic: use simlab.fit."
        )
    if key is None:
        raise ValueError(
            "fit_moments simulates paths with fixed keys: pass key=jax.random.key(seed)."
        )
    paths = as_count("paths", paths, minimum=2)
    if not is_real_number(dt0) or not dt0 > 0:
        raise ValueError(f"dt0 must be a positive number (the fixed step); got {dt0!r}.")
    statistics = _checked_statistics(statistics)
    ts = checked_ts(ts)
    observed = _checked_paths(model, ts, observations)
    overrides = _checked_bounds(model, params, bounds)
    array_paths, module_paths = _checked_params(model, params, overrides, False)
    method, stepper, max_steps = _checked_settings(
        method, optimiser, max_steps, rtol, atol, checkpoint_every, Gaussian()
    )
    contributions = path_contributions(observed[:, 1:], statistics)
    whitening = _whitening(contributions, paths)
    moments = np.asarray(ensemble_statistics(jnp.asarray(observed[:, 1:]), statistics))
    whitened = (whitening @ moments.reshape(-1)).reshape(1, *moments.shape)
    y0 = jnp.asarray(observed[:1, 0]).reshape(1, *model.state_shape)
    experiment = ObservationBatch(
        ts=ts,
        observations=jnp.asarray(whitened),
        noise_scale=jnp.ones_like(jnp.asarray(whitened)),
        y0=y0,
        observed=jnp.ones(whitened.shape, bool),
        skip=1,
    )
    options = with_default_solver(model, y0[0], ts, _fixed_step_options(simulate_options, dt0))
    problem = MomentProblem(
        model=model,
        experiments=(experiment,),
        array_paths=array_paths,
        module_paths=module_paths,
        fit_y0=False,
        observe=observe_identity,
        simulate_options=options,
        bounds=overrides,
        keys=jax.vmap(lambda p: jax.random.fold_in(key, p))(jnp.arange(paths)),
        whitening=jnp.asarray(whitening),
        statistics=statistics,
    )
    layout = Layout(is_list=False, batched=(False,))
    return fit_problem(
        problem,
        layout,
        stepper,
        max_steps,
        starts=starts,
        key=_starts_key(key),
        progress=progress,
        checkpoint=checkpoint,
        checkpoint_every=checkpoint_every,
        throw=throw,
    )


def _starts_key(key: Any) -> Any:
    """The key the starting points are drawn from: split off the paths' key, whose
    `fold_in(key, p)` draws path `p`."""
    return jax.random.split(key)[0]


def _fixed_step_options(simulate_options: Any, dt0: float) -> SolveOptions:
    """The settings of the simulated paths: fixed steps of `dt0` (their derivatives are
    pathwise, through the steps). Settings that ask for other steps are refused, not
    overridden."""
    options = as_solve_options(simulate_options)
    if options.dt0 is not None and options.dt0 != dt0:
        raise ValueError(
            f"fit_moments steps its paths at dt0={dt0}, and simulate_options sets "
            f"dt0={options.dt0}: pass the step once, as dt0."
        )
    if isinstance(simulate_options, Mapping) and simulate_options.get("adaptive", False):
        raise ValueError(
            "fit_moments simulates its paths in fixed steps of dt0 (the fit differentiates "
            "through them); drop adaptive=True from simulate_options."
        )
    return options.replace(adaptive=False, dt0=dt0)


def _checked_statistics(statistics: Sequence[str]) -> tuple[str, ...]:
    chosen = (statistics,) if isinstance(statistics, str) else tuple(statistics)
    if not chosen or any(s not in STATISTICS for s in chosen) or len(set(chosen)) < len(chosen):
        raise ValueError(
            f"statistics must list some of {list(STATISTICS)}, each once; got {statistics!r}."
        )
    return tuple(s for s in STATISTICS if s in chosen)


def _checked_paths(model: Any, ts: Array, observations: Any) -> np.ndarray:
    """The observed paths as a float64 NumPy array `(M, T, k)`, or a clear error."""
    if not is_concrete(observations):
        raise ValueError("fit_moments needs concrete observations; it cannot run under jit.")
    data = np.asarray(observations, dtype=np.float64)
    size = int(np.prod(model.state_shape))
    if data.ndim == 2 and size == 1:
        data = data[..., None]
    if data.ndim != 3 or data.shape[1:] != (ts.shape[0], size):
        raise ValueError(
            f"observations must be observed paths of shape (M, len(ts), {size}) = "
            f"(M, {ts.shape[0]}, {size}); got {data.shape}."
        )
    if data.shape[0] < 2:
        raise ValueError(
            f"observations hold {data.shape[0]} path(s); an ensemble's variance needs at "
            "least 2 (and its moments' covariance more paths than fitted statistics)."
        )
    if not np.all(np.isfinite(data)):
        raise ValueError("observations hold NaN or inf; pass complete, finite paths.")
    if not np.all(data[:, 0] == data[0, 0]):
        raise ValueError(
            "the observed paths must share their first state: the simulated ensemble starts "
            "from it at ts[0]. Drop the first time if the paths started elsewhere before it."
        )
    return data


def _whitening(contributions: np.ndarray, paths: int) -> np.ndarray:
    r"""$L^{-1}$ with $L L^\top = \Omega = \hat S (1/M + 1/N)$, or a clear error where the
    observed paths cannot estimate $\hat S$ (too few of them, or a statistic that never
    varies)."""
    num_observed = contributions.shape[0]
    flat = contributions.reshape(num_observed, -1)
    if num_observed <= flat.shape[1]:
        raise ValueError(
            f"observations hold {num_observed} paths for {flat.shape[1]} fitted statistics; "
            "their covariance needs more paths than statistics (many more for a good "
            "estimate): observe more paths, fewer times, or fewer statistics."
        )
    omega = np.cov(flat, rowvar=False).reshape(flat.shape[1], flat.shape[1])
    omega = omega * (1 / num_observed + 1 / paths)
    try:
        cholesky = np.linalg.cholesky(omega)
    except np.linalg.LinAlgError:
        cholesky = None
    if cholesky is None or np.linalg.cond(omega) > 1e12:
        raise ValueError(
            "the observed statistics' covariance is singular: some statistic does not vary "
            "between the observed paths (e.g. a component the noise never reaches), or "
            "several move together exactly; fit fewer statistics or times."
        )
    return np.linalg.solve(cholesky, np.eye(flat.shape[1]))
