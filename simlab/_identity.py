"""What identifies a model, an observation function and an event in stores and checkpoints.

Each is identified by its name and by what it computes: a digest of its jaxpr traced at the
shapes of the call that uses it (`simlab.io._fingerprint.computation_digest`). Redefining
a class, a function or a condition under the same name, or changing a value it closes
over or a global it reads, changes its identity, so old results are never returned for
the new definition.
"""

from collections.abc import Callable
from typing import Any

import jax

from .integrate._events import Event, event_name
from .integrate._split import SplitVectorField
from .io._fingerprint import computation_digest

DIGEST_LENGTH = 16  # hex digits: 64 bits, ample to tell definitions apart


def abstract_time_and_state(ts: Any, y0: Any) -> tuple[jax.ShapeDtypeStruct, ...]:
    """The shapes and dtypes of one time and one state, as a solve passes them."""
    return jax.ShapeDtypeStruct((), ts.dtype), jax.ShapeDtypeStruct(y0.shape, y0.dtype)


def model_identity(model: Any, t: Any, y: Any) -> str:
    """The model's class and what its vector field computes at time `t` and state `y`
    (and, for a split model, its linear and nonlinear parts). Parameter values enter by
    shape only: callers record them separately."""
    digest = computation_digest(_vector_field_parts, model, t, y)
    return f"{qualified_name(type(model))} code:{digest[:DIGEST_LENGTH]}"


def function_identity(function: Callable[..., Any], *args: Any) -> str:
    """The function's name and what it computes on arguments shaped like `args`."""
    digest = computation_digest(function, *args)
    return f"{qualified_name(function)} code:{digest[:DIGEST_LENGTH]}"


def event_identity(event: Event | Callable[[Any], Event], model: Any, t: Any, y: Any) -> str:
    """The event's name and settings, and what its condition computes at `t` and `y`;
    `event` may be a function that builds the event from the model."""

    def condition(model, t, y):
        built = event(model) if callable(event) else event
        # Non-array results: their values join the digest.
        return built.condition(t, y, None), built.direction, built.terminate

    digest = computation_digest(condition, model, t, y)
    return f"{event_name(event)} code:{digest[:DIGEST_LENGTH]}"


def _vector_field_parts(model, t, y):
    if isinstance(model, SplitVectorField):  # IMEX and exponential solvers call the parts
        return model(t, y, None), model.linear(t, y, None), model.nonlinear(t, y, None)
    return model(t, y, None)


def qualified_name(function: Any) -> str:
    """`module.qualname` of a function or class (of an object's class otherwise)."""
    module = getattr(function, "__module__", "?")
    return f"{module}.{getattr(function, '__qualname__', type(function).__qualname__)}"
