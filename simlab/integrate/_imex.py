r"""IMEX Runge–Kutta for split grid models: the stiff linear part implicit, the rest explicit.

A split model $\dot u = L u + N(t, u)$ (a `SplitVectorField`) is solved with Diffrax's
additive Runge–Kutta methods of Kennedy & Carpenter (*Appl. Numer. Math.* 44, 2003):
KenCarp3, KenCarp4 and KenCarp5 pair an explicit tableau for $N$ with an L-stable ESDIRK
tableau for $L$, so the step is limited by the accuracy of the nonlinear dynamics rather
than by the diffusion number of $L$. Each implicit stage solves $(I - \gamma h L) k = r$;
Newton's method solves it matrix-free, with GMRES on Jacobian–vector products, so no
$N \times N$ matrix is ever formed (for linear $L$ one Newton step is exact).
"""

from typing import Any

import diffrax as dfx
import jax.numpy as jnp
from jaxtyping import Array

from .._results import RESULTS
from ._interface import AbstractIntegrator, Problem, Solution
from ._nonfinite import NonfiniteWatch, watched_result
from ._solvers import imex_solver, is_imex_solver, resolve_adjoint
from ._split import check_linear_part, require_split


def imex_solve(
    model: Any,
    ts: Array,
    y0: Array,
    args: Any,
    *,
    solver: str | dfx.AbstractSolver = "kencarp4",
    rtol: Any,
    atol: Any,
    dt0: Any = None,
    max_steps: int,
    adjoint: dfx.AbstractAdjoint | None = None,
    adaptive: bool = True,
) -> tuple[Array, RESULTS, dict[str, Any]]:
    r"""Solves a split model with a KenCarp IMEX method, saving at `ts`.

    The nonlinear part is the explicit term and the linear part the implicit one,
    `dfx.MultiTerm(dfx.ODETerm(nonlinear), dfx.ODETerm(linear))` (Diffrax's order for
    KenCarp). The linear part is first checked to be linear on a random probe.

    **Arguments:**

    - `model`: a split model (a `simlab.models.AbstractSplitGridModel`).
    - `ts`: strictly increasing save times; `y0`: the state at `ts[0]`; `args`: passed on.
    - `solver`: `"kencarp3"`, `"kencarp4"`, `"kencarp5"` (Newton–GMRES from
      `simlab.integrate.imex_solver`) or a Diffrax KenCarp instance.
    - `rtol`, `atol`: tolerances of the adaptive steps (and of Newton).
    - `dt0`: the first step (`None`: chosen by Diffrax); with `adaptive=False` the fixed step.
    - `max_steps`: the most steps before `RESULTS.max_steps_reached`.
    - `adjoint`: a Diffrax adjoint (`None`: `RecursiveCheckpointAdjoint`).
    - `adaptive`: adapt the step to `rtol`/`atol` (`True`) or take fixed steps of `dt0`.

    **Returns:** `(ys, result, stats)` as from `diffrax.diffeqsolve`; adaptive steps stuck
    where every step gives NaN or inf give `RESULTS.nonfinite_state`.
    """
    solution = _imex_diffeqsolve(
        model, ts, y0, args, solver, rtol, atol, dt0, max_steps, adjoint, adaptive
    )
    result, _ = watched_result(solution)
    return solution.ys, result, solution.stats


def _imex_diffeqsolve(
    model, ts, y0, args, solver, rtol, atol, dt0, max_steps, adjoint, adaptive
) -> dfx.Solution:
    """`imex_solve`'s Diffrax solve, checked; adaptive ones keep their controller's state
    (see `watched_result`)."""
    model = require_split(model)
    if isinstance(solver, str):
        solver = imex_solver(solver.lower(), rtol=rtol, atol=atol)
    if not is_imex_solver(solver):
        raise ValueError(
            f"imex_solve runs Diffrax's KenCarp3/4/5 IMEX methods; got {type(solver).__name__}."
        )
    if not adaptive and dt0 is None:
        raise ValueError("adaptive=False takes fixed steps and needs a step: pass dt0=...")
    check_linear_part(model, ts[0], y0, args)
    # As arrays these are traced by the compiled solve, so new values never recompile it.
    dt0 = None if dt0 is None else jnp.asarray(dt0)
    controller = (
        NonfiniteWatch(dfx.PIDController(rtol=jnp.asarray(rtol), atol=jnp.asarray(atol)))
        if adaptive
        else dfx.ConstantStepSize()
    )
    terms = dfx.MultiTerm(dfx.ODETerm(model.nonlinear), dfx.ODETerm(model.linear))
    return dfx.diffeqsolve(
        terms,
        solver,
        t0=ts[0],
        t1=ts[-1],
        dt0=dt0,
        y0=y0,
        args=args,
        saveat=dfx.SaveAt(ts=ts, controller_state=adaptive),
        stepsize_controller=controller,
        max_steps=max_steps,
        adjoint=dfx.RecursiveCheckpointAdjoint() if adjoint is None else adjoint,
        throw=False,
    )


class ImexIntegrator(AbstractIntegrator):
    """Runs the KenCarp IMEX methods on split models (through Diffrax's `MultiTerm`)."""

    name = "imex"
    aliases = ("diffrax",)  # it runs on diffrax.diffeqsolve
    runs = "KenCarp IMEX solvers ('kencarp3', 'kencarp4', 'kencarp5')"
    exclusive = True

    def accepts_solver(self, solver: Any) -> bool:
        return is_imex_solver(solver)

    def solve(self, problem: Problem) -> Solution:
        solution = _imex_diffeqsolve(
            problem.model,
            problem.ts,
            problem.y0,
            problem.args,
            problem.solver,
            problem.rtol,
            problem.atol,
            problem.dt0,
            problem.max_steps,
            resolve_adjoint(problem.adjoint),
            problem.adaptive,
        )
        status, nonfinite_time = watched_result(solution)
        return Solution(solution.ys, status, solution.stats, nonfinite_time=nonfinite_time)
