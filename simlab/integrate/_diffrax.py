"""The Diffrax integrator: `diffrax.diffeqsolve` for every Diffrax solver the others do not
run (implicit ESDIRK methods, any adjoint), with events located on its dense output."""

import functools as ft
from collections.abc import Callable
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from .._results import RESULTS
from ._events import CROSSING_SIGNS, event_status, is_undefined
from ._interface import AbstractIntegrator, FoundEvent, Problem, Solution
from ._nonfinite import NonfiniteWatch, watched_result
from ._solvers import resolve_adjoint

EVENT_ROOT_TOLERANCE = 1e-12  # on the event time, relative and absolute (Newton on Diffrax)
CHORD_FLOOR = 100  # fixed steps' chord iterations: the least tolerance, in machine epsilons


class DiffraxIntegrator(AbstractIntegrator):
    """Runs any Diffrax solver on `diffrax.diffeqsolve` (fixed or adaptive steps, events,
    every Diffrax adjoint)."""

    name = "diffrax"
    runs = "Diffrax solvers (e.g. diffrax.Kvaerno5())"
    events = True

    def accepts_solver(self, solver: Any) -> bool:
        return isinstance(solver, dfx.AbstractSolver)

    def solve(self, problem: Problem) -> Solution:
        problem, accepted = _times_diffrax_accepts(problem)
        if problem.event is None:
            solution = _solution(_diffeqsolve(problem, None))
        else:
            solution = _solve_with_event(problem)
        return eqx.tree_at(lambda s: s.ys, solution, jnp.where(accepted, solution.ys, jnp.nan))


def _times_diffrax_accepts(problem: Problem) -> tuple[Problem, jax.Array]:
    """`problem` with save times and `dt0` that Diffrax accepts, and whether they are the
    given ones. Diffrax checks that its save times increase and that `dt0` points from
    `t0` to `t1` inside the program, for a whole batch at once: one member's bad times
    would raise past `throw=False` (and on a TPU wait for a key press). simlab's status
    already reports them (`invalid_times`, `invalid_step`); such a member solves over
    placeholder times instead, and its states are NaN."""
    ts, dt0 = problem.ts, problem.dt0
    accepted = jnp.all(jnp.isfinite(ts)) & jnp.all(jnp.diff(ts) > 0)
    if dt0 is not None:
        accepted = accepted & (dt0 > 0) & jnp.isfinite(dt0)
    placeholder = jnp.arange(ts.shape[0], dtype=ts.dtype)
    ts = jnp.where(accepted, ts, placeholder)
    dt0 = None if dt0 is None else jnp.where(accepted, dt0, placeholder[-1])
    return eqx.tree_at(lambda p: (p.ts, p.dt0), problem, (ts, dt0), is_leaf=_is_none), accepted


def _is_none(x: Any) -> bool:
    return x is None


def _solution(solution: dfx.Solution, found: FoundEvent | None = None) -> Solution:
    status, nonfinite_time = watched_result(solution)
    return Solution(solution.ys, status, solution.stats, found, nonfinite_time)


def _with_root_tolerances(solver: Any, rtol: Any, atol: Any, dtype: Any) -> Any:
    """`solver` for fixed steps, whose Newton iterations use `rtol`, `atol` where they would
    take them from an adaptive step-size controller: fixed steps have none to take them
    from. Diffrax's default root finder, `VeryChord`, becomes `optimistix.Chord` (to at
    least `CHORD_FLOOR` machine epsilons, which roundoff in the residual allows): at fixed
    steps `VeryChord` gives up on iterations that still converge (Kvaerno5 on y' = -2ty at
    steps of 1/8), and there is no smaller step to retry with."""
    root_finder = getattr(solver, "root_finder", None)
    numbers = float | int | jax.Array | np.ndarray
    if root_finder is None or isinstance(getattr(root_finder, "rtol", 0.0), numbers):
        return solver
    if isinstance(root_finder, dfx.VeryChord):
        floor = CHORD_FLOOR * float(jnp.finfo(dtype).eps)
        rtol, atol = jnp.maximum(rtol, floor), jnp.maximum(atol, floor)
        chord = optx.Chord(rtol=rtol, atol=atol, norm=optx.rms_norm)
        return eqx.tree_at(lambda s: s.root_finder, solver, chord)
    return eqx.tree_at(
        lambda s: (s.root_finder.rtol, s.root_finder.atol, s.root_finder.norm),
        solver,
        (rtol, atol, optx.rms_norm),
    )


def _diffeqsolve(problem: Problem, diffrax_event: dfx.Event | None) -> dfx.Solution:
    ts = problem.ts
    if problem.adaptive:
        controller = NonfiniteWatch(dfx.PIDController(rtol=problem.rtol, atol=problem.atol))
        solver = problem.solver
    else:
        controller = dfx.ConstantStepSize()
        solver = _with_root_tolerances(problem.solver, problem.rtol, problem.atol, problem.y0.dtype)
    solution = dfx.diffeqsolve(
        dfx.ODETerm(problem.model),
        solver,
        t0=ts[0],
        t1=ts[-1],
        dt0=problem.dt0,
        y0=problem.y0,
        args=problem.args,
        saveat=_saves(ts, problem.adaptive, with_event=diffrax_event is not None),
        stepsize_controller=controller,
        max_steps=problem.max_steps,
        adjoint=resolve_adjoint(problem.adjoint),
        event=diffrax_event,
        throw=False,
    )
    return solution if diffrax_event is not None else _with_the_final_state_at_t1(solution)


def _saves(ts, adaptive: bool, with_event: bool) -> dfx.SaveAt:
    """Saves at `ts`, then at `t1`: with an event, the event time and state (the solve
    stops there). Without one, `ts[:-1]` and the final state: on a TPU v5e, in a vmapped
    batch of 65,536 float32 Van der Pol solves, Diffrax's interpolating save loop left the
    save at `t1` unwritten (inf) for about 6,400 members whose solves had succeeded. Each
    `SubSaveAt` has its own buffer, so the final state of a solve that ran out of steps
    does not slide into an earlier save time's row."""
    saved = ts if with_event else ts[:-1]
    subs = (dfx.SubSaveAt(ts=saved), dfx.SubSaveAt(t1=True))
    return dfx.SaveAt(subs=subs, controller_state=adaptive)


def _with_the_final_state_at_t1(solution: dfx.Solution) -> dfx.Solution:
    """`solution` with `ys` at every save time, the last the final state, or inf where the
    solve stopped short of `t1` (as Diffrax leaves every save time it never reached)."""
    before, (final,) = solution.ys
    reached = RESULTS.promote(solution.result) == RESULTS.successful
    ys = jnp.concatenate([before, jnp.where(reached, final, jnp.inf)[None]])
    return eqx.tree_at(lambda s: s.ys, solution, ys)


def _solve_with_event(problem: Problem) -> Solution:
    """An event becomes a `diffrax.Event` whose time an Optimistix root finder locates on
    Diffrax's dense output (and differentiates implicitly). Diffrax events always stop the
    solve, so a non-terminating event takes a second solve, without the event, for `ys`.

    Its conditions are the event's condition signed by `CROSSING_SIGNS`, each watched for
    a fall from positive to non-positive (`direction=False`), which is simlab's event rule,
    and a last one that stops the solve where the condition is not finite."""
    event = problem.event
    root_finder = optx.Newton(rtol=EVENT_ROOT_TOLERANCE, atol=EVENT_ROOT_TOLERANCE)
    crossings = tuple(
        _SignedCondition(event.condition, sign) for sign in CROSSING_SIGNS[event.direction]
    )
    conditions = (*crossings, _UndefinedCondition(event.condition))
    stopping = _diffeqsolve(problem, dfx.Event(conditions, root_finder, direction=False))
    *crossing_fired, condition_undefined = stopping.event_mask
    fired = ft.reduce(jnp.logical_or, crossing_fired)
    (ys, at_stop), (_, stop_time) = stopping.ys, stopping.ts
    found = FoundEvent(
        jnp.where(fired, stop_time[0], jnp.nan), jnp.where(fired, at_stop[0], jnp.nan)
    )
    if not event.terminate:
        solution = _diffeqsolve(problem, None)
        status, nonfinite_time = watched_result(solution)
        status = event_status(condition_undefined, status)
        return Solution(solution.ys, status, solution.stats, found, nonfinite_time)
    stopped = fired | condition_undefined
    status, nonfinite_time = watched_result(stopping)
    status = RESULTS.where(stopped, RESULTS.successful, status)
    status = event_status(condition_undefined, status)
    after = (problem.ts > found.time).reshape(-1, *(1,) * problem.y0.ndim)
    ys = jnp.where(after, jnp.nan, ys)
    return Solution(ys, status, stopping.stats, found, nonfinite_time)


class _SignedCondition(eqx.Module):
    """`sign * condition(t, y, args)`, called as `diffrax.Event` calls it (with keyword
    extras); equal for equal conditions, so the compiled solve is reused."""

    condition: Callable = eqx.field(static=True)
    sign: float = eqx.field(static=True)

    def __call__(self, t, y, args, **kwargs):
        return self.sign * self.condition(t, y, args)


class _UndefinedCondition(eqx.Module):
    """Whether the condition is `NaN` or infinite at a finite state (a boolean condition,
    which stops Diffrax's solve where it first holds)."""

    condition: Callable = eqx.field(static=True)

    def __call__(self, t, y, args, **kwargs):
        return is_undefined(self.condition(t, y, args), y)
