"""The integrator interface: what `simulate` hands an integrator, and what it gets back.

An integrator is an `eqx.Module` that declares what it runs (which solvers, fixed or
adaptive steps, events, which adjoints) and solves one `Problem` into one `Solution`.
`simlab.integrate._registry` lists them in order of preference and selects one, so a new
kind of integrator is a new file plus one registry line.
"""

import abc
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
from jaxtyping import Array

from .._results import RESULTS
from ._events import Event
from ._loops import fixed_steps_per_interval


class Problem(eqx.Module):
    """One initial value problem, checked by `simulate` and ready to solve.

    - `model`: the vector field `model(t, y, args)` (a simlab model or any callable).
    - `ts`, `y0`, `args`: save times, initial state at `ts[0]`, extra arguments.
    - `solver`: the solver object (resolved from a name).
    - `adaptive`: adapt the step to `rtol`/`atol`, or take fixed steps of `dt0`.
    - `dt0`: the first step (adaptive) or the largest fixed step; `None` where not given.
    - `rtol`, `atol`: tolerances, as arrays (new values never recompile a solve).
    - `max_steps`: the most steps in all.
    - `adjoint`: `None`, a name of `simlab.integrate.ADJOINTS`, `"reversible"` (simlab's
      symplectic loop only) or a Diffrax adjoint.
    - `event`: a `simlab.Event` or `None`.
    - `key`: the JAX key a stochastic model's Brownian increments are drawn from, or `None`.
    - `known_steps_per_interval`: the number of equal fixed steps in every save interval
      where `simulate` could count them from concrete `ts` and `dt0` (before they became
      arrays, which a surrounding `jit` traces); `None` otherwise.
    """

    model: Any
    ts: Array
    y0: Array
    args: Any
    solver: Any
    adaptive: bool
    dt0: Array | None
    rtol: Array
    atol: Array
    max_steps: int
    adjoint: Any
    event: Event | None
    key: Array | None = None
    known_steps_per_interval: int | None = eqx.field(static=True, default=None)

    def steps_per_interval(self) -> Any:
        """Fixed steps per save interval: a Python int where every interval takes the same
        number (a loop of static length, which reverse mode differentiates through a
        `scan`), else an integer array (`fixed_steps_per_interval`)."""
        if self.known_steps_per_interval is not None:
            return self.known_steps_per_interval
        return fixed_steps_per_interval(self.ts, self.dt0)


class FoundEvent(NamedTuple):
    """Where an event fired: its time and the state there (`NaN` where it never fired)."""

    time: Array
    state: Array


class Solution(eqx.Module):
    """What an integrator returns: the states at `ts`, a `simlab.RESULTS` status, step
    counts (`num_steps`, `num_accepted_steps`, `num_rejected_steps`, ...), the event
    found (`None` without one), and, for adaptive steps, the time from which every step
    tried gave NaN or inf (`NaN` where the solve never got stuck there; `None` where the
    integrator does not watch for it: `simulate` then finds non-finite states at the save
    times)."""

    ys: Array
    status: RESULTS
    stats: dict[str, Any]
    event: FoundEvent | None = None
    nonfinite_time: Array | None = None


class AbstractIntegrator(eqx.Module):
    """One way of solving a `Problem`.

    Subclasses set the class variables and implement `accepts_solver` and `solve`:

    - `name`: what `simulate(integrator=...)` and `Trajectory.integrator` call it;
      `aliases`, other names that select it.
    - `runs`: the solvers it runs, in words (for error messages).
    - `exclusive`: its solvers run nowhere else (an explicit `integrator=` naming another
      one is refused).
    - `fixed_steps`, `adaptive_steps`: which step-size modes it runs.
    - `events`: whether it locates `simlab.Event`s; where it does not, `events_advice`
      says what to do instead (it follows "... does not locate events").
    - `adjoints`: the `adjoint=` values it takes; `None`: any (names or Diffrax adjoints).
    - `counts_steps_when_traced`: its solve needs the number of fixed steps per save
      interval when it is traced (`Problem.known_steps_per_interval`), so callers that
      would trace the save times (a sweep's chunks) keep them concrete for it.
    """

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    runs: ClassVar[str]
    exclusive: ClassVar[bool] = False
    fixed_steps: ClassVar[bool] = True
    adaptive_steps: ClassVar[bool] = True
    events: ClassVar[bool] = False
    events_advice: ClassVar[str] = (
        ": for a stiff model with an event pass solver='rodas5p' (or 'radau5', "
        "'kvaerno5'), for a non-stiff one an explicit solver such as 'tsit5'"
    )
    adjoints: ClassVar[tuple[Any, ...] | None] = None
    counts_steps_when_traced: ClassVar[bool] = False

    @abc.abstractmethod
    def accepts_solver(self, solver: Any) -> bool:
        """Whether this integrator runs `solver` (a static decision on its type)."""

    @abc.abstractmethod
    def solve(self, problem: Problem) -> Solution:
        """Solves `problem` from `problem.ts[0]` to `problem.ts[-1]`, saving at every `ts`."""

    def wrong_solver(self, solver: Any, model: Any) -> str | None:
        """Why `simulate(integrator=<this one>)` cannot run `solver` (which it does not
        accept) on `model` (`None` where unknown), with the fix; `None` leaves it to the
        registry's general message."""
        return None

    def chosen_by_auto(self, problem: Problem | None) -> bool:
        """Whether `integrator="auto"` may take this integrator for `problem` (`None` where
        the problem is not yet built), given it runs the solver and the settings."""
        return True

    def auto_may_choose_here(self) -> bool:
        """Whether `integrator="auto"` may take this integrator for some problem on the
        default backend (so callers keep for it what it needs, its save times concrete)."""
        return True

    def refusal(self, *, adaptive: bool, adjoint: Any, event: Any) -> str | None:
        """Why this integrator cannot run a solve with these settings, or `None` if it can."""
        if event is not None and not self.events:
            return f"simlab's {self.name} integrator does not locate events{self.events_advice}"
        if adaptive and not self.adaptive_steps:
            return f"simlab's {self.name} integrator takes fixed steps only: pass adaptive=False"
        if not adaptive and not self.fixed_steps:
            return f"simlab's {self.name} integrator takes adaptive steps only"
        if self.adjoints is not None and not _is_one_of(adjoint, self.adjoints):
            *others, last = (repr(name) for name in self.adjoints)
            return (
                f"simlab's {self.name} integrator differentiates by its own rules: pass "
                f"adjoint={', '.join(others)} or {last}; got {adjoint!r}"
            )
        return None


def _is_one_of(adjoint: Any, names: tuple[Any, ...]) -> bool:
    """Whether `adjoint` is `None` or a name listed in `names` (Diffrax adjoints never are)."""
    return (adjoint is None or isinstance(adjoint, str)) and adjoint in names
