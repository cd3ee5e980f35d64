r"""Multi-start: many fits from points spread over the parameter ranges, as one vmapped loop.

A nonlinear fit converges to the minimum whose basin holds its start. Starting from $N$
points drawn by Latin hypercube sampling (each parameter's range cut into $N$ equal strata,
one point in each, strata paired at random) and keeping the best end point finds the
global minimum when some start lies in its basin; how many starts ended there (the
waterfall plot, [`simlab.plot.waterfall`][]) tells whether $N$ was enough.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import jax.tree_util as jtu
from jaxtyping import Array

from .._results import RESULTS
from ._loop import run
from ._problem import FitProblem, get_path


class Starts(eqx.Module):
    """Every start of a multi-start fit ([`simlab.fit`][] with `starts=N`).

    **Attributes:**

    - `initial`: parameter name → the `N` starting values.
    - `params`: parameter name → the `N` end points.
    - `loss`: the `N` final losses (the fit's objective), `inf` where a fit failed.
    - `converged`: whether each start met the optimiser's convergence test.
    - `best`: the index of the start the result reports (the lowest converged loss, else
      the lowest loss).
    """

    initial: dict[str, Array]
    params: dict[str, Array]
    loss: Array
    converged: Array
    best: Array


def latin_hypercube(key, num_points: int, num_dims: int) -> Array:
    """`num_points` points in $[0, 1)^d$, one in each of `num_points` strata per dimension."""
    permutation_key, jitter_key = jr.split(key)
    strata = jax.vmap(lambda k: jr.permutation(k, num_points))(jr.split(permutation_key, num_dims))
    jitter = jr.uniform(jitter_key, (num_points, num_dims))
    return (strata.T.astype(jitter.dtype) + jitter) / num_points


def draw_starts(problem: FitProblem, key, num_starts: int) -> dict[str, Array]:
    """Starting values for each fitted parameter, within its range: uniform, or log-uniform
    where the lower bound is positive (rates spanning decades are searched evenly in log)."""
    sizes = [math.prod(jnp.shape(get_path(problem.model, p))) for p in problem.array_paths]
    unit = latin_hypercube(key, num_starts, sum(sizes))
    # Strictly inside the open range, so that every start maps to a finite unconstrained u.
    unit = jnp.clip(unit, 1e-6, 1 - 1e-6)
    starts, offset = {}, 0
    for path, size in zip(problem.array_paths, sizes, strict=True):
        transform = problem.transform(path)
        lower, upper = transform.lower, transform.upper
        if not (math.isfinite(lower) and math.isfinite(upper)):
            raise ValueError(
                f"starts= draws from each parameter's range, but {path!r} has range "
                f"{transform.describe()}; pass bounds={{{path!r}: (lower, upper)}} with finite "
                "ends."
            )
        fraction = unit[:, offset : offset + size]
        if lower > 0:
            values = jnp.exp(math.log(lower) + fraction * math.log(upper / lower))
        else:
            values = lower + fraction * (upper - lower)
        shape = jnp.shape(get_path(problem.model, path))
        starts[path] = values.reshape((num_starts, *shape))
        offset += size
    return starts


@eqx.filter_jit
def run_starts(problem: FitProblem, stepper, max_steps: int, initial: dict[str, Array]):
    """All starts' final carries (batched), one compiled loop."""

    def one(values):
        model = eqx.tree_at(
            lambda m: [get_path(m, p) for p in problem.array_paths],
            problem.model,
            [values[p] for p in problem.array_paths],
        )
        started = eqx.tree_at(lambda p: p.model, problem, model)
        return run(
            started,
            stepper,
            max_steps=max_steps,
            traced=True,
            progress=False,
            checkpoint=None,
            checkpoint_every=1,
        )

    carries = jax.vmap(one)(initial)
    ends = jax.vmap(lambda u: problem.build(u)[0])(carries.best_u)
    params = {p: get_path(ends, p) for p in problem.array_paths}
    converged = (carries.result == RESULTS.successful) & carries.done
    loss = jnp.where(jnp.isfinite(carries.best_loss), carries.best_loss, jnp.inf)
    best = jnp.argmin(jnp.where(converged, loss, jnp.inf))
    best = jnp.where(jnp.any(converged), best, jnp.argmin(loss))
    starts = Starts(initial=initial, params=params, loss=loss, converged=converged, best=best)
    return carries, starts


def best_carry(carries, index):
    return jtu.tree_map(lambda leaf: leaf[index], carries)
