r"""`sample`: the Bayesian posterior of a fit's parameters, by BlackJAX's NUTS.

The posterior is $p(\theta \mid y) \propto L(y \mid \theta)\,\pi(\theta)$, with the fit's
likelihood $L$ (its noise model, missing values left out) and priors $\pi$. NUTS runs in
the fit's unconstrained coordinates $u$ ($\theta = g(u)$), where the density gains the
Jacobian $|g'(u)|$, so every draw is a valid model.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.flatten_util
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array

from ._fit._fit import FitResult
from ._fit._problem import FitProblem, get_path
from ._fit._uncertainty import natural_values
from ._misc import Integer, as_count, warn_at_caller

# The fraction of transitions that may run into a point of zero density before `sample`
# warns: past it, the region they ran into holds posterior mass the draws are missing.
NEGLIGIBLE_REJECTED = 0.01


class Posterior(eqx.Module):
    """Posterior draws from [`simlab.sample`][].

    **Attributes:**

    - `samples`: name → draws of shape `(num_chains, num_samples)`, one entry per sampled
      scalar, named as the fit's `covariance_labels` (plus `"noise.scale"`, the factor of
      a fitted Gaussian noise scale).
    - `log_density`: the unnormalised log posterior of each draw.
    - `divergent`: whether each transition diverged (a sign of a badly scaled posterior).
    - `acceptance_rate`: NUTS's mean acceptance probability of each transition.
    - `rejected`: whether each transition's trajectory ran into a point of zero posterior
      density: the model gave NaN there, its solve failed, or a prior excludes it. The
      chains never cross such a point, so the draws end before it (`None` when not
      recorded).
    """

    samples: dict[str, Array]
    log_density: Array
    divergent: Array
    acceptance_rate: Array
    rejected: Array | None = None

    def plot(self, **kwargs: Any):
        """The figure of the posterior, as `simlab run` draws it: a corner plot, each
        sampled scalar's histogram on the diagonal and each pair's draws below it.

        **Arguments:**

        - `kwargs`: passed to [`simlab.plot.corner`][] (e.g. `names=["alpha", "beta"]`).

        **Returns:** the matplotlib `Figure` (a notebook shows it inline).

        !!! example

            ```python
            posterior = simlab.sample(result, key=jax.random.key(0))
            figure = posterior.plot()
            ```
        """
        from .plot._likelihood import corner

        return corner(self, **kwargs)

    def flat_samples(self) -> dict[str, np.ndarray]:
        """Each name's draws with the chains pooled, as NumPy arrays."""
        return {name: np.asarray(draws).reshape(-1) for name, draws in self.samples.items()}

    def to_arviz(self):
        """An `arviz.InferenceData` holding the draws (and divergences as sample stats)."""
        import arviz

        return arviz.from_dict(
            posterior={name: np.asarray(draws) for name, draws in self.samples.items()},
            sample_stats={
                "diverging": np.asarray(self.divergent),
                "lp": np.asarray(self.log_density),
                "acceptance_rate": np.asarray(self.acceptance_rate),
            },
        )

    def summary(self, *, hdi_prob: float = 0.95):
        """ArviZ's table: mean, standard deviation, highest-density interval at `hdi_prob`,
        Monte Carlo errors, effective sample sizes (bulk and tail) and R-hat, per parameter."""
        import arviz

        return arviz.summary(self.to_arviz(), hdi_prob=hdi_prob)


def sample(
    result: FitResult,
    *,
    priors: dict[str, Any] | None = None,
    num_samples: Integer = 1000,
    num_warmup: Integer = 500,
    num_chains: Integer = 4,
    key: Any,
    target_acceptance: float = 0.8,
) -> Posterior:
    r"""Draws from the posterior of a fit's parameters with the No-U-Turn Sampler.

    Runs BlackJAX's NUTS with Stan's window adaptation of the step size and a dense mass
    matrix, which starts from the fit's covariance (in unconstrained coordinates); every
    chain starts near the optimum (a draw from the fit's normal approximation, shrunk by
    10). The chains run vmapped, in one compiled program. Gradients are the solve's
    default derivatives ([`simlab.simulate`][]'s `adjoint=None`): on the lean loop, forward
    sensitivities carried along the steps when at most 16 scalars are sampled (each
    gradient then costs a few solves' worth, not a reverse pass through stored steps),
    reverse mode otherwise.

    Default priors: uniform over each parameter's range (the fit's `bounds=`, else its
    declared range), which must then be finite; flat for fitted initial states; flat in
    the logarithm for noise parameters and a fitted noise scale (Jeffreys' prior for a
    scale).

    **Arguments:**

    - `result`: a [`simlab.FitResult`][]; its likelihood, parameters and optimum are used.
    - `priors`: name → prior, for any sampled scalar (names as in
      `result.covariance_labels`): a pair `(lower, upper)` for a uniform prior (inside the
      parameter's range), or a function `log_density(value)` of the natural value, e.g.
      `lambda k: jax.scipy.stats.norm.logpdf(k, 1.0, 0.5)`.
    - `num_samples`, `num_warmup`: draws kept per chain, and adaptation steps before them.
    - `num_chains`: independent chains (R-hat compares them).
    - `key`: a `jax.random` key.
    - `target_acceptance`: the mean acceptance probability the step size is tuned for.

    **Returns:** a [`simlab.Posterior`][].

    !!! example

        ```python
        posterior = simlab.sample(result, num_samples=500, key=jax.random.key(0))
        posterior.summary()
        ```
    """
    num_samples = as_count("num_samples", num_samples)
    num_warmup = as_count("num_warmup", num_warmup)
    num_chains = as_count("num_chains", num_chains)
    if key is None:
        raise ValueError("sample draws random numbers: pass key=jax.random.key(0).")
    if not isinstance(target_acceptance, int | float) or not 0 < target_acceptance < 1:
        raise ValueError(
            "target_acceptance is the mean acceptance probability the step size is tuned for, "
            f"strictly between 0 and 1 (0.8 by default; 0.9-0.99 for hard posteriors); got "
            f"{target_acceptance!r}."
        )
    problem, priors = _with_prior_ranges(result, dict(priors or {}))
    labels = result.covariance_labels + (("noise.scale",) if _fits_scale(problem) else ())
    _check_priors(problem, labels, priors)
    density = _LogPosterior(problem=problem, priors=tuple(priors.items()), labels=labels)
    optimum = density.optimum(result)
    raveled, unravel_raveled = jax.flatten_util.ravel_pytree(optimum)
    # The sampler's coordinates are ordered as `labels` (then any unlabelled leaves), the
    # order of the fit's covariance, which is the starting mass matrix.
    order = _label_order(density, unravel_raveled, raveled)
    flat = raveled[order]
    unravel = jax.tree_util.Partial(_unravel_ordered, unravel_raveled, np.argsort(order))
    scale = _unconstrained_covariance(result, problem, flat.size, len(labels))
    # The log density must be finite where the chains start: report a bad prior here.
    start_density = float(density(unravel, flat))
    if not np.isfinite(start_density):
        raise ValueError(
            "the log posterior is not finite at the fit's optimum: a prior gives it zero "
            "density; pass priors that cover the fitted values."
        )
    logdensity = jax.tree_util.Partial(_evaluate, density, unravel)
    start_key, chain_key = jr.split(key)
    # Near the optimum: the fit's normal approximation, shrunk tenfold.
    starts = (
        flat[None]
        + 0.1 * jr.normal(start_key, (num_chains, flat.size)) @ jnp.linalg.cholesky(scale).T
    )
    draws = _chains(
        logdensity,
        starts,
        scale,
        jr.split(chain_key, num_chains),
        num_warmup,
        num_samples,
        float(target_acceptance),
    )
    positions, log_density, divergent, acceptance, rejected = draws
    natural = jax.vmap(jax.vmap(lambda x: density.natural(unravel(x))))(positions)
    samples = {label: natural[..., i] for i, label in enumerate(labels)}
    _warn_if_rejected(np.asarray(rejected))
    return Posterior(
        samples=samples,
        log_density=log_density,
        divergent=divergent,
        acceptance_rate=acceptance,
        rejected=rejected,
    )


class RejectedProposalsWarning(UserWarning):
    """Sampling often ran into parameter values where the posterior density is zero."""


def _warn_if_rejected(rejected: np.ndarray) -> None:
    if rejected.mean() > NEGLIGIBLE_REJECTED:
        warn_at_caller(
            f"{int(rejected.sum())} of {rejected.size} transitions ran into parameter values "
            "where the log posterior is not finite (the model gave NaN, its solve failed, or a "
            "prior excludes them): the draws stop short of them, so the posterior is cut off "
            "there. Check the model over the range the chains reach (Posterior.rejected marks "
            "the transitions), or give priors that exclude the invalid region.",
            RejectedProposalsWarning,
        )


def _fits_scale(problem: FitProblem) -> bool:
    return problem.is_least_squares and problem.fit_noise


def _with_prior_ranges(result: FitResult, priors: dict) -> tuple[FitProblem, dict]:
    """The problem with uniform priors' ranges as its transforms; the other priors."""
    problem = result.problem
    bounds = dict((path, (lower, upper)) for path, lower, upper in problem.bounds)
    rest = {}
    for name, prior in priors.items():
        if isinstance(prior, tuple | list):
            if name not in problem.array_paths:
                raise ValueError(
                    f"a uniform prior (lower, upper) is for a fitted parameter; {name!r} is not "
                    f"one of {list(problem.array_paths)}. Give a log-density function instead."
                )
            try:
                lower, upper = (float(v) for v in prior)
            except (TypeError, ValueError):
                raise ValueError(
                    f"a uniform prior is a pair (lower, upper) of numbers; got {prior!r} for "
                    f"{name!r}."
                ) from None
            if not lower < upper:
                raise ValueError(
                    f"the prior ({lower:g}, {upper:g}) of {name!r} must have lower < upper."
                )
            declared = problem.transform(name)
            if not (declared.lower <= lower < upper <= declared.upper):
                raise ValueError(
                    f"the prior ({lower:g}, {upper:g}) of {name!r} reaches outside its range "
                    f"{declared.describe()}; give a prior inside the parameter's bounds."
                )
            value = np.asarray(get_path(problem.model, name))
            if not np.all((value > lower) & (value < upper)):
                raise ValueError(
                    f"the fitted {name!r} ({value}) lies outside its prior ({lower:g}, "
                    f"{upper:g}); widen the prior."
                )
            bounds[name] = (lower, upper)
        else:
            rest[name] = prior
    checked = tuple((path, *pair) for path, pair in bounds.items())
    return dataclasses.replace(problem, bounds=checked), rest


def _check_priors(problem: FitProblem, labels, priors: dict) -> None:
    for name, prior in priors.items():
        if name not in labels:
            raise ValueError(
                f"a prior for {name!r}, which is not sampled; sampled: {list(labels)}."
            )
        if not callable(prior):
            raise TypeError(
                f"the prior of {name!r} must be (lower, upper) or a function log_density(value); "
                f"got {type(prior).__name__}."
            )
    for path in problem.array_paths:
        transform = problem.transform(path)
        labelled = [label for label in labels if label == path or label.startswith(path + "[")]
        if any(label in priors for label in labelled):
            continue
        if not (np.isfinite(transform.lower) and np.isfinite(transform.upper)):
            raise ValueError(
                f"{path!r} has range {transform.describe()}, so it has no default (uniform) "
                f"prior; pass priors={{{path!r}: (lower, upper)}} or a log-density function."
            )


class _LogPosterior(eqx.Module):
    """$\\log L(g(u)) + \\log\\pi(g(u)) + \\log|g'(u)|$ at an unconstrained position."""

    problem: FitProblem
    priors: tuple[tuple[str, Callable], ...] = eqx.field(static=True)
    labels: tuple[str, ...] = eqx.field(static=True)

    def optimum(self, result: FitResult) -> dict[str, Any]:
        position = {"u": self.problem.initial_unconstrained()}
        if _fits_scale(self.problem):
            position["log_scale"] = 0.5 * jnp.log(
                2 * result.loss / result.num_observed.astype(result.loss.dtype)
            )
        return position

    def labelled(self, position) -> Array:
        """The unconstrained scalars of `position`, ordered as `labels`."""
        problem, u = self.problem, position["u"]
        parts = [jnp.ravel(get_path(u["model"], path)) for path in problem.array_paths]
        if problem.fit_y0:
            parts += [jnp.ravel(y0) for y0 in u["y0"]]
        parts += [jnp.ravel(u["noise"][path]) for path in problem.noise_paths]
        if "log_scale" in position:
            parts.append(position["log_scale"][None])
        return jnp.concatenate(parts)

    def natural(self, position) -> Array:
        problem = self.problem
        model, y0s = problem.build(position["u"])
        noise = problem.noise_at(position["u"])
        parts = [natural_values(problem, model, y0s)]
        parts += [jnp.ravel(getattr(noise, p)) for p in problem.noise_paths]
        if "log_scale" in position:
            parts.append(jnp.exp(position["log_scale"])[None])
        return jnp.concatenate(parts)

    def __call__(self, unravel, flat):
        problem, position = self.problem, unravel(flat)
        u = position["u"]
        model, y0s = problem.build(u)
        factor = jnp.exp(position["log_scale"]) if "log_scale" in position else 1.0
        # Simulate's own choice of derivatives: with few sampled scalars, forward
        # sensitivities carried along the lean loop cost a fraction of a reverse pass.
        nll, ok = problem.negative_log_likelihood_at(model, y0s, problem.noise_at(u), None, factor)
        log_jacobian = sum(jnp.sum(u["noise"][p]) for p in problem.noise_paths)
        for path in problem.array_paths:
            transform, value_u = problem.transform(path), get_path(u["model"], path)
            _, slope = jax.jvp(transform.to_natural, (value_u,), (jnp.ones_like(value_u),))
            log_jacobian = log_jacobian + jnp.sum(jnp.log(jnp.abs(slope)))
            # Uniform over the range the transform maps onto: a constant, left out.
        natural = self.natural(position)
        log_prior = sum(prior(natural[self.labels.index(name)]) for name, prior in self.priors)
        total = -nll + log_prior + log_jacobian
        return jnp.where(ok & jnp.isfinite(total), total, -jnp.inf)


def _label_order(density: "_LogPosterior", unravel, raveled: Array) -> np.ndarray:
    """Where each labelled scalar sits in the raveled position: `raveled[order]` lists the
    scalars as `density.labels` does (unlabelled leaves, e.g. a network's, after them)."""
    slots = density.labelled(unravel(jnp.arange(raveled.size, dtype=raveled.dtype)))
    labelled = np.asarray(slots).astype(int)
    rest = np.setdiff1d(np.arange(raveled.size), labelled)
    return np.concatenate([labelled, rest])


def _unravel_ordered(unravel, inverse, flat):
    return unravel(flat[inverse])


def _unconstrained_covariance(
    result: FitResult, problem: FitProblem, size: int, num_labels: int
) -> Array:
    """The fit's covariance carried to the sampler's coordinates (a dense mass matrix):
    divided by $g'(u)$ on both sides; identity where it is not finite."""
    diagonal = np.ones(size)
    offset = 0
    for path in problem.array_paths:
        value = get_path(problem.model, path)
        transform = problem.transform(path)
        u = transform.to_unconstrained(value)
        _, slope = jax.jvp(transform.to_natural, (u,), (jnp.ones_like(u),))
        diagonal[offset : offset + value.size] = np.ravel(slope)
        offset += value.size
    fitted = np.asarray(result.covariance)
    num_fitted = fitted.shape[0]
    offset = num_fitted - len(problem.noise_paths)
    for index, path in enumerate(problem.noise_paths):
        diagonal[offset + index] = float(getattr(problem.noise, path))
    cov = np.full((size, size), 0.0)
    cov[:num_fitted, :num_fitted] = fitted / np.outer(diagonal[:num_fitted], diagonal[:num_fitted])
    if _fits_scale(problem):
        # Var log σ̂ ≈ 1/(2N); the scale's factor is the last label.
        cov[num_labels - 1, num_labels - 1] = 1.0 / (2.0 * float(result.num_observed))
    if not np.all(np.isfinite(cov)) or np.any(np.linalg.eigvalsh(cov) <= 0):
        return jnp.eye(size)
    return jnp.asarray(cov)


def _evaluate(density, unravel, flat):
    return density(unravel, flat)


@eqx.filter_jit
def _chains(logdensity, starts, cov, keys, num_warmup, num_samples, target_acceptance):
    import blackjax  # imported here: it is slow to import, and only sampling needs it

    def chain(start, key):
        warmup_key, sample_key = jr.split(key)
        warmup = blackjax.window_adaptation(
            blackjax.nuts,
            logdensity,
            is_mass_matrix_diagonal=False,
            initial_inverse_mass_matrix=cov,
            target_acceptance_rate=target_acceptance,
        )
        (state, parameters), _ = warmup.run(warmup_key, start, num_steps=num_warmup)
        kernel = blackjax.nuts(logdensity, **parameters).step

        def one(state, step_key):
            state, info = kernel(step_key, state)
            # A trajectory stops where the density is not finite, so that point is an edge.
            edges = (info.trajectory_leftmost_state, info.trajectory_rightmost_state)
            rejected = ~(jnp.isfinite(edges[0].logdensity) & jnp.isfinite(edges[1].logdensity))
            return state, (
                state.position,
                state.logdensity,
                info.is_divergent,
                info.acceptance_rate,
                rejected,
            )

        _, draws = jax.lax.scan(one, state, jr.split(sample_key, num_samples))
        return draws

    # BlackJAX mixes dtypes and ranks internally: run it under JAX's standard promotion
    # rules whatever the caller chose (a scoped setting, not a global one).
    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        return jax.vmap(chain)(starts, keys)
