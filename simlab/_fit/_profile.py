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

from .._misc import Integer, as_count
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

    def plot(self, **kwargs):
        """The figure of the profile, as `simlab run` draws it: the rise of the negative
        log-likelihood over the grid, the threshold at `level` (dashed) and the confidence
        interval (shaded; to the grid's edge, with an arrow, where it is open).

        **Arguments:**

        - `kwargs`: passed to [`simlab.plot.profiles`][].

        **Returns:** the matplotlib `Figure` (a notebook shows it inline).

        !!! example

            ```python
            figure = result.profile("alpha").plot()
            ```
        """
        from ..plot._likelihood import profiles

        return profiles(self, **kwargs)[0].figure


def profiles(
    result, names: tuple[str, ...], *, level: float, num_points: Integer, span: float
) -> dict[str, Profile]:
    """See [`simlab.FitResult.profile`][]: every name's refits in one vmapped program."""
    problem: FitProblem = result.problem
    scalars = [p for p in problem.array_paths if jnp.shape(get_path(problem.model, p)) == ()]
    for name in names:
        if name not in scalars:
            raise ValueError(
                f"profile takes a fitted scalar parameter; {name!r} is not one. Fitted "
                f"scalars: {scalars}."
            )
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), e.g. 0.95; got {level!r}.")
    num_points = as_count("num_points", num_points, minimum=3)
    if not span > 0:
        raise ValueError(f"span must be positive (standard errors each side); got {span!r}.")
    if result.stepper is None:
        raise ValueError("this FitResult does not record its optimiser; refit with simlab.fit.")
    half = num_points // 2
    grids = {name: _grid(result, name, half, span) for name in names}
    # The middle point is the fit itself: refitting from its own optimum would only chase
    # rounding. The other points of every grid are refitted together.
    masks = jnp.stack(
        [
            jnp.asarray([p == name for p in problem.array_paths]).astype(bool)
            for name in names
            for _ in range(2 * half)
        ]
    )
    sides = jnp.concatenate(
        [jnp.concatenate([grid_u[:half], grid_u[half + 1 :]]) for grid_u in grids.values()]
    )
    objective, refit = _profile_objective(problem, result.stepper, result.max_steps, masks, sides)
    rise = (objective - _objective_of(problem, result.loss)).reshape(len(names), 2 * half)
    refit = refit.reshape(len(names), 2 * half)
    threshold = 0.5 * jstats.norm.ppf(0.5 + 0.5 * level) ** 2
    return {
        name: _profile(
            name,
            problem.transform(name).to_natural(grid_u),
            jnp.concatenate([rise[i, :half], jnp.zeros((1,), rise.dtype), rise[i, half:]]),
            jnp.concatenate([refit[i, :half], jnp.ones((1,), bool), refit[i, half:]]),
            threshold,
            get_path(problem.model, name),
            level,
        )
        for i, (name, grid_u) in enumerate(grids.items())
    }


def _grid(result, name: str, half: int, span: float) -> Array:
    """`2 half + 1` unconstrained values, even in the unconstrained coordinate (so the grid
    stays inside the range), `span` standard errors each side of the estimate."""
    transform = result.problem.transform(name)
    u_hat = transform.to_unconstrained(get_path(result.problem.model, name))
    slope = jax.grad(transform.to_natural)(u_hat)
    stderr_u = result.stderr[name] / jnp.abs(slope)
    stderr_u = jnp.where(jnp.isfinite(stderr_u) & (stderr_u > 0), stderr_u, 1.0)
    offsets = span * stderr_u * jnp.arange(1, half + 1, dtype=stderr_u.dtype) / half
    grid = jnp.concatenate([u_hat - offsets[::-1], u_hat[None], u_hat + offsets])
    return jnp.clip(grid, *transform.branch)  # past it, g would fold the grid back


def _profile(name, values, nll, converged, threshold, estimate, level) -> Profile:
    half = values.shape[0] // 2
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
def _profile_objective(problem: FitProblem, stepper, max_steps: int, masks, values):
    """Re-optimised objective with the parameter of each `masks` row pinned at the matching
    unconstrained value, all refits as one vmapped loop started from the fit's optimum (a
    warm start)."""

    def one(mask, value):
        pinned = dataclasses.replace(problem, pin=(mask, value))
        if num_scalars(problem.initial_unconstrained()) == 1:  # nothing left to fit
            loss, ok = pinned.loss(pinned.initial_unconstrained(), "forward")
            return _objective_of(pinned, loss), ok
        carry = run(
            pinned,
            stepper,
            max_steps=max_steps,
            traced=True,
            progress=False,
            checkpoint=None,
            checkpoint_every=1,
        )
        converged = carry.done & (carry.result == RESULTS.successful)
        return _objective_of(pinned, carry.best_loss), converged

    return jax.vmap(one)(masks, values)


def _crossing(values: Array, nll: Array, threshold) -> tuple[Array, Array]:
    """Where the profile, walked outward from the estimate (`values[0]`), first exceeds the
    threshold (linear interpolation), and whether it never does."""
    above = nll > threshold
    open_side = ~jnp.any(above)
    index = jnp.maximum(jnp.argmax(above), 1)
    inner, outer = nll[index - 1], nll[index]
    fraction = jnp.clip((threshold - inner) / jnp.where(outer > inner, outer - inner, 1.0), 0, 1)
    return values[index - 1] + fraction * (values[index] - values[index - 1]), open_side
