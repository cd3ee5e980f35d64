r"""Profile likelihoods: a parameter fixed on a grid, the others re-optimised.

The profile of $\theta_k$ is $\mathrm{PL}(c) = \min_{\theta : \theta_k = c} -\log L(\theta)$.
By Wilks' theorem $2\,[\mathrm{PL}(\theta_k) - \mathrm{PL}(\hat\theta_k)] \sim \chi^2_1$ at
the true value, so $\{c : \mathrm{PL}(c) - \mathrm{PL}(\hat\theta_k) \le \tfrac12
\chi^2_{1,\alpha}\}$ is a confidence interval of level $\alpha$. Unlike the Wald interval
$\hat\theta_k \pm z\,\mathrm{se}$ it follows the likelihood: asymmetric where the model is
nonlinear, open on a side where the data cannot bound the parameter (non-identifiable).
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.stats as jstats
from jaxtyping import Array

from .._results import RESULTS
from ._loop import num_scalars, run
from ._problem import FitProblem, get_path


class Profile(eqx.Module):
    """The profile likelihood of one parameter ([`simlab.FitResult.profile`][]).

    **Attributes:**

    - `name`: the parameter.
    - `values`: the grid of fixed values, increasing; the fitted value is in the middle.
    - `nll`: the re-optimised negative log-likelihood at each value, relative to the fit's
      (so 0 at the estimate, which is not refitted).
    - `threshold`: $\\tfrac12\\chi^2_{1}$ at `level`: values with `nll <= threshold` form the
      confidence interval.
    - `estimate`: the fitted value.
    - `lower`, `upper`: the interval's ends, interpolated linearly between grid points;
      `-inf` / `inf` where the profile stays below the threshold to the end of the grid.
    - `lower_open`, `upper_open`: whether that side is open (not bounded by the data within
      the profiled range: widen `span`, or the parameter is not identifiable).
    - `converged`: whether each re-optimisation converged.
    - `level`: the confidence level.
    """

    name: str = eqx.field(static=True)
    values: Array
    nll: Array
    threshold: Array
    estimate: Array
    lower: Array
    upper: Array
    lower_open: Array
    upper_open: Array
    converged: Array
    level: float = eqx.field(static=True)


def profile(result, name: str, *, level: float, num_points: int, span: float) -> Profile:
    """See [`simlab.FitResult.profile`][]."""
    problem: FitProblem = result.problem
    if name not in problem.array_paths or jnp.shape(get_path(problem.model, name)) != ():
        scalars = [p for p in problem.array_paths if jnp.shape(get_path(problem.model, p)) == ()]
        raise ValueError(
            f"profile takes a fitted scalar parameter; {name!r} is not one. Fitted scalars: "
            f"{scalars}."
        )
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), e.g. 0.95; got {level!r}.")
    if not isinstance(num_points, int) or num_points < 3:
        raise ValueError(f"num_points must be an integer >= 3; got {num_points!r}.")
    if not span > 0:
        raise ValueError(f"span must be positive (standard errors each side); got {span!r}.")
    if result.stepper is None:
        raise ValueError("this FitResult does not record its optimiser; refit with simlab.fit.")
    half = num_points // 2
    estimate = get_path(problem.model, name)
    transform = problem.transform(name)
    # The grid is even in the unconstrained coordinate, so it stays inside the range.
    u_hat = transform.to_unconstrained(estimate)
    slope = jax.grad(transform.to_natural)(u_hat)
    stderr_u = result.stderr[name] / jnp.abs(slope)
    stderr_u = jnp.where(jnp.isfinite(stderr_u) & (stderr_u > 0), stderr_u, 1.0)
    offsets = span * stderr_u * jnp.arange(1, half + 1, dtype=stderr_u.dtype) / half
    grid_u = jnp.concatenate([u_hat - offsets[::-1], u_hat[None], u_hat + offsets])
    values = transform.to_natural(grid_u)
    fixed = dataclasses.replace(
        problem,
        array_paths=tuple(p for p in problem.array_paths if p != name),
        bounds=problem.bounds,
    )
    # The middle point is the fit itself: refitting from its own optimum would only chase
    # rounding. The others are refitted.
    sides = jnp.concatenate([values[:half], values[half + 1 :]])
    objective, refit = _profile_objective(fixed, result.stepper, result.max_steps, name, sides)
    rise = objective - _objective_of(problem, result.loss)
    nll = jnp.concatenate([rise[:half], jnp.zeros((1,), rise.dtype), rise[half:]])
    converged = jnp.concatenate([refit[:half], jnp.ones((1,), bool), refit[half:]])
    threshold = 0.5 * jstats.norm.ppf(0.5 + 0.5 * level) ** 2
    lower, lower_open = _crossing(values[half::-1], nll[half::-1], threshold)
    upper, upper_open = _crossing(values[half:], nll[half:], threshold)
    return Profile(
        name=name,
        values=values,
        nll=nll,
        threshold=jnp.asarray(threshold),
        estimate=estimate,
        lower=jnp.where(lower_open, -jnp.inf, lower),
        upper=jnp.where(upper_open, jnp.inf, upper),
        lower_open=lower_open,
        upper_open=upper_open,
        converged=converged,
        level=float(level),
    )


def _objective_of(problem: FitProblem, loss):
    """The optimiser's loss as a negative log-likelihood, up to a constant: with a fitted
    noise scale the scale is profiled out, $-\\log L = \\tfrac{N}{2}\\log(2\\,\\mathrm{loss})$."""
    if problem.is_least_squares and problem.fit_noise:
        return 0.5 * problem.num_observed().astype(loss.dtype) * jnp.log(2 * loss)
    return loss


@eqx.filter_jit
def _profile_objective(fixed: FitProblem, stepper, max_steps: int, name: str, values):
    """Re-optimised objective at each fixed value, all refits as one vmapped loop, each
    started from the fit's optimum (a warm start)."""

    def one(value):
        model = eqx.tree_at(lambda m: get_path(m, name), fixed.model, value)
        problem = eqx.tree_at(lambda p: p.model, fixed, model)
        if num_scalars(problem.initial_unconstrained()) == 0:  # nothing left to fit
            loss, ok = problem.loss(problem.initial_unconstrained(), "forward")
            return _objective_of(problem, loss), ok
        carry = run(
            problem,
            stepper,
            max_steps=max_steps,
            traced=True,
            progress=False,
            checkpoint=None,
            checkpoint_every=1,
        )
        converged = carry.done & (carry.result == RESULTS.successful)
        return _objective_of(problem, carry.best_loss), converged

    return jax.vmap(one)(values)


def _crossing(values: Array, nll: Array, threshold) -> tuple[Array, Array]:
    """Where the profile, walked outward from the estimate (`values[0]`), first exceeds the
    threshold (linear interpolation), and whether it never does."""
    above = nll > threshold
    open_side = ~jnp.any(above)
    index = jnp.maximum(jnp.argmax(above), 1)
    inner, outer = nll[index - 1], nll[index]
    fraction = jnp.clip((threshold - inner) / jnp.where(outer > inner, outer - inner, 1.0), 0, 1)
    return values[index - 1] + fraction * (values[index] - values[index - 1]), open_side
