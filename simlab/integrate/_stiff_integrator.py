"""The stiff integrator: simlab's own Rosenbrock and Radau methods on their shared loop."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ._interface import AbstractIntegrator, FoundEvent, Problem, Solution
from ._mass import mass_matrix_of
from ._solvers import resolve_adjoint
from ._stiff import AbstractStiffSolver
from ._stiff._loop import integrate


class StiffIntegrator(AbstractIntegrator):
    """Runs `Rodas5P` and `Radau5` (dense Jacobians, one LU per step), adaptive or fixed,
    on $y' = f(t, y)$ or, for a model with a `mass_matrix`, on $M y' = f(t, y)$; events
    are located on the dense output of the step that brackets them."""

    name = "stiff"
    runs = "simlab's stiff solvers ('rodas5p', 'radau5')"
    exclusive = True
    events = True

    def accepts_solver(self, solver: Any) -> bool:
        return isinstance(solver, AbstractStiffSolver)

    def solve(self, problem: Problem) -> Solution:
        # Newton iterations and error estimates need full float32 products: a TPU's
        # default (one bfloat16 pass) costs the solve three digits.
        with jax.default_matmul_precision("highest"):
            return self._solve(problem)

    def _solve(self, problem: Problem) -> Solution:
        ys, status, stats, nonfinite_time, found = _stiff_solve(
            problem.model,
            problem.solver,
            problem.ts,
            problem.y0,
            problem.args,
            rtol=problem.rtol,
            atol=problem.atol,
            dt0=problem.dt0,
            max_steps=problem.max_steps,
            adjoint=resolve_adjoint(problem.adjoint),
            adaptive=problem.adaptive,
            mass=mass_matrix_of(problem.model, problem.y0.size),
            event=problem.event,
        )
        found = None if found is None else FoundEvent(*found)
        return Solution(ys, status, stats, found, nonfinite_time=nonfinite_time)


@eqx.filter_jit
def _stiff_solve(
    model,
    solver,
    ts,
    y0,
    args,
    *,
    rtol,
    atol,
    dt0,
    max_steps: int,
    adjoint,
    adaptive: bool,
    mass,
    event,
):
    """Solves with the stiff loop, compiled once per structure: `(ys, status, stats)`, the
    time where adaptive steps got stuck at NaN or inf, and the event's `(time, state)`."""

    def vector_field(t, y):
        return jnp.asarray(model(t, y, args), dtype=y.dtype)

    return integrate(
        solver, vector_field, ts, y0, rtol, atol, dt0, max_steps, adjoint, adaptive, mass,
        event, args,
    )  # fmt: skip
