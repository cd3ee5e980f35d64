"""Functions that close over traced values, remade as modules that hold those values."""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax


class TracedFunction(eqx.Module):
    """A function traced once, holding the values it closes over as its leaves."""

    jaxpr: Any = eqx.field(static=True)
    out_tree: Any = eqx.field(static=True)
    closed_over: list

    def __call__(self, *args: Any) -> Any:
        out = jax.core.eval_jaxpr(self.jaxpr, self.closed_over, *jax.tree.leaves(args))
        return jax.tree.unflatten(self.out_tree, out)


def with_closed_over_tracers_held(fn: Callable, *example: Any) -> tuple[Callable, Any]:
    """`fn`, or where it closes over traced values (a vector field that reads a value being
    differentiated or swept, say) `fn` traced at `example` as a `TracedFunction` that
    holds them; and the shape of what `fn` returns at `example` (`jax.ShapeDtypeStruct`s),
    from the same trace.

    Custom derivative and batching rules refuse traced values that their function closes
    over, and a compiled solve would take them for constants; held as leaves, they are
    inputs like any other. A function that closes over none is kept as it is: a traced one
    would replay the trace's casts of varying axes inside `shard_map`, which hold only for
    the example's."""
    traced, returned = jax.make_jaxpr(fn, return_shape=True)(*example)
    if not any(isinstance(value, jax.core.Tracer) for value in traced.consts):
        return fn, returned
    held = TracedFunction(traced.jaxpr, jax.tree.structure(returned), list(traced.consts))
    return held, returned
