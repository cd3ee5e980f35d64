"""SBML events: a trigger that turns from false to true, at a time (`time >= T`) or at a
state (`U < 1e-8`), and the assignments it then makes to species, to parameters that rate
rules change, or to parameters of constant value (which then change stepwise in time).

An experiment with events is solved in segments (`solve`). Each segment is one
`simlab.simulate` call with its own constants, stopped by a terminating `simlab.Event` at
the first trigger that turns true. Its assignments are applied there, and the next segment
starts from that time and state. So no step crosses the discontinuity an event makes in
the right-hand side; the event time is located on the solution (exactly `T` for
`time >= T`) and differentiated by the implicit function theorem; and the number of
segments is static (one `lax.scan`, which `jax.vmap` batches over conditions).

Each trigger is read as a distance `g` that is positive while the trigger is false. A
trigger that is false at a segment's start is armed: it fires where `g` falls through 0. One
that is true is disarmed: it re-arms where `g` rises through 0 (a segment ends there too,
with nothing assigned). The segment's stopping condition is the smallest of these signed
distances. An assignment that leaves its own trigger on its threshold may fire it again.

Supported as the benchmark collection uses them: no delay, no priority, `initialValue`
true (a trigger that is true at time 0 does not fire then); `persistent` and
`useValuesFromTriggerTime` make no difference without a delay. The rest is refused with
`NotImplementedError`.
"""

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import libsbml
import sympy

from .._results import RESULTS
from ..integrate._events import Event
from ._math import TIME, lambdify, symbol, to_sympy

STOPS_PER_EVENT = 2
"""Segment ends allowed per event and solve: its firing and, for a state trigger, its
re-arming. A solve that needs more fails (its log-likelihood is `NaN`)."""

# Each comparison's sign: the trigger `lhs op rhs` is false where sign * (lhs - rhs) > 0.
_COMPARISONS = {
    libsbml.AST_RELATIONAL_LT: 1,
    libsbml.AST_RELATIONAL_LEQ: 1,
    libsbml.AST_RELATIONAL_GT: -1,
    libsbml.AST_RELATIONAL_GEQ: -1,
}


@dataclasses.dataclass(frozen=True)
class SBMLEvent:
    """An event: `distance`, positive while its trigger is false, and the value each
    assigned id takes when it fires (in terms of the states, constants and `TIME`)."""

    id: str
    distance: sympy.Expr
    assignments: dict[str, sympy.Expr]


def read_events(
    model: libsbml.Model, assignable: set[str], substitution: dict
) -> tuple[SBMLEvent, ...]:
    """The events of `model`; `assignable`: the ids an event may assign (states and
    constants); `substitution` replaces the assignment-rule targets in their math."""
    events = []
    for index, event in enumerate(model.getListOfEvents()):
        name = event.getId() or f"#{index}"
        _refuse_unsupported(event, name)
        distance = _distance(event.getTrigger().getMath(), name)
        assignments = {}
        for item in event.getListOfEventAssignments():
            target = item.getVariable()
            if target not in assignable:
                raise NotImplementedError(
                    f"SBML: event {name} assigns {target}, which is not a species or a "
                    "parameter that only events change."
                )
            math = to_sympy(item.getMath(), f"the assignment to {target} of event {name}")
            assignments[target] = math.xreplace(substitution)
        events.append(SBMLEvent(name, distance.xreplace(substitution), assignments))
    return tuple(events)


def _distance(trigger: libsbml.ASTNode | None, name: str) -> sympy.Expr:
    """The distance of a trigger `lhs op rhs` (a comparison), positive while it is false."""
    sign = None if trigger is None else _COMPARISONS.get(trigger.getType())
    if sign is None or trigger.getNumChildren() != 2:
        text = "no math" if trigger is None else libsbml.formulaToL3String(trigger)
        raise NotImplementedError(
            f"SBML: event {name} has the trigger {text}; only a comparison (<, <=, >, >=) "
            "of two expressions is supported."
        )
    where = f"the trigger of event {name}"
    lhs, rhs = (to_sympy(trigger.getChild(i), where) for i in range(2))
    return sign * (lhs - rhs)


def _refuse_unsupported(event: libsbml.Event, name: str) -> None:
    if event.isSetDelay():
        raise NotImplementedError(f"SBML: event {name} has a delay.")
    if event.isSetPriority():
        raise NotImplementedError(f"SBML: event {name} has a priority.")
    if event.getTrigger() is None:
        raise ValueError(f"SBML: event {name} has no trigger.")
    if event.getLevel() >= 3 and not event.getTrigger().getInitialValue():
        raise NotImplementedError(
            f"SBML: event {name} has a trigger with initialValue='false' (one that fires "
            "at time 0 when it is true there)."
        )


class CompiledEvents:
    """A network's events as JAX functions of `(t, y, constants)`. Compared and hashed by
    identity (its `stopping` method is the static condition of a `simlab.Event`)."""

    def __init__(self, events: tuple[SBMLEvent, ...], states: tuple[str, ...], constants):
        arguments = [TIME, [symbol(s) for s in states], [symbol(c) for c in constants]]
        self.count = len(events)
        self._distances = lambdify(arguments, [e.distance for e in events], cse=False)
        targets = [(i, target) for i, e in enumerate(events) for target in e.assignments]
        values = [events[i].assignments[target] for i, target in targets]
        self._values = lambdify(arguments, values)
        # Each assignment: its event, whether it sets a state (else a constant), where.
        self._targets = tuple(
            (i, target in states, (states if target in states else constants).index(target))
            for i, target in targets
        )

    def __repr__(self) -> str:
        return f"CompiledEvents({self.count} events)"

    def distances(self, t, y, constants):
        """Each trigger's distance, positive while it is false."""
        return _stacked(self._distances(t, y, constants), y.dtype)

    def stopping(self, t, y, args):
        """The segment's stopping condition: the smallest distance, counted towards
        firing (armed) or towards re-arming (disarmed); `args` is `(constants, armed)`."""
        constants, armed = args
        distance = self.distances(t, y, constants)
        return jnp.min(jnp.where(armed, distance, -distance))

    def assign(self, fired, t, y, constants):
        """The state and constants after the events `fired` at `(t, y)`: every value
        computed before any is set, as SBML's simultaneous assignments are."""
        values = _stacked(self._values(t, y, constants), y.dtype)
        for value, (event, is_state, position) in zip(values, self._targets, strict=True):
            if is_state:
                y = y.at[position].set(jnp.where(fired[event], value, y[position]))
            else:
                constants = constants.at[position].set(
                    jnp.where(fired[event], value, constants[position])
                )
        return y, constants


def _stacked(values, dtype):
    return jnp.stack(jnp.broadcast_arrays(*values)).astype(dtype) if values else jnp.zeros(0)


def solve(events: CompiledEvents, trajectory: Callable, constants, y0, ts):
    """One experiment with events: the states at the save times `ts`, the constants in
    force at each (an event at a save time counts before it), and whether every segment
    succeeded and the last reached `ts[-1]`.

    `trajectory(constants, y0, grid, event, args)` solves one segment from `grid[0]` and
    returns its `simlab.Trajectory`."""
    stopping = Event(events.stopping, terminate=True, direction=-1)

    def segment(carry, _):
        start, y, c, ys, cs, running, ok = carry
        armed = events.distances(start, y, c) > 0
        solution = trajectory(c, y, _grid(ts, start), stopping, (c, armed))
        # grid[0] is the segment's start, grid[i + 1] is ts[i] where ts[i] > start.
        saved = jnp.where((ts == start)[:, None], solution.ys[0], solution.ys[1:])
        taken = (running & (ts >= start))[:, None]
        ys, cs = jnp.where(taken, saved, ys), jnp.where(taken, c, cs)
        ok = ok & (~running | (solution.result == RESULTS.successful))
        time, state = solution.event_time, solution.event_state
        stopped = running & jnp.isfinite(time)
        signed = jnp.where(armed, 1, -1) * events.distances(time, state, c)
        fired = armed & (signed == jnp.min(signed))  # ties: simultaneous events
        after, c_after = events.assign(fired, time, state, c)
        # A finished experiment idles at ts[-1]: its later segments are short and unused.
        start = jnp.where(stopped, time, ts[-1])
        y, c = jnp.where(stopped, after, y), jnp.where(stopped, c_after, c)
        return (start, y, c, ys, cs, stopped, ok), None

    ys = jnp.full((ts.shape[0], y0.shape[0]), jnp.nan, y0.dtype)
    cs = jnp.broadcast_to(constants, (ts.shape[0], constants.shape[0]))
    carry = (ts[0], y0, constants, ys, cs, jnp.asarray(True), jnp.asarray(True))
    segments = STOPS_PER_EVENT * events.count + 1
    (_, _, _, ys, cs, running, ok), _ = jax.lax.scan(segment, carry, length=segments)
    return ys, cs, ok & ~running


def _grid(ts, start):
    """Save times for a segment from `start`: `start`, then `ts` with each time not after
    `start` moved between `start` and the first one after it (strictly increasing, as
    `simulate` asks; those states are not used)."""
    later = ts > start
    first = jnp.min(jnp.where(later, ts, start + 1))
    fractions = jnp.arange(1, ts.shape[0] + 1, dtype=ts.dtype) / (ts.shape[0] + 1)
    return jnp.concatenate([start[None], jnp.where(later, ts, start + (first - start) * fractions)])
