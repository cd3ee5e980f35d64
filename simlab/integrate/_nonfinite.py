"""Telling a Diffrax solve stuck at NaN or inf from one that ran out of steps.

Diffrax's adaptive step-size controller rejects a step that gives NaN or inf and tries a
shorter one. Where every step gives NaN or inf from some time on (a blow-up, a vector
field undefined past that time), steps short enough to stay finite no longer advance the
time, and the solve ends only when `max_steps` runs out. `NonfiniteWatch` wraps the
controller and keeps, in its state, where the latest step that gave NaN or inf started
until the solve moves past it; `watched_result` reads it back from a solve saved with
`SaveAt(controller_state=True)`.
"""

import functools as ft
from collections.abc import Callable

import diffrax as dfx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from .._results import RESULTS


class WrappedController(dfx.AbstractAdaptiveStepSizeController):
    """A step-size controller that changes another's steps: its tolerances and norm are the
    wrapped `controller`'s (Diffrax's implicit solvers read them)."""

    controller: dfx.AbstractAdaptiveStepSizeController

    @property
    def rtol(self):
        return self.controller.rtol

    @property
    def atol(self):
        return self.controller.atol

    @property
    def norm(self) -> Callable:
        return self.controller.norm


class NonfiniteWatch(WrappedController):
    """`controller`'s steps, with where the latest step that gave NaN or inf started (`NaN`
    once the solve moved past it) as the second part of its state."""

    def wrap(self, direction):
        return NonfiniteWatch(self.controller.wrap(direction))

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        t_next, state = self.controller.init(terms, t0, t1, y0, dt0, args, func, error_order)
        return t_next, (state, jnp.full((), jnp.nan, jnp.result_type(t0)))

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        state, nonfinite_at = controller_state
        keep, next_t0, next_t1, jumped, state, result = self.controller.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, state
        )
        leaves = jax.tree.leaves(y1_candidate)
        finite = ft.reduce(jnp.logical_and, [jnp.all(jnp.isfinite(leaf)) for leaf in leaves])
        passed = jnp.where(next_t0 > nonfinite_at, jnp.nan, nonfinite_at)
        nonfinite_at = jnp.where(finite, passed, t0).astype(nonfinite_at.dtype)
        return keep, next_t0, next_t1, jumped, (state, nonfinite_at), result


def watched_result(solution: dfx.Solution) -> tuple[RESULTS, Array | None]:
    """The status of a Diffrax solve, `nonfinite_state` where it ran out of steps stuck at
    NaN or inf, and the time it got stuck there (`NaN` where it did not). Solves without a
    `NonfiniteWatch` (fixed steps) give their own status and `None`."""
    result = RESULTS.promote(solution.result)
    if solution.controller_state is None:
        return result, None
    _, nonfinite_at = solution.controller_state
    stuck = (result == RESULTS.max_steps_reached) & ~jnp.isnan(nonfinite_at)
    status = RESULTS.where(stuck, RESULTS.nonfinite_state, result)
    return status, jnp.where(stuck, nonfinite_at, jnp.nan)
