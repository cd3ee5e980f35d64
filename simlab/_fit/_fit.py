"""`fit`: parameters of a model from observations, with their uncertainty."""

import os
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

from .. import _display as display, _misc
from .._misc import (
    Integer,
    RealNumber,
    as_count,
    is_concrete,
    is_real_number,
    nan_where,
    show_progress,
    warn_at_caller,
)
from .._options import SolveOptions
from .._results import RESULTS, failure_counts, status_code, status_text
from ..integrate._sde import is_stochastic
from ..models._base import field_text
from ._loop import AbstractStepper, Carry, GradientStepper, OptimistixStepper, num_scalars, run
from ._multistart import best_carry, draw_starts, run_starts, starts_sharding
from ._noise import (
    AbstractLeastSquaresNoise,
    AbstractNoise,
    NegativeBinomial,
    Poisson,
    noise_model,
)
from ._problem import FitProblem, Layout, check_start_means, get_path, make_problem
from ._transition import check_noise_everywhere, checked_transition, first_states
from ._uncertainty import (
    covariance,
    covariance_labels,
    hessian_covariance,
    natural_values,
    residual_jacobian,
    with_natural_values,
)

METHODS = ("least_squares", "quasi_newton", "gradient")
# The normal quantile of a two-sided 95% interval: the Wald interval estimate ± Z_95 · stderr.
Z_95 = 1.959963984540054
INTERVAL_DIGITS = 4
MAX_INITIAL_STATE_ROWS = 24  # more fitted initial values (a field) show as one array
DEFAULT_MAX_STEPS = {"least_squares": 200, "quasi_newton": 500, "gradient": 2000}
# The default `(rtol, atol)` by the precision the fit computes in (bytes of the default
# float). A float32 step or loss changes by no less than its roundoff, about 1e-7 of it:
# float64's rtol of 1e-8 would stop a float32 fit only where a step comes out exactly zero.
FIT_TOLERANCES = {8: (1e-8, 1e-12), 4: (1e-5, 1e-8)}
# Built once, so that every default gradient fit reuses one compiled loop.
DEFAULT_GRADIENT_OPTIMISER = optax.adam(1e-2)


class FitResult(eqx.Module):
    """The outcome of [`simlab.fit`][].

    **Attributes:**

    - `model`: the fitted model (frozen parameters exactly as given).
    - `params`: fitted parameter name → value (natural units); a noise model's fitted
      parameters appear as `"noise.dispersion"` and so on.
    - `stderr`: fitted parameter name → standard error; `inf` where the data cannot
      identify the parameter.
    - `covariance`: covariance matrix of the fitted scalars, ordered as `covariance_labels`
      (parameters, then fitted initial states such as `"y0.prey"`, then noise parameters):
      the inverse of the observed Fisher information.
    - `y0`, `y0_stderr`: the initial state(s), in the layout they were given; the standard
      errors are `nan` unless `fit_y0=True`.
    - `loss`: the minimised objective: $\\tfrac12\\sum_i r_i^2$ for Gaussian and
      log-normal noise ($r_i$ the residuals divided by their noise scale), the negative
      log-likelihood for the others.
    - `loss_history`: the loss after each step (`nan` past `num_steps`).
    - `converged`, `num_steps`, `result`: whether the optimiser met its convergence test,
      how many steps it took, and a [`simlab.RESULTS`][] status.
    - `noise_variance`: the residual variance $\\hat\\sigma^2 = 2\\,\\mathrm{loss}/(N-p)$
      ($N$ the number of observed values, $p$ of fitted scalars; `nan` for count noise and
      where $N \\le p$).
    - `log_likelihood`: $\\log L$ at the optimum, all constants included (with a fitted
      noise scale, at its maximum-likelihood value $\\hat\\sigma^2 = 2\\,\\mathrm{loss}/N$;
      `nan`, like `aic` and `bic`, where $N \\le p$: the likelihood is then unbounded).
    - `aic`, `bic`: $2k - 2\\log L$ and $k\\log N - 2\\log L$, $k$ counting every fitted
      scalar (a fitted noise scale and noise parameters included): lower is better.
    - `num_observed`: $N$, the number of observed (not NaN) values.
    - `starts`: for a multi-start fit, every start's outcome ([`simlab.Starts`][]), else `None`.
    """

    model: Any
    params: dict[str, Any]  # an array, or a module for a module path (e.g. "grid")
    stderr: dict[str, Array]
    covariance: Array
    y0: Any
    y0_stderr: Any
    loss: Array
    loss_history: Array
    num_steps: Array
    result: RESULTS
    noise_variance: Array
    log_likelihood: Array
    aic: Array
    bic: Array
    num_observed: Array
    covariance_labels: tuple[str, ...] = eqx.field(static=True)
    problem: FitProblem = eqx.field(repr=False)
    starts: Any = None
    stepper: AbstractStepper | None = eqx.field(default=None, repr=False)
    max_steps: int = eqx.field(static=True, default=0)

    @property
    def converged(self) -> Array:
        return self.result == RESULTS.successful

    def __repr__(self) -> str:
        """A table of the estimates, their standard errors and 95% Wald intervals (estimate
        ± 1.96 standard errors), then the loss and the convergence. Under `jit` or `vmap`,
        where the values are not known, Equinox's tree view."""
        if display.is_traced(self):
            return eqx.tree_pformat(self)
        header, rows = self._estimate_rows()
        estimates = display.table(rows, title="FitResult", header=header)
        return estimates + "\n" + display.table(self._summary_rows())

    def _repr_html_(self) -> str:
        """The same table and summary as one HTML table (a notebook's view of a fit)."""
        if display.is_traced(self):
            return display.html_text(eqx.tree_pformat(self))
        header, rows = self._estimate_rows()
        rows = rows + self._summary_rows()
        return display.html_table(rows, title="FitResult", header=header)

    def plot(self, *, data_set: int = 0, member: int = 0, **kwargs: Any):
        """The figure of the fit: the observations it was fitted to as points, the fitted
        curves, the 95% confidence band of the mean and the prediction band of new
        observations (see [`simlab.plot.fit_curves`][]).

        **Arguments:**

        - `data_set`, `member`: which data set and which member of a batch of experiments
          to draw (fits to several).
        - `kwargs`: passed to [`simlab.plot.fit_curves`][] (e.g. `time_label`,
          `posterior`, `prediction_band=False`).

        **Returns:** the matplotlib `Figure` (a notebook shows it inline).

        !!! example

            ```python
            data = simlab.datasets.lynx_hare()
            result = simlab.fit(model, data.ts, data.observations, y0=data.observations[0],
                                params=["alpha", "beta", "gamma", "delta"])
            figure = result.plot(time_label=f"time ({data.time_unit})")
            ```
        """
        from ..plot._results import fit_figure

        return fit_figure(self, data_set=data_set, member=member, **kwargs)

    def _estimate_rows(self) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
        units = getattr(self.model, "parameter_units", dict)()
        batched = np.ndim(status_code(self.result)) > 0  # fits under vmap: a row per name
        rows = []
        for name, value in self.params.items():
            if name not in self.stderr:  # a module, such as a network's weights
                rows.append((name, field_text(value)))
                continue
            unit = units.get(name, "")
            shape = np.shape(value)
            if batched or shape == () or np.size(value) > display.SMALL_ARRAY:
                rows.append(_estimate_row(name, value, self.stderr[name], unit))
                continue
            for index in np.ndindex(shape):
                label = f"{name}[{','.join(map(str, index))}]"
                rows.append(_estimate_row(label, value[index], self.stderr[name][index], unit))
        rows += self._initial_state_rows()
        header = ("parameter", "estimate", "std. error", "95% interval")
        if any(len(row) > len(header) for row in rows):
            header += ("unit",)
            rows = [row + ("",) if len(row) == len(header) - 1 else row for row in rows]
        return header, rows

    def _initial_state_rows(self) -> list[tuple[str, ...]]:
        """Fitted initial states, one row per entry, labelled as in `covariance_labels`."""
        labels = [label for label in self.covariance_labels if label.startswith("y0")]
        if not labels:
            return []
        values, errors = (
            np.concatenate([np.ravel(y) for y in jax.tree_util.tree_leaves(part)])
            for part in (self.y0, self.y0_stderr)
        )
        if len(labels) != values.size or values.size > MAX_INITIAL_STATE_ROWS:
            return [_estimate_row("y0", values, errors, "")]
        return [_estimate_row(*entry, "") for entry in zip(labels, values, errors, strict=True)]

    def _summary_rows(self) -> list[tuple[str, str]]:
        codes = np.asarray(status_code(self.result))
        if codes.ndim == 0:
            text = status_text(int(codes), success="converged", failure="did not converge")
            status = [("status", text)]
        else:  # fits under vmap
            failed = int(np.sum(codes != 0))
            counted = f"{failed} of {codes.size} did not converge" if failed else "all converged"
            status = [("status", counted)] + [("", line) for line in failure_counts(codes)]
        steps = display.spread(self.num_steps)
        limit = f" (at most {self.max_steps})" if self.max_steps else ""
        rows = [
            *status,
            ("steps", steps + limit),
            ("loss", display.array(self.loss)),
            ("observed values", display.array(self.num_observed)),
        ]
        if not np.all(np.isnan(self.noise_variance)):
            rows.append(("noise variance", display.array(self.noise_variance)))
        if not np.all(np.isnan(self.aic)):
            rows.append(("AIC, BIC", f"{display.array(self.aic)}, {display.array(self.bic)}"))
        if self.starts is not None:
            redrawn = int(np.sum(np.asarray(self.starts.draws) > 1))
            again = f", {redrawn} drawn again (not simulable)" if redrawn else ""
            rows.append(
                ("starts", f"{np.size(self.starts.loss)}, best {int(self.starts.best)}{again}")
            )
        return rows

    def profile(
        self,
        name: str | Sequence[str],
        *,
        level: float = 0.95,
        num_points: Integer = 21,
        span: float = 4.0,
    ):
        r"""The profile likelihood of a fitted parameter, and its confidence interval.

        Fixes the parameter at each of `num_points` values around the estimate and
        re-optimises the others, all refits as one vmapped, compiled loop started from the
        optimum. The interval is where the profile's rise
        $\mathrm{PL}(c) - \mathrm{PL}(\hat\theta)$ stays below $\tfrac12\chi^2_1$ at
        `level`; it may be asymmetric, or open on a side where the profile never rises that
        far within the grid (`lower_open` / `upper_open`: a parameter the data do not
        bound). Works under `jax.vmap` over fits.

        **Arguments:**

        - `name`: a fitted scalar parameter, or a list of them (all refits of all of them in
          one program).
        - `level`: the confidence level.
        - `num_points`: grid points (odd: the estimate is the middle one).
        - `span`: the grid reaches this many standard errors each side of the estimate,
          measured in the parameter's unconstrained coordinate (log for positive rates).

        **Returns:** a [`simlab.Profile`][], or a dict name → `Profile` for a list.

        !!! example

            ```python
            profile = result.profile("alpha")
            profile.lower, profile.upper
            ```
        """
        from ._profile import profiles

        names = (name,) if isinstance(name, str) else tuple(name)
        found = profiles(self, names, level=level, num_points=num_points, span=span)
        return found[name] if isinstance(name, str) else found

    def predict(
        self,
        ts: ArrayLike,
        *,
        data_set: int = 0,
        member: int = 0,
        key: Any = None,
        dt0: RealNumber | None = None,
    ):
        r"""The fitted model's observed quantities at `ts`, and their standard errors.

        The standard errors come from the delta method, $\operatorname{Var} h(t) \approx
        \nabla_\theta h\, \Sigma\, \nabla_\theta h^\top$, with $\Sigma$ the covariance of the
        fit; multiply by 1.96 for a 95% band.

        **Arguments:**

        - `ts`: save times, from the data's first time (or from `t0`, or after it, when the
          fit had one).
        - `data_set`, `member`: which data set (for fits to several) and which member of a
          batch of experiments (for a stochastic model: which observed path) supplies the
          initial state.
        - `key`, `dt0`: for a fit of a stochastic model, the JAX key of the predicted path
          and its fixed step (default: the `dt0` of the fit's `simulate_options`), as
          [`simlab.simulate`][] takes them. The prediction is then the path the fitted
          model draws from `key`, and its standard errors the spread of that same path
          (the same Brownian increments) from the parameters' uncertainty alone.

        **Returns:** `(prediction, stderr)`, each of shape `(len(ts), k)`.

        !!! example

            ```python
            path, stderr = result.predict(ts, key=jax.random.key(0), dt0=0.01)
            ```
        """
        ts = jnp.asarray(ts, dtype=float)
        problem, model = self.problem, self.model
        path_settings = _path_settings(model, problem, key, dt0)
        y0s = tuple(e.y0 for e in problem.experiments)
        ts, skip = problem.prediction_times(ts, data_set)

        def predicted(theta):
            fitted_model, fitted_y0s = with_natural_values(problem, model, y0s, theta)
            return problem.predict_experiment(
                fitted_model, fitted_y0s, ts, data_set=data_set, member=member, **path_settings
            )[skip:]

        theta = natural_values(problem, model, y0s)
        # One compiled program for the values and their derivatives.
        with_values = lambda theta: (predicted(theta), predicted(theta))  # noqa: E731
        jacobian, prediction = jax.jit(jax.jacfwd(with_values, has_aux=True))(theta)
        cov = self.covariance[: theta.size, : theta.size]
        variance = jnp.einsum("tkp,pq,tkq->tk", jacobian, cov, jacobian)
        return prediction, jnp.sqrt(variance)


def _path_settings(model: Any, problem: FitProblem, key: Any, dt0: Any) -> dict[str, Any]:
    """The `key` and fixed step `dt0` of a predicted path of a stochastic model (none for a
    deterministic one), or a clear error naming the one missing or misplaced."""
    name = type(model).__name__
    if not is_stochastic(model):
        if key is not None or dt0 is not None:
            raise ValueError(
                f"key and dt0 are for fits of stochastic models; {name} is deterministic: "
                "leave them out (the fit's simulate_options set its solve)."
            )
        return {}
    if key is None:
        raise ValueError(
            f"{name} is stochastic: predict draws one path of the fitted model, so pass "
            "key=jax.random.key(seed) (the same key gives the same Brownian path)."
        )
    dt0 = problem.simulate_options.dt0 if dt0 is None else dt0
    if dt0 is None:
        raise ValueError(
            f"{name} is stochastic and takes fixed steps: pass dt0=... to predict (or "
            "simulate_options=dict(dt0=...) to fit)."
        )
    return {"key": key, "dt0": dt0}


def fit(
    model: Any,
    ts: ArrayLike | Sequence[Any],  # times, one array per data set, or `Series`
    observations: ArrayLike | Sequence[Any] | None = None,  # left out with `Series`
    *,
    y0: ArrayLike | Sequence[ArrayLike] | None = None,
    params: Sequence[str],
    observe: Callable | str | Sequence[str] | None = None,
    fit_y0: bool = False,
    t0: ArrayLike | Sequence[ArrayLike] | None = None,
    noise: str | AbstractNoise = "gaussian",
    noise_scale: ArrayLike | Sequence[ArrayLike] | None = None,
    fit_noise: bool | None = None,
    bounds: dict[str, tuple[float, float]] | None = None,
    starts: Integer | None = None,
    key: Any = None,
    method: str | None = None,
    optimiser: Any = None,
    max_steps: Integer | None = None,
    rtol: RealNumber | None = None,
    atol: RealNumber | None = None,
    simulate_options: SolveOptions | dict[str, Any] | None = None,
    devices: Sequence[jax.Device] | None = None,
    progress: bool | None = None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: Integer = 100,
    throw: bool = True,
    transition: str | None = None,
    covariance: bool = True,
) -> FitResult:
    r"""Fits model parameters (and optionally initial states) to observations by maximum
    likelihood.

    Minimises the negative log-likelihood $-\sum_{e,t,j} \log p(\text{obs}_{etj} \mid
    h_j(y_e(t)))$ over the observed values: $y_e$ the simulated trajectory of experiment
    $e$, $h$ the observation map, $p$ the noise model. For Gaussian noise that is least
    squares, $\tfrac12 \sum r_{etj}^2$ with $r_{etj} = \big(h_j(y_e(t)) -
    \text{obs}_{etj}\big) / s_{etj}$, $s$ the noise scale.
    Parameters a model declares positive or bounded are optimised through a transform
    ($\theta = a + e^u$, or $a + (b-a)\,\sigma(u)$), so every iterate is a valid model;
    parameters not named in `params` stay exactly as they are. At the optimum the
    covariance is the inverse observed Fisher information in natural units:
    $\sigma^2 (J^\top J)^{-1}$, $J = \partial r/\partial \theta$, for Gaussian and
    log-normal noise (exact for them), with $\sigma^2 = 1$ for a known noise scale and
    $\hat\sigma^2 = \sum r^2 / (N - p)$ for a fitted one; the inverse Hessian of the
    negative log-likelihood for count noise. Parameters the data cannot identify get an
    infinite standard error and a warning naming them.

    A trial point whose simulation fails (too many steps, a non-finite state) is rejected,
    never turned into NaN. `jax.vmap` over data sets (e.g. noise replicates) works and
    compiles once; pass `throw=False` there and read `.result`.

    **Arguments:**

    - `model`: a [`simlab.models.AbstractModel`][] (or any `eqx.Module` vector field)
      holding the starting values.
    - `ts`: the observation times, shape `(T,)`; the simulation starts at `ts[0]` unless
      `t0` is given. A list of arrays fits several data sets that share the parameters.
    - `observations`: shape `(T, k)`, or `(batch, T, k)` for several experiments sharing
      `ts` (a list of such for several data sets). NaN marks a value that was not
      observed: it is left out of the likelihood, the Jacobian and the degrees of freedom,
      so quantities measured at different times share one `ts` with NaN elsewhere.
      Alternatively pass, in place of `ts`, one [`simlab.Series`][] per observed quantity
      (its own times and values, in the order of `observe`; a list of such lists for
      several data sets) and leave `observations` out: they are merged onto the union of
      their times, NaN elsewhere, and `y0` is the state at the earliest time (or `t0`).
    - `y0`: the initial state at the start (`t0`, else `ts[0]`), shape `model.state_shape`
      (or `(batch, ...)`). Left out for a stochastic model (see `transition`).
    - `params`: names of the parameters to fit, e.g. `["alpha", "beta"]`. Nested ones are
      named by path (`"physics.alpha"`); a name that points to a module (e.g. a hybrid
      model's `"correction"` network) fits all its floating-point arrays. Empty (`[]`)
      with `fit_y0=True` fits the initial state alone, e.g. a whole field (4D-Var).
    - `observe`: what is measured: `None` (the whole state), names of state components
      (`["I"]`), or a function `observe(y) -> (k,)` of one state.
    - `fit_y0`: also fit the initial state(s), starting from `y0`.
    - `t0`: the time the simulation starts (and `y0` holds), before `ts[0]`; default `ts[0]`.
    - `noise`: the noise model: `"gaussian"` (additive), `"lognormal"` (multiplicative;
      positive data), `"poisson"` or `"negative_binomial"` (counts; the latter fits a
      dispersion), or a [`simlab.AbstractNoise`][] of your own.
    - `noise_scale`: the standard deviation of each observation (scalar, per quantity
      `(k,)`, or per point; of $\log y$ for log-normal noise): a point's weight is
      `1 / noise_scale²`.
    - `fit_noise`: estimate a common factor $\sigma$ of the noise scale (Gaussian and
      log-normal). Default: `True` when `noise_scale` is not given, else `False` (known).
    - `bounds`: name → `(lower, upper)`: the range a parameter is searched in (its
      transform maps onto it) and, with `starts`, drawn from. Must lie inside the declared
      range and hold the starting value.
    - `starts`: run this many fits from points drawn by Latin hypercube sampling within
      `bounds` (log-uniform where the lower bound is positive) as one vmapped loop, and
      return the best; `result.starts` keeps every start. Needs `bounds` for every
      parameter (or finite declared ranges) and a `key`.
    - `key`: a `jax.random` key for drawing the starts.
    - `method`: `"least_squares"` (an Optimistix least-squares solver, Levenberg–Marquardt
      by default; Gaussian and log-normal noise, few parameters), `"quasi_newton"` (an
      Optimistix minimiser of the negative log-likelihood, BFGS by default; any noise), or
      `"gradient"` (an Optax optimiser, Adam with learning rate 0.01 by default; many
      parameters, e.g. neural networks). Default: least squares where the noise allows,
      else quasi-Newton.
    - `optimiser`: an `optimistix.AbstractLeastSquaresSolver`, an
      `optimistix.AbstractMinimiser` or an `optax.GradientTransformation` matching `method`.
    - `max_steps`: the most optimiser steps (default 200 for least squares, 500 for
      quasi-Newton, 2000 for gradient descent).
    - `rtol`, `atol`: convergence tolerances (of the default Levenberg–Marquardt solver;
      for gradient descent, the least relative/absolute improvement of the best loss
      that resets its 50-step patience). Default `1e-8` and `1e-12` in float64, `1e-5`
      and `1e-8` in float32 (an accelerator's precision), whose roundoff is about `1e-7`.
    - `simulate_options`: the solve settings, a [`simlab.SolveOptions`][] or a dict of
      [`simlab.simulate`][] keywords (`solver`, `rtol`, `atol`, `max_steps`, `dt0`, ...);
      `fit` chooses the adjoint itself. With fixed steps (`adaptive=False` and a `dt0`)
      and `integrator="kernel"`, or `"auto"` on a TPU (where it may take the kernel), the
      fit's compiled loop holds concrete `ts` as constants, so the kernel knows its step
      count; a fit to other times then compiles anew.
    - `devices`: run data-parallel: the batch axis of the experiments is sharded over these
      devices (e.g. `jax.devices()`) with `NamedSharding`, and `jax.jit` partitions the fit.
      Each batch size must be divisible by the number of devices.
    - `progress`: show a progress bar: `True` always, `False` never, `None` (the default)
      when the process is interactive (stderr is a terminal, or a Jupyter kernel).
    - `checkpoint`: a `.npz` path: the loop's state is saved there every
      `checkpoint_every` steps, and a later call with the same arguments resumes from it.
      A checkpoint of another fit is refused, naming what differs; the model and `observe`
      count as the same only if they compute the same (a digest of their jaxprs, so a
      class or function redefined under its name is a different one).
    - `throw`: raise if the fit does not converge; with `False` read `.result`. Under
      `jit` or `vmap` on a GPU or TPU, which cannot raise inside a compiled program, the
      loss of a fit that did not converge is NaN instead.
    - `covariance`: with `False`, skip the covariance and standard errors (left NaN). They
      take one Jacobian (or Hessian) at the optimum: a pass through the solves per fitted
      scalar, most of the time of a fit of a whole field (an initial vorticity of 4D-Var).
    - `transition`: for a stochastic model ([`simlab.models.AbstractSDEModel`][]), whose
      `observations` are observed paths of the whole state (`(T, k)`, or `(batch, T, k)`
      for independent paths sharing `ts`): the transition density whose product along
      each path, conditional on its first state, is the likelihood. `"exact"` (the
      default where the model has a `transition_log_density`, e.g. Ornstein–Uhlenbeck
      and geometric Brownian motion) or `"euler_maruyama"` (the Gaussian of one
      Euler–Maruyama step over each interval: biased by O(interval) in the drift, so
      for closely spaced observations). Drift and diffusion parameters are fitted
      together by quasi-Newton; standard errors and profiles come from the Hessian of
      $-\log L$. Leave out `y0`, `observe`, `fit_y0`, `t0`, `noise`, `noise_scale` and
      `fit_noise`: the model's own noise is the noise.

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
    if is_stochastic(model):
        transition, method = _checked_path_fit(
            model,
            ts,
            observations,
            transition,
            method,
            y0=y0,
            observe=observe,
            fit_y0=fit_y0,
            t0=t0,
            noise=noise,
            noise_scale=noise_scale,
            fit_noise=fit_noise,
        )
        y0, fit_noise = first_states(observations), False
    elif transition is not None or y0 is None:
        raise ValueError(
            f"{type(model).__name__} is deterministic: pass y0 (its initial state), and leave "
            "transition out (it is for the observed paths of stochastic models)."
        )
    noise = noise_model(noise)
    method, stepper, max_steps = _checked_settings(
        method, optimiser, max_steps, rtol, atol, checkpoint_every, noise
    )
    fit_noise = _checked_fit_noise(fit_noise, noise, noise_scale)
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
        t0=t0,
        noise=noise,
        fit_noise=fit_noise,
        bounds=bounds,
        transition=transition,
    )
    return fit_problem(
        problem,
        layout,
        stepper,
        max_steps,
        starts=starts,
        key=key,
        devices=devices,
        progress=progress,
        checkpoint=checkpoint,
        checkpoint_every=checkpoint_every,
        throw=throw,
        covariance=covariance,
    )


def fit_problem(
    problem: FitProblem,
    layout: Layout,
    stepper: AbstractStepper,
    max_steps: int,
    *,
    starts: Integer | dict[str, Array] | None = None,
    key: Any = None,
    devices: Sequence[jax.Device] | None = None,
    progress: bool | None = None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: Integer = 100,
    throw: bool = True,
    covariance: bool = True,
) -> FitResult:
    """Runs the optimiser on a validated problem and gathers the `FitResult` (with the
    covariance at the optimum unless `covariance=False`)."""
    arrays = jtu.tree_leaves(eqx.filter(problem, eqx.is_array))
    traced = not all(is_concrete(leaf) for leaf in arrays)
    if traced and (checkpoint is not None or devices is not None):
        raise ValueError(
            "checkpoint= and devices= need concrete data; they cannot be used inside "
            "jax.jit or jax.vmap."
        )
    if not traced and starts is None:
        check_start_means(problem)
    if starts is not None:
        carry, starts = _multi_start(
            problem, stepper, max_steps, starts, key, devices, checkpoint, traced
        )
    else:
        if devices is not None:
            problem = _sharded(problem, list(devices))
        show = show_progress(progress) and not traced
        carry = run(
            problem,
            stepper,
            max_steps=max_steps,
            traced=traced,
            progress=show,
            checkpoint=checkpoint,
            checkpoint_every=checkpoint_every,
        )
    result, unidentifiable = _result(problem, carry, layout, starts, stepper, max_steps, covariance)
    if not traced:
        _warn_unidentifiable(result.covariance_labels, np.asarray(unidentifiable))
    if throw:
        return _raise_if_failed(result, traced)
    return result


def _checked_path_fit(model, ts, observations, transition, method, **unused) -> tuple[str, str]:
    """The transition density and method of a fit to observed paths, after refusing the
    arguments that only fits of deterministic models take (`unused`, by name)."""
    given = [
        name
        for name, value in unused.items()
        if value is not None
        and value is not False
        and not (name == "noise" and value == "gaussian")
    ]
    if given:
        raise ValueError(
            f"{type(model).__name__} is stochastic: fit maximises the likelihood of its "
            f"observed paths (each conditional on its first state, the model's own noise "
            f"being the noise), so leave {given} out."
        )
    if method == "least_squares":
        raise ValueError(
            "the transition likelihood of a stochastic model is not a sum of squares: use "
            "method='quasi_newton' (the default) or 'gradient'."
        )
    paths = [observations] if not isinstance(observations, list | tuple) else observations
    for index, data in enumerate(paths):
        if is_concrete(data) and np.any(~np.isfinite(np.asarray(data))):
            raise ValueError(
                f"observations (data set {index}) of a stochastic model must be complete "
                "paths: the transition likelihood needs every component at every time; they "
                "hold NaN or inf."
            )
    state_size = int(np.prod(model.state_shape))
    transition = checked_transition(model, transition, state_size)
    if transition == "euler_maruyama":
        check_noise_everywhere(model, ts, observations)
    return transition, method or "quasi_newton"


def _checked_fit_noise(fit_noise, noise: AbstractNoise, noise_scale) -> bool:
    least_squares = isinstance(noise, AbstractLeastSquaresNoise)
    if noise_scale is not None and isinstance(noise, Poisson | NegativeBinomial):
        raise ValueError(
            f"{type(noise).__name__} noise takes no noise_scale: its variance follows from the "
            "mean (and the fitted dispersion); leave noise_scale out, or use noise='gaussian' "
            "or 'lognormal' for data with a known scale."
        )
    if fit_noise is None:
        return least_squares and noise_scale is None
    if fit_noise and not least_squares:
        raise ValueError(
            f"fit_noise=True fits the scale of Gaussian or log-normal noise; "
            f"{type(noise).__name__} has none (a negative binomial fits its dispersion anyway)."
        )
    return bool(fit_noise)


def _checked_settings(method, optimiser, max_steps, rtol, atol, checkpoint_every, noise):
    least_squares = isinstance(noise, AbstractLeastSquaresNoise)
    if method is None:
        method = "least_squares" if least_squares else "quasi_newton"
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {list(METHODS)}.")
    if method == "least_squares" and not least_squares:
        raise ValueError(
            f"method='least_squares' needs Gaussian or log-normal noise; for "
            f"{type(noise).__name__} use method='quasi_newton' (the default) or 'gradient'."
        )
    default_rtol, default_atol = FIT_TOLERANCES[jnp.finfo(jnp.result_type(float)).bits // 8]
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    for name, value in (("rtol", rtol), ("atol", atol)):
        if not is_real_number(value) or not value >= 0:
            raise ValueError(f"{name} must be a non-negative number; got {value!r}.")
    rtol, atol = float(rtol), float(atol)  # NumPy scalars would not promote with the data
    max_steps = as_count("max_steps", DEFAULT_MAX_STEPS[method] if max_steps is None else max_steps)
    as_count("checkpoint_every", checkpoint_every)
    if method == "gradient":
        optimiser = DEFAULT_GRADIENT_OPTIMISER if optimiser is None else optimiser
        if not isinstance(optimiser, optax.GradientTransformation):
            raise TypeError(
                "method='gradient' takes an optax.GradientTransformation as optimiser, e.g. "
                f"optax.adam(1e-2); got {type(optimiser).__name__}."
            )
        return method, GradientStepper(optimiser, float(rtol), float(atol)), max_steps
    if method == "quasi_newton":
        optimiser = optx.BFGS(rtol=rtol, atol=atol) if optimiser is None else optimiser
        if not isinstance(optimiser, optx.AbstractMinimiser):
            raise TypeError(
                "method='quasi_newton' takes an optimistix minimiser as optimiser, e.g. "
                f"optimistix.BFGS(rtol=1e-8, atol=1e-12); got {type(optimiser).__name__}."
            )
        return method, OptimistixStepper(optimiser, float(rtol), float(atol)), max_steps
    optimiser = optx.LevenbergMarquardt(rtol=rtol, atol=atol) if optimiser is None else optimiser
    if not isinstance(optimiser, optx.AbstractLeastSquaresSolver):
        raise TypeError(
            "method='least_squares' takes an optimistix least-squares solver as optimiser, "
            f"e.g. optimistix.LevenbergMarquardt(rtol=1e-8, atol=1e-12); got "
            f"{type(optimiser).__name__}. For an optax optimiser use method='gradient'."
        )
    return method, OptimistixStepper(optimiser, float(rtol), float(atol)), max_steps


def _multi_start(problem, stepper, max_steps, starts, key, devices, checkpoint, traced):
    """Runs the fit from `starts` drawn points, or from the given points (a dict of each
    fitted path's values, one per start); the best start's carry and all starts."""
    if checkpoint is not None:
        raise ValueError("checkpoint= is not supported with starts=; run without a checkpoint.")
    if isinstance(starts, dict):
        initial = {path: jnp.asarray(values) for path, values in starts.items()}
        num_starts = len(next(iter(initial.values())))
        key = None  # given starts are kept, not drawn again
    else:
        num_starts = as_count("starts", starts)
        if key is None:
            raise ValueError("starts= draws random starting points: pass key=jax.random.key(0).")
        if not problem.array_paths:
            raise ValueError("starts= draws parameter values; name at least one array in params.")
        initial = draw_starts(problem, key, num_starts)
    if devices is not None:
        devices = list(devices)
        if num_starts % len(devices):
            raise ValueError(
                f"starts={num_starts} is not divisible by {len(devices)} devices; pass a multiple."
            )
        initial = jax.device_put(initial, starts_sharding(devices))
    carries, starts = run_starts(
        problem, stepper, max_steps, initial, key=key, traced=traced, devices=devices
    )
    return best_carry(carries, starts.best), starts


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
                observed=jax.device_put(experiment.observed, batch_sharding),
                skip=experiment.skip,
                concrete_ts=experiment.concrete_ts,
            )
        )
    model = jtu.tree_map(
        lambda x: jax.device_put(x, replicated) if eqx.is_array(x) else x, problem.model
    )
    return eqx.tree_at(lambda p: (p.model, p.experiments), problem, (model, tuple(experiments)))


@eqx.filter_jit
def _finish(problem: FitProblem, carry: Carry, num_fitted: int, with_covariance: bool):
    """The fitted model, its likelihood, information criteria and covariance (NaN without
    `with_covariance`)."""
    model, y0s = problem.build(carry.best_u)
    noise = problem.noise_at(carry.best_u)
    num_observed = problem.num_observed()
    dof = num_observed - num_fitted  # an integer count: cast before dividing floats by it
    fits_scalars = bool(problem.array_paths or problem.fit_y0 or problem.noise_paths)
    has_scalars = fits_scalars and with_covariance
    if problem.is_least_squares:
        # One pass through the solves gives the residuals, the likelihood and J.
        if has_scalars:
            jacobian, predictions = residual_jacobian(problem, model, y0s)
        else:
            predictions = problem.predictions_at(model, y0s, "forward")
        residuals, solved = problem.residuals_from(predictions)
        loss = 0.5 * jnp.sum(residuals**2)
        noise_variance = jnp.where(
            dof > 0, 2 * loss / jnp.maximum(dof, 1).astype(loss.dtype), jnp.nan
        )
        # A fitted noise scale enters the likelihood at its maximum, 2·loss/N.
        factor = (
            jnp.sqrt(2 * loss / jnp.asarray(num_observed).astype(loss.dtype))
            if problem.fit_noise
            else 1.0
        )
        nll, _ = problem.negative_log_likelihood_from(predictions, noise, factor)
        if problem.fit_noise:  # with no residual left, σ̂ → 0 and the likelihood is unbounded
            nll = jnp.where(dof > 0, nll, jnp.nan)
        sigma2 = noise_variance if problem.fit_noise else jnp.ones(())
        if has_scalars:
            cov, unidentifiable = covariance(jacobian, sigma2)
    else:
        if has_scalars:  # the Hessian's pass through the solves gives the likelihood too
            cov, unidentifiable, (loss, solved) = hessian_covariance(problem, model, y0s, noise)
        else:
            loss, solved = problem.negative_log_likelihood_at(model, y0s, noise, "forward")
        nll, noise_variance = loss, jnp.full((), jnp.nan)
    if not fits_scalars:
        cov, unidentifiable = jnp.zeros((0, 0)), jnp.zeros((0,), bool)
    elif not with_covariance:
        cov = jnp.full((num_fitted, num_fitted), jnp.nan, loss.dtype)
        unidentifiable = jnp.zeros((num_fitted,), bool)
    num_estimated = num_fitted + int(problem.fit_noise)
    criteria = {
        "log_likelihood": -nll,
        "aic": 2 * num_estimated + 2 * nll,
        "bic": num_estimated * jnp.log(num_observed) + 2 * nll,
        "num_observed": num_observed,
    }
    return model, y0s, noise, loss, solved, cov, unidentifiable, noise_variance, criteria


def _result(
    problem, carry: Carry, layout: Layout, starts, stepper, max_steps, with_covariance: bool
) -> tuple[FitResult, Array]:
    num_fitted = num_scalars(carry.best_u)
    model, y0s, noise, loss, solved, cov, unidentifiable, noise_variance, criteria = _finish(
        problem, carry, num_fitted, with_covariance
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
    rest = stderr[offset:]
    if problem.fit_y0:
        y0_errors = []
        for y0 in y0s:
            y0_errors.append(rest[: y0.size].reshape(y0.shape))
            rest = rest[y0.size :]
    else:
        y0_errors = [jnp.full_like(y0, jnp.nan) for y0 in y0s]
    for index, path in enumerate(problem.noise_paths):
        params[f"noise.{path}"] = getattr(noise, path)
        errors[f"noise.{path}"] = rest[index]
    experiments = tuple(
        eqx.tree_at(lambda e: e.y0, e, y) for e, y in zip(problem.experiments, y0s, strict=True)
    )
    fitted = eqx.tree_at(
        lambda p: (p.model, p.experiments, p.noise), problem, (model, experiments, noise)
    )
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
        **criteria,
        covariance_labels=labels,
        problem=fitted,
        starts=starts,
        stepper=stepper,
        max_steps=max_steps,
    ), unidentifiable


def _estimate_row(label: str, value: Any, error: Any, unit: str) -> tuple[str, ...]:
    """A row of the estimates table: the estimate, its standard error, its 95% Wald interval
    (a scalar with a finite standard error only) and the unit, if any."""
    interval = ""
    if np.ndim(value) == 0 and np.ndim(error) == 0:
        half_width = Z_95 * float(error)
        if np.isinf(half_width):
            interval = "not identified"
        elif np.isfinite(half_width):
            low, high = float(value) - half_width, float(value) + half_width
            interval = (
                f"{display.number(low, INTERVAL_DIGITS)} to {display.number(high, INTERVAL_DIGITS)}"
            )
    row = (label, display.array(value), display.array(error), interval)
    return (*row, unit) if unit else row


def _in_layout(per_set: Sequence[Array], layout: Layout):
    shaped = [y if batched else y[0] for y, batched in zip(per_set, layout.batched, strict=True)]
    return list(shaped) if layout.is_list else shaped[0]


def _warn_unidentifiable(labels: tuple[str, ...], unidentifiable: np.ndarray) -> None:
    names = [label for label, flag in zip(labels, unidentifiable, strict=True) if flag]
    if names:
        warn_at_caller(
            f"the data cannot identify {names}: the fit's Jacobian is (nearly) singular along "
            "a direction combining them, so their standard errors are reported as inf. Fix "
            "some of them (leave them out of params) or add data that separates them.",
            UnidentifiableWarning,
        )


class UnidentifiableWarning(UserWarning):
    """Some fitted parameters cannot be determined from the data."""


def _raise_if_failed(result: FitResult, traced: bool) -> FitResult:
    """Raises for a fit that did not converge: on the host with known results; inside the
    compiled program under `jit`/`vmap` where checks may raise there, else (GPU, TPU) as a
    NaN loss beside the status."""
    failed = result.result != RESULTS.successful
    if traced and not _misc.checks_raise_in_program():
        return eqx.tree_at(lambda r: r.loss, result, nan_where(failed, result.loss))
    if traced:
        return eqx.tree_at(lambda r: r.loss, result, result.result.error_if(result.loss, failed))
    if bool(failed):
        raise RuntimeError(
            f"the fit did not converge after {int(result.num_steps)} steps: "
            f"{RESULTS[result.result]} (loss {float(result.loss):.6g}). Raise max_steps, "
            "start closer to the optimum, or pass throw=False to inspect the result."
        )
    return result
