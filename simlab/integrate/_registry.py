"""The registry of integrators, in order of preference, and `select_integrator`.

`select_integrator` asks each registered integrator, in order, whether it runs the solver
and the settings, as Lineax's `AutoLinearSolver` asks of its solvers: a new integrator is
one new file and one line in `INTEGRATORS` (or a call of `register_integrator`).
"""

from typing import Any

from ._diffrax import DiffraxIntegrator
from ._exponential import ExponentialIntegrator
from ._imex import ImexIntegrator
from ._interface import AbstractIntegrator, Problem
from ._kernel import KernelIntegrator
from ._lean import LeanIntegrator
from ._sde import SDEIntegrator
from ._sde_adaptive import AdaptiveSDEIntegrator
from ._solvers import SOLVERS, solver_name
from ._stiff_integrator import StiffIntegrator
from ._symplectic import SymplecticIntegrator

# The kernel first, which `"auto"` takes only on a TPU and where it fits
# (`KernelIntegrator.chosen_by_auto`), for explicit Runge–Kutta and fixed-step stochastic
# solvers; then exclusive integrators (their solvers run nowhere else), then the lean loop,
# which runs explicit Runge–Kutta methods fastest elsewhere, then Diffrax, which runs
# everything else.
INTEGRATORS: list[AbstractIntegrator] = [
    KernelIntegrator(),
    StiffIntegrator(),
    SDEIntegrator(),
    AdaptiveSDEIntegrator(),
    SymplecticIntegrator(),
    ExponentialIntegrator(),
    ImexIntegrator(),
    LeanIntegrator(),
    DiffraxIntegrator(),
]


def register_integrator(integrator: AbstractIntegrator, *, first: bool = True) -> None:
    """Adds `integrator` to the registry: ahead of the others (`first=True`: it is then
    preferred for every solver it accepts) or last."""
    if not isinstance(integrator, AbstractIntegrator):
        raise TypeError(
            f"register_integrator takes a simlab.integrate.AbstractIntegrator; got "
            f"{type(integrator).__name__}."
        )
    if integrator.name in integrator_names():
        raise ValueError(f"an integrator named {integrator.name!r} is registered already.")
    INTEGRATORS.insert(0 if first else len(INTEGRATORS), integrator)


def unregister_integrator(name: str) -> None:
    """Removes the integrator called `name` from the registry."""
    INTEGRATORS[:] = [integrator for integrator in INTEGRATORS if integrator.name != name]


def integrator_names() -> tuple[str, ...]:
    """`"auto"` and every name (and alias) that `simulate(integrator=...)` accepts."""
    registered = tuple(INTEGRATORS)
    known, names = _NAMES_OF_REGISTERED
    # Integrators are immutable, so the same objects (compared by identity first) have the
    # same names: reading them again costs about 10 µs per `SolveOptions`.
    if registered == known:
        return names
    names = ["auto"]
    for integrator in registered:
        names += [n for n in (integrator.name, *integrator.aliases) if n not in names]
    _NAMES_OF_REGISTERED[:] = [registered, tuple(names)]
    return tuple(names)


# The integrators whose names `integrator_names` last read, and those names.
_NAMES_OF_REGISTERED: list = [(), ()]


def counts_steps_when_traced(name: str) -> bool:
    """Whether the integrator `simulate(integrator=name)` asks for needs its step count
    when the solve is traced (`AbstractIntegrator.counts_steps_when_traced`); for `"auto"`,
    whether one that `"auto"` may take on the default backend does."""
    # Read off the classes (7 µs): a method read off an Equinox module builds a bound
    # method each time, which for every integrator cost about 0.25 ms a call, a quarter of
    # what a small sweep adds to its solve.
    return any(
        kind.counts_steps_when_traced
        for integrator, kind in zip(INTEGRATORS, map(type, INTEGRATORS), strict=True)
        if name in (kind.name, *kind.aliases)
        or (name == "auto" and kind.auto_may_choose_here(integrator))
    )


def runs_anywhere(solver: Any) -> bool:
    """Whether some registered integrator runs `solver` (a solver object)."""
    return any(integrator.accepts_solver(solver) for integrator in INTEGRATORS)


def select_integrator(
    solver: Any,
    *,
    requested: str,
    adaptive: bool,
    adjoint: Any,
    event: Any,
    model: Any = None,
    problem: Problem | None = None,
) -> AbstractIntegrator:
    """The first registered integrator that runs `solver` with these settings (and, for
    `"auto"`, is `chosen_by_auto` for `problem`); with `requested` other than `"auto"`, the
    one of that name. A ValueError says why none can (on `model`, where given)."""
    candidates = [integrator for integrator in INTEGRATORS if integrator.accepts_solver(solver)]
    if not candidates:
        raise ValueError(
            f"unknown solver {solver!r}; use one of {sorted(SOLVERS)} or a diffrax solver "
            "instance such as diffrax.Tsit5()."
        )
    if requested != "auto":
        named = [i for i in candidates if requested in (i.name, *i.aliases)]
        if not named:
            default = next(i for i in candidates if i.chosen_by_auto(None))
            raise ValueError(_wrong_integrator(solver, requested, default, model))
        candidates = named
    else:
        candidates = [i for i in candidates if i.chosen_by_auto(problem)]
    reasons = []
    for integrator in candidates:
        reason = integrator.refusal(adaptive=adaptive, adjoint=adjoint, event=event)
        if reason is None:
            return integrator
        reasons.append(reason)
    raise ValueError(f"{solver_name(solver)} cannot run here: {'; '.join(reasons)}.")


def _wrong_integrator(solver: Any, requested: str, runner: AbstractIntegrator, model: Any) -> str:
    name = solver_name(solver)
    if runner.exclusive:
        return (
            f"{name} runs on simlab's {runner.name} integrator; drop integrator={requested!r} "
            "(or pass integrator='auto')."
        )
    requested_integrator = next((i for i in INTEGRATORS if i.name == requested), None)
    advice = (
        None if requested_integrator is None else requested_integrator.wrong_solver(solver, model)
    )
    if advice is not None:
        return advice
    runs = "other solvers" if requested_integrator is None else requested_integrator.runs
    return (
        f"integrator={requested!r} runs {runs}; got {type(solver).__name__}. Pass "
        f"integrator={runner.name!r}."
    )
