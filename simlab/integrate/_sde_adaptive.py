r"""Adaptive steps for stochastic models: Diffrax's SPaRK on a virtual Brownian tree.

Fixed steps draw their increments block by block from the key (`simlab.integrate._sde`);
adaptive steps need the Brownian motion at times not known beforehand, and again at the
same times after a rejected step. A `diffrax.VirtualBrownianTree` built from the key gives
both: $W(t)$ (and the space-time Lévy area SPaRK uses) at any time, rebuilt from the key
by Brownian bridges down to `TREE_RESOLUTION` of the span, so the path depends only on the
key and the save times' span, never on the steps taken. It costs about a tree's depth of
bridges per evaluation: far more than a fixed step's draw, which is why adaptive steps are
asked for, not picked.
"""

from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import lineax as lx

from ._brownian import brownian_tree
from ._interface import AbstractIntegrator, Problem, Solution
from ._nonfinite import NonfiniteWatch, watched_result
from ._sde import SPaRK, noise_shape, noise_term, stratonovich_drift
from ._solvers import resolve_adjoint


class AdaptiveSDEIntegrator(AbstractIntegrator):
    """SPaRK on stochastic models with adaptive steps, through `diffrax.diffeqsolve` driven
    by the key's virtual Brownian tree (`brownian_tree`); steps land on every save time."""

    name = "sde_adaptive"
    runs = "adaptive stochastic solvers ('spark')"
    exclusive = True
    fixed_steps = False
    adjoints = (None, "checkpoint", "forward", "direct")

    def accepts_solver(self, solver: Any) -> bool:
        return isinstance(solver, SPaRK)

    def solve(self, problem: Problem) -> Solution:
        solution = _diffeqsolve(problem)
        status, nonfinite_time = watched_result(solution)
        return Solution(solution.ys, status, solution.stats, None, nonfinite_time)


@eqx.filter_jit
def _diffeqsolve(problem: Problem) -> dfx.Solution:
    model, ts, y0, args = problem.model, problem.ts, problem.y0, problem.args
    shape = noise_shape(model, y0, args)
    tree = brownian_tree(problem.key, ts, shape)
    noise_structure = jax.ShapeDtypeStruct(shape, ts.dtype)

    def noise(t, y, args):
        g = model.diffusion(t, y, args)
        return lx.FunctionLinearOperator(lambda dW: noise_term(model, g, dW), noise_structure)

    terms = dfx.MultiTerm(dfx.ODETerm(stratonovich_drift(model)), dfx.ControlTerm(noise, tree))
    # Between steps Diffrax interpolates linearly, which no Brownian path does: every save
    # time is a step's end.
    controller = dfx.ClipStepSizeController(
        dfx.PIDController(rtol=problem.rtol, atol=problem.atol), step_ts=ts
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
