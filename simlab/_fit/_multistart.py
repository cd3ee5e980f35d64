r"""Multi-start: many fits from points spread over the parameter ranges, as one vmapped loop.

A nonlinear fit converges to the minimum whose basin holds its start. Starting from $N$
points drawn by Latin hypercube sampling (each parameter's range cut into $N$ equal strata,
one point in each, strata paired at random) and keeping the best end point finds the
global minimum when some start lies in its basin; how many starts ended there (the
waterfall plot, [`simlab.plot.waterfall`][]) tells whether $N$ was enough. A drawn start
at which the model cannot be simulated is drawn again (as pyPESTO's `startpoint_resample`
does): its loss is flat there, so it could not move.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import jax.tree_util as jtu
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array

from .._results import RESULTS
from .._simulate import simulate
from ..models._sde import AbstractSDEModel
from ._loop import Carry, advance, start
from ._problem import FAILED_LOSS, FitProblem, get_path


class Starts(eqx.Module):
    """Every start of a multi-start fit ([`simlab.fit`][] with `starts=N`).

    **Attributes:**

    - `initial`: parameter name → the `N` starting values.
    - `params`: parameter name → the `N` end points.
    - `loss`: the `N` final losses (the fit's objective), `inf` where a fit failed.
    - `converged`: whether each start met the optimiser's convergence test.
    - `best`: the index of the start the result reports (the lowest converged loss, else
      the lowest loss).
    - `draws`: how many points each start was drawn from: more than one where the model
      could not be simulated at the first (up to `1 + REDRAWS`; given starts are never
      drawn again).
    """

    initial: dict[str, Array]
    params: dict[str, Array]
    loss: Array
    converged: Array
    best: Array
    draws: Array

    def plot(self, **kwargs):
        """The figure of the starts, as `simlab run` draws it: every start's final loss,
        sorted (a waterfall; a plateau at the left says the optimum was found more than
        once).

        **Arguments:**

        - `kwargs`: passed to [`simlab.plot.waterfall`][] (e.g. `tolerance`).

        **Returns:** the matplotlib `Figure` (a notebook shows it inline).

        !!! example

            ```python
            result = simlab.fit(model, ts, observations, y0=y0, params=["frequency"],
                                starts=100, bounds={"frequency": (0.1, 10.0)}, key=jr.key(0))
            figure = result.starts.plot()
            ```
        """
        from ..plot._likelihood import waterfall

        return waterfall(self, **kwargs).figure


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


# Starts that finished stop costing: every `CHUNK_STEPS` steps the unfinished ones are
# gathered, ordered by how many solver steps their simulations take, into batches of
# `BATCH_SIZE` (one compiled size): a vmapped adaptive solve runs as many loop iterations as
# its slowest member takes steps, so starts with stiff or fast dynamics are batched together
# rather than each holding up a batch of easy ones.
CHUNK_STEPS = 25
BATCH_SIZE = 128
# How many times a drawn start at which the model cannot be simulated is drawn again.
REDRAWS = 20


def run_starts(
    problem: FitProblem, stepper, max_steps: int, initial, *, key=None, traced, devices=None
):
    """All starts' final carries (batched) and their summary.

    With `key` (the starts were drawn with it), a start at which the loss cannot be
    evaluated is drawn again first. Concrete data: the starts run in chunks, and between
    chunks the unfinished ones are gathered into batches of starts whose solves take
    similar numbers of steps, because a vmapped loop costs as many steps for every start as
    its slowest start takes. Traced data (a fit under `jax.jit` or `jax.vmap`): one
    vmapped loop.
    """
    initial, carries, draws = _start_all(problem, stepper, max_steps, initial, key)
    if traced:
        carries = _advance_together(problem, stepper, carries, max_steps)
    else:
        carries = _run_compacting(problem, stepper, max_steps, carries, devices)
    return carries, _summary(problem, initial, carries, draws)


def _started(problem: FitProblem, values: dict[str, Array]) -> FitProblem:
    model = eqx.tree_at(
        lambda m: [get_path(m, p) for p in problem.array_paths],
        problem.model,
        [values[p] for p in problem.array_paths],
    )
    return eqx.tree_at(lambda p: p.model, problem, model)


@eqx.filter_jit
def _start_all(problem: FitProblem, stepper, max_steps: int, initial: dict[str, Array], key):
    """Every start's first carry, and how many points each was drawn from. With a `key`, a
    start whose loss is `FAILED_LOSS` (a solve failed, or the likelihood is zero) is
    replaced by the same start of `draw_starts` with `jr.fold_in(key, round)`, for up to
    `REDRAWS` rounds. Round 0 evaluates `initial` as given, in the loop, so that `start` is
    compiled once."""
    num_starts = jnp.shape(next(iter(initial.values())))[0]

    def first_carries(values):
        return jax.vmap(lambda v: start(_started(problem, v), stepper, max_steps))(values)

    def failing(carries):
        return carries.best_loss >= FAILED_LOSS

    def keep_drawing(state):
        round_, _, carries, _ = state
        again = jnp.any(failing(carries)) & (round_ <= REDRAWS)
        return (round_ == 0) | (again if key is not None else False)

    def draw(state):
        round_, values, carries, draws = state
        if key is not None:
            fresh = draw_starts(problem, jr.fold_in(key, round_), num_starts)
            replace = (round_ > 0) & failing(carries)
            values = {p: jnp.where(_along(replace, v), fresh[p], v) for p, v in values.items()}
        drawn = (round_ == 0) | failing(carries)
        return round_ + 1, values, first_carries(values), draws + drawn.astype(draws.dtype)

    shapes = eqx.filter_eval_shape(first_carries, initial)
    unset = jtu.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    state = (jnp.asarray(0), initial, unset, jnp.zeros(num_starts, jnp.int32))
    _, initial, carries, draws = lax.while_loop(keep_drawing, draw, state)
    return initial, carries, draws


def _along(mask: Array, leaf: Array) -> Array:
    """`mask` (one value per start) broadcast against a batched leaf."""
    return mask.reshape(mask.shape + (1,) * (leaf.ndim - 1))


@eqx.filter_jit
def _advance_together(problem: FitProblem, stepper, carries: Carry, max_steps: int) -> Carry:
    stop = jnp.asarray(max_steps)
    return jax.vmap(lambda carry: advance(problem, stepper, carry, stop))(carries)


@eqx.filter_jit
def _advance_all(problem: FitProblem, stepper, carries: Carry, stop_step) -> Carry:
    # The loop reads only the problem's frozen values: every start shares one problem.
    return jax.vmap(lambda carry: advance(problem, stepper, carry, stop_step))(carries)


def batch_size(num_starts: int, multiple: int) -> int:
    """The size of the batches unfinished starts are gathered into: `BATCH_SIZE` or all
    starts if fewer, a multiple of `multiple` (the number of devices)."""
    return multiple * math.ceil(min(num_starts, BATCH_SIZE) / multiple)


def _run_compacting(problem, stepper, max_steps: int, carries: Carry, devices) -> Carry:
    sharding = None if devices is None else starts_sharding(devices)
    size = batch_size(carries.step.shape[0], 1 if devices is None else len(devices))
    while True:
        running = ~carries.done & (carries.result == RESULTS.successful)
        active = np.flatnonzero(np.asarray(running & (carries.step < max_steps)))
        if active.size == 0:
            return carries
        steps = np.asarray(_solver_steps(problem, carries.u))
        active = active[np.argsort(steps[active], kind="stable")]
        stop_step = min(int(carries.step[active[0]]) + CHUNK_STEPS, max_steps)
        for first in range(0, active.size, size):
            members = active[first : first + size]
            # Padded with copies of one unfinished start, which compute the same values.
            index = np.concatenate([members, np.repeat(members[:1], size - members.size)])
            batch = _gather(carries, jnp.asarray(index))
            if sharding is not None:
                batch = jax.device_put(batch, sharding)
            batch = _advance_all(problem, stepper, batch, jnp.asarray(stop_step))
            carries = _scatter(carries, jnp.asarray(index), batch)


@eqx.filter_jit
def _solver_steps(problem: FitProblem, u) -> Array:
    """How many steps the simulations of each start (batched `u`) take, over all
    experiments and initial states; zeros for stochastic models (fixed steps, or a
    transition density without a solve)."""

    def one(u):
        if isinstance(problem.model, AbstractSDEModel):
            return jnp.zeros((), jnp.int32)
        model, y0s = problem.build(u)
        total = jnp.zeros((), jnp.int32)
        for experiment, y0 in zip(problem.experiments, y0s, strict=True):
            times = experiment.save_times()

            def steps(y0_member, ts=times):
                trajectory = simulate(
                    model, y0_member, ts, throw=False, options=problem.simulate_options
                )
                return trajectory.stats["num_steps"]

            total = total + jnp.sum(jax.vmap(steps)(y0)).astype(total.dtype)
        return total

    return jax.vmap(one)(u)


@eqx.filter_jit
def _gather(carries: Carry, index: Array) -> Carry:
    return jtu.tree_map(lambda leaf: leaf[index], carries)


@eqx.filter_jit
def _scatter(carries: Carry, index: Array, batch: Carry) -> Carry:
    return jtu.tree_map(lambda leaf, new: leaf.at[index].set(new), carries, batch)


def starts_sharding(devices) -> NamedSharding:
    """The starts' batch axis laid out over `devices`."""
    return NamedSharding(Mesh(np.array(list(devices)), ("starts",)), PartitionSpec("starts"))


@eqx.filter_jit
def _summary(problem: FitProblem, initial: dict[str, Array], carries: Carry, draws) -> "Starts":
    ends = jax.vmap(lambda u: problem.build(u)[0])(carries.best_u)
    params = {p: get_path(ends, p) for p in problem.array_paths}
    converged = (carries.result == RESULTS.successful) & carries.done
    loss = jnp.where(jnp.isfinite(carries.best_loss), carries.best_loss, jnp.inf)
    best = jnp.argmin(jnp.where(converged, loss, jnp.inf))
    best = jnp.where(jnp.any(converged), best, jnp.argmin(loss))
    return Starts(
        initial=initial, params=params, loss=loss, converged=converged, best=best, draws=draws
    )


def best_carry(carries, index):
    return jtu.tree_map(lambda leaf: leaf[index], carries)
