r"""Events: the time $\tau$ at which a condition $g(t, y(t))$ of the solution crosses zero.

`Event` is what a user passes to `simulate(..., event=...)`. The rest of this module is the
event machinery of the lean loop (`simlab.integrate._lean`), which runs in three parts:

1. While stepping, `advance_bracket` evaluates $g$ at the end of every accepted step and
   keeps the first step across which $g$ crosses zero (in the requested direction, by the
   rule of `_crossed`): its start time, state and length. Under `jax.vmap` this costs one
   condition evaluation and a few selects per step, so members without an event pay
   almost nothing.
2. After the solve, `locate_event` finds the root *on the solution*, not on the step grid:
   the Illinois variant of regula falsi on $u \mapsto g(t_b + u, \Phi(t_b, y_b, u))$, where
   $\Phi$ re-takes one Runge–Kutta step of length $u$ from the bracketing step's start, so
   each trial state carries the method's own local error (no interpolant of lower order).
3. Derivatives come from the implicit function theorem. The converged root $\tau^*$ is held
   under `stop_gradient`, and one Newton correction
   $\tau = \tau^* - G(\tau^*; \theta) / \dot G$ with $G(t; \theta) = g(t, \Phi(t; \theta))$
   and $\dot G = \partial_t g + \partial_y g \cdot f$ (held constant) is differentiated:
   $$
   \frac{d\tau}{d\theta} = -\frac{\partial_y g \cdot \partial_\theta y + \partial_\theta g}
       {\partial_t g + \partial_y g \cdot f},
   $$
   in reverse and forward mode alike.

On Diffrax, `simulate` hands the same condition to `diffrax.Event` with an Optimistix root
finder on Diffrax's dense output instead, signed by `CROSSING_SIGNS` so that Diffrax's
rule for a falling crossing is the rule here.
"""

import functools as ft
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
from jaxtyping import Array

from .._results import RESULTS

DIRECTIONS = (-1, 0, 1)
# An event in each direction is a fall of sign * g from positive to non-positive, for one
# of these signs: the one rule of docs/events.md ("When an event fires"), which Diffrax's
# downcrossing test (`direction=False`) also applies to each signed condition.
CROSSING_SIGNS = {-1: (1.0,), 1: (-1.0,), 0: (1.0, -1.0)}
MAX_ROOT_ITERATIONS = 50
ROOT_TOLERANCE_EPS = 16  # stop refining when an iteration moves the root by this many eps


class Event(eqx.Module):
    r"""An event: the first time $\tau$ at which `condition(t, y, args)` crosses zero.

    The root is found on the solution (each trial re-takes one Runge–Kutta step from the
    start of the step that brackets the sign change, so $\tau$ is as accurate as the
    solution itself), and `jax.grad`/`jax.jvp` of $\tau$ follow from the implicit
    function theorem,
    $d\tau/d\theta = -(\partial_y g \cdot \partial_\theta y + \partial_\theta g)
    / (\partial_t g + \partial_y g \cdot f)$.

    **Arguments:**

    - `condition`: `condition(t, y, args) -> scalar`, a real-valued function of the time,
      the state and `simulate`'s `args` that crosses zero at the event (a height, a
      distance to a threshold, a derivative for an extremum). It is static: define it once
      (not a new lambda per call), as it is part of the compiled solve's cache key.
    - `terminate`: stop the solve at the event (`True`, default) or only record the time
      of the first crossing and carry on to `ts[-1]` (`False`).
    - `direction`: `+1` counts only rising crossings, `-1` only falling ones, `0`
      (default) both.

    When exactly an event fires (a condition that is zero at `ts[0]`, one that touches
    zero, one that returns `NaN`) is set out once, for every integrator, under "When an
    event fires" on the events page (docs/events.md).

    After the solve, `trajectory.event_time` is $\tau$ (`NaN` when the condition never
    crossed zero in `[ts[0], ts[-1]]`) and `trajectory.event_state` is $y(\tau)$. With
    `terminate=True` the save times after $\tau$ hold `NaN` (never reached; the solve is
    still successful).

    !!! example

        ```python
        import jax.numpy as jnp
        import simlab

        def fall(t, y, args):  # height and velocity of a ball under gravity
            return jnp.stack([y[1], -9.81 * jnp.ones_like(y[1])])

        def height(t, y, args):
            return y[0]

        ts = jnp.linspace(0.0, 3.0, 31)
        landing = simlab.Event(height, direction=-1)
        trajectory = simlab.simulate(fall, jnp.array([10.0, 0.0]), ts, event=landing)
        trajectory.event_time  # sqrt(2 * 10 / 9.81) = 1.4278...
        ```
    """

    condition: Callable[[Any, Array, Any], Array] = eqx.field(static=True)
    terminate: bool = eqx.field(static=True, default=True)
    direction: int = eqx.field(static=True, default=0)

    def __check_init__(self):
        if not callable(self.condition):
            raise ValueError(
                f"Event needs a callable condition(t, y, args) -> scalar; got "
                f"{type(self.condition).__name__}."
            )
        if not isinstance(self.terminate, bool):
            raise ValueError(f"Event terminate must be True or False; got {self.terminate!r}.")
        if isinstance(self.direction, bool) or self.direction not in DIRECTIONS:
            raise ValueError(
                f"Event direction must be +1 (rising), -1 (falling) or 0 (both); got "
                f"{self.direction!r}."
            )


def check_event(event: Any, t0: Array, y0: Array, args: Any) -> None:
    """Trace-time checks: an `Event` whose condition returns a real scalar."""
    if event is None:
        return
    if not isinstance(event, Event):
        raise ValueError(
            f"event must be a simlab.Event(condition, terminate=..., direction=...) or None; "
            f"got {type(event).__name__}."
        )
    returned = jax.eval_shape(event.condition, t0, y0, args)
    shape = getattr(returned, "shape", None)
    if shape != ():
        raise ValueError(
            f"the event condition must return a scalar (one number that crosses zero at the "
            f"event); {_name(event.condition)}(t, y, args) returns shape {shape}. For several "
            "thresholds, pick the one that matters (e.g. y[0] - level) or combine them "
            "(e.g. jnp.min(y - levels))."
        )
    if not jnp.issubdtype(returned.dtype, jnp.floating):
        raise ValueError(
            f"the event condition must return a real number that crosses zero; "
            f"{_name(event.condition)} returns dtype {returned.dtype}. For a threshold, "
            "return e.g. y[0] - level instead of y[0] > level."
        )


def event_name(event: Any) -> str | None:
    """A description for provenance and store identities, e.g. `mod.height(-1, stop)`."""
    if event is None:
        return None
    if isinstance(event, Event):
        mode = "stop" if event.terminate else "record"
        return f"{_name(event.condition)}(direction={event.direction:+d}, {mode})"
    return _name(event)


def _name(fn: Any) -> str:
    """`module.qualname` of a function; a callable Module (an event builder whose settings
    are static fields) is named with its fields, so different settings are told apart."""
    if isinstance(fn, eqx.Module):
        return f"{type(fn).__module__}.{fn!r}"
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"


def _crossed(direction: int, before: Array, after: Array) -> Array:
    """Whether the condition crossed zero in `direction` from value `before` to `after`:
    from one side of zero to the other side or onto zero. A value of exactly zero has no
    side, so a condition that starts at zero crosses only once it has left zero."""
    falls = [(sign * before > 0) & (sign * after <= 0) for sign in CROSSING_SIGNS[direction]]
    return ft.reduce(jnp.logical_or, falls)


def is_undefined(value: Array, y: Array) -> Array:
    """Whether the condition's `value` at the state `y` says nothing: not finite where the
    state is (a non-finite state is a failure of the solve, reported as such)."""
    return ~jnp.isfinite(value) & jnp.all(jnp.isfinite(y))


def event_status(condition_undefined: Array, status: RESULTS) -> RESULTS:
    """`status`, or `RESULTS.nonfinite_event_condition` where an otherwise successful solve
    met a state at which the condition was `NaN` or infinite (`is_undefined`)."""
    return RESULTS.where(
        condition_undefined & (status == RESULTS.successful),
        RESULTS.nonfinite_event_condition,
        status,
    )


class Bracket(NamedTuple):
    """The lean loop's event state: the condition's last value and the bracketing step.

    Kept small, as it rides in the step loop's carry: the vector field and the condition
    at the step's ends are recomputed once, after the solve.
    """

    value: Array  # g at the last accepted state
    fired: Array  # whether a step has bracketed a crossing yet
    undefined: Array  # whether g was NaN or infinite at an accepted finite state
    t: Array  # the bracketing step: start time, state and length
    y: Array
    h: Array


def start_bracket(value_fn: Callable, t0: Array, y0: Array) -> Bracket:
    """The event state before the first step (no step has bracketed a crossing)."""
    value = jnp.asarray(value_fn(t0, y0))
    return Bracket(value, jnp.asarray(False), is_undefined(value, y0), t0, y0, jnp.zeros_like(t0))


def advance_bracket(
    event: Event,
    value_fn: Callable,
    bracket: Bracket,
    accept: Array,
    t: Array,
    y: Array,
    h: Array,
    y1: Array,
) -> Bracket:
    """The event state after a step attempt from `(t, y)` of length `h` to `y1`."""
    value = jnp.asarray(value_fn(t + h, y1))
    first = accept & ~bracket.fired & _crossed(event.direction, bracket.value, value)
    return Bracket(
        value=jnp.where(accept, value, bracket.value),
        fired=bracket.fired | first,
        undefined=bracket.undefined | (accept & is_undefined(value, y1)),
        t=jnp.where(first, t, bracket.t),
        y=jnp.where(first, y, bracket.y),
        h=jnp.where(first, h, bracket.h),
    )


def stopped(event: Event, bracket: Bracket) -> Array:
    """Whether the solve stops here: a terminating event has fired."""
    return bracket.fired if event.terminate else jnp.asarray(False)


def _illinois_offset(
    value_at: Callable, bracket: Bracket, value_start: Array, value_end: Array
) -> Array:
    """The offset $u \\in [0, h]$ of the root of `value_at` in the bracketing step.

    Illinois regula falsi: a secant step inside the bracket, halving the retained end's
    value when the same end is kept twice, which makes it superlinear; a few iterations
    reach roundoff. Members without a bracket do no iteration.
    """
    scale = jnp.abs(bracket.t) + jnp.abs(bracket.h)
    tolerance = ROOT_TOLERANCE_EPS * jnp.finfo(bracket.h.dtype).eps * scale
    zero = jnp.zeros_like(bracket.h)

    def unfinished(state):
        _, _, _, value_b, moved, iteration = state
        return (
            bracket.fired
            & (iteration < MAX_ROOT_ITERATIONS)
            & (jnp.abs(moved) > tolerance)
            & (value_b != 0)
        )

    def iterate(state):
        a, value_a, b, value_b, _, iteration = state
        c = b - value_b * (b - a) / (value_b - value_a)
        c = jnp.clip(c, jnp.minimum(a, b), jnp.maximum(a, b))
        value_c = value_at(c)
        swap = jnp.sign(value_c) * jnp.sign(value_b) < 0  # the root lies between b and c
        a, value_a = jnp.where(swap, b, a), jnp.where(swap, value_b, value_a / 2)
        return a, value_a, c, value_c, c - b, iteration + 1

    init = (zero, value_start, bracket.h, value_end, bracket.h, 0)
    return lax.while_loop(unfinished, iterate, init)[2]


def locate_event(
    value_fn: Callable, vector_field: Callable, step_fn: Callable, bracket: Bracket
) -> tuple[Array, Array]:
    """The event time and state from the bracketing step; `NaN` where nothing fired.

    `step_fn(t, y, f, h)` re-takes one Runge–Kutta step. The root is found under
    `stop_gradient`; one Newton correction from it carries the derivatives.
    """
    frozen = jax.tree.map(lax.stop_gradient, bracket)
    frozen_f = vector_field(frozen.t, frozen.y)
    f_start = vector_field(bracket.t, bracket.y)  # differentiable, unlike frozen_f
    return locate_on_path(
        value_fn,
        lambda offset: step_fn(bracket.t, bracket.y, f_start, offset),
        lambda offset: step_fn(frozen.t, frozen.y, frozen_f, offset),
        vector_field,
        bracket,
    )


def locate_on_path(
    value_fn: Callable,
    state_at: Callable,
    frozen_state_at: Callable,
    velocity: Callable,
    bracket: Bracket,
) -> tuple[Array, Array]:
    """The event time and state on a path through the bracketing step; `NaN` where nothing
    fired.

    `state_at(u)` is the solution at `bracket.t + u` (differentiable with respect to the
    model's parameters), `frozen_state_at(u)` the same under `stop_gradient`, and
    `velocity(t, y)` the solution's time derivative there (for $M y' = f$ with a singular
    $M$ that is not $f$: pass the path's own derivative). The root is found on the frozen
    path; one Newton correction from it carries the derivatives.
    """
    frozen = jax.tree.map(lax.stop_gradient, bracket)

    def value_at(offset):
        return value_fn(frozen.t + offset, frozen_state_at(offset))

    value_start, value_end = value_fn(frozen.t, frozen.y), value_at(frozen.h)
    offset = _illinois_offset(value_at, frozen, value_start, value_end)
    offset = jnp.where(frozen.fired, offset, 0.0)
    root = lax.stop_gradient(frozen.t + offset)
    value = value_fn(root, state_at(root - bracket.t))
    frozen_state = frozen_state_at(root - frozen.t)
    _, slope = jax.jvp(
        value_fn, (root, frozen_state), (jnp.ones_like(root), velocity(root, frozen_state))
    )
    slope = lax.stop_gradient(slope)
    usable = frozen.fired & (slope != 0)
    time = root - jnp.where(usable, value / jnp.where(usable, slope, 1), 0)
    state = state_at(time - bracket.t)
    return jnp.where(frozen.fired, time, jnp.nan), jnp.where(frozen.fired, state, jnp.nan)
