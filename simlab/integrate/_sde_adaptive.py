r"""Adaptive steps for stochastic models: Diffrax's SPaRK on a virtual Brownian tree.

Fixed steps draw their increments block by block from the key (`simlab.integrate._sde`);
adaptive steps need the Brownian motion at times not known beforehand, and again at the
same times after a rejected step. A `diffrax.VirtualBrownianTree` built from the key gives
both: $W(t)$ (and the space-time Lévy area SPaRK uses) at any time, rebuilt from the key
by Brownian bridges down to `TREE_RESOLUTION` of the span, so the path depends only on the
key and the save times' span, never on the steps taken. Steps end on that finest grid
(`_OnTreeGrid`), so roundoff never moves them: a member of a `vmap` takes the steps of a
direct call. It costs about a tree's depth of bridges per evaluation: far more than a
fixed step's draw, which is why adaptive steps are asked for, not picked.
"""

from typing import Any

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp

from ._brownian import TREE_RESOLUTION, brownian_tree
from ._interface import AbstractIntegrator, Problem, Solution
from ._nonfinite import NonfiniteWatch, WrappedController, watched_result
from ._sde import STOCHASTIC_EVENTS_ADVICE, SPaRK, noise_shape, noise_term, stratonovich_drift
from ._solvers import resolve_adjoint


class AdaptiveSDEIntegrator(AbstractIntegrator):
    """SPaRK on stochastic models with adaptive steps, through `diffrax.diffeqsolve` driven
    by the key's virtual Brownian tree (`brownian_tree`); steps land on every save time."""

    name = "sde_adaptive"
    runs = "adaptive stochastic solvers ('spark')"
    exclusive = True
    events_advice = STOCHASTIC_EVENTS_ADVICE
    fixed_steps = False
    adjoints = (None, "checkpoint", "forward", "direct")

    def accepts_solver(self, solver: Any) -> bool:
        return isinstance(solver, SPaRK)

    def solve(self, problem: Problem) -> Solution:
        solution = _diffeqsolve(problem)
        status, nonfinite_time = watched_result(solution)
        return Solution(solution.ys, status, solution.stats, None, nonfinite_time)


class _NoiseTerm(dfx.AbstractTerm):
    r"""The noise $g\,dW$ of `model`'s kind (`noise_term`) on the Brownian `path`, as
    `diffrax.ControlTerm` makes it but for every noise kind and state shape."""

    model: Any
    path: dfx.AbstractBrownianPath

    def vf(self, t, y, args):
        return self.model.diffusion(t, y, args)

    def contr(self, t0, t1, **kwargs):
        return self.path.evaluate(t0, t1, **kwargs)

    def prod(self, vf, control):
        return noise_term(self.model, vf, control)


class _OnTreeGrid(WrappedController):
    """`controller`'s steps, each ending on the virtual Brownian tree's finest grid (`origin`
    plus multiples of `spacing`), at least one spacing on.

    Between grid points the tree interpolates as roughly as a Brownian path, so a step end
    moved by roundoff would move W by many times as much, and the next steps with it:
    a direct call, `jit` and `vmap` (which round differently) would take different steps.
    On the grid a step end is an integer, which roundoff does not move."""

    origin: Any
    spacing: Any

    def wrap(self, direction):
        return _OnTreeGrid(self.controller.wrap(direction), self.origin, self.spacing)

    def _on_grid(self, t_start, t_end):
        first = jnp.floor((t_start - self.origin) / self.spacing) + 1
        points = jnp.maximum(jnp.round((t_end - self.origin) / self.spacing), first)
        return (self.origin + points * self.spacing).astype(jnp.result_type(t_end))

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        t_next, state = self.controller.init(terms, t0, t1, y0, dt0, args, func, error_order)
        return self._on_grid(t0, t_next), state

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        keep, next_t0, next_t1, jumped, state, result = self.controller.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
        )
        return keep, next_t0, self._on_grid(next_t0, next_t1), jumped, state, result


@eqx.filter_jit
def _diffeqsolve(problem: Problem) -> dfx.Solution:
    model, ts, y0, args = problem.model, problem.ts, problem.y0, problem.args
    tree = brownian_tree(problem.key, ts, noise_shape(model, y0, args))
    terms = dfx.MultiTerm(dfx.ODETerm(stratonovich_drift(model)), _NoiseTerm(model, tree))
    # Between steps Diffrax interpolates linearly, which no Brownian path does: every save
    # time is a step's end.
    controller = dfx.ClipStepSizeController(
        _OnTreeGrid(
            dfx.PIDController(rtol=problem.rtol, atol=problem.atol),
            ts[0],
            TREE_RESOLUTION * (ts[-1] - ts[0]),
        ),
        step_ts=ts,
    )
    return dfx.diffeqsolve(
        terms,
        dfx.SPaRK(),
        t0=ts[0],
        t1=ts[-1],
        dt0=problem.dt0,
        y0=y0,
        args=args,
        saveat=dfx.SaveAt(ts=ts, controller_state=True),
        stepsize_controller=NonfiniteWatch(controller),
        max_steps=problem.max_steps,
        adjoint=resolve_adjoint(problem.adjoint),
        throw=False,
    )
