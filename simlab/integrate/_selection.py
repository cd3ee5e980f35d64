"""The default solver: explicit unless the model is stiff, by declaration or by estimate.

A model states the largest stable step of an explicit solver (`max_stable_step(solver,
y0)`, from its eigenvalue bound and the solver's stability region, as grid models do), or
declares itself stiff (`is_stiff`), or both. Where the span takes more than
`EXPLICIT_STEP_LIMIT` such steps, an explicit solve would spend them all on stability and
not on accuracy (a diffusion run to steady state), so the stiff default is chosen. Where
that count is unknown (no stable step stated, or parameters known only at run time, under
`jit` or `vmap`), the declaration decides.
A model with a mass matrix ($M y' = f(t, y)$) gets Rodas5P: only the stiff solvers take one.
"""

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._misc import is_concrete
from ._langevin import BAOAB, is_langevin
from ._mass import has_mass_matrix
from ._sde import default_stochastic_solver, is_stochastic
from ._solvers import DEFAULT_SOLVER, DEFAULT_STIFF_SOLVER, SOLVERS, resolve_solver

EXPLICIT_STEP_LIMIT = 10_000


def explicit_step_estimate(
    model: Any, y0: Array | np.ndarray, ts: Array | np.ndarray
) -> float | None:
    """How many steps the default explicit solver needs for stability alone from `ts[0]`
    to `ts[-1]` (`inf` where no step is stable), at a zero state of `y0`'s shape; `None`
    where the model states no stable step or its parameters or `ts` are only known at run
    time (under `jit` or `vmap`; `grad` alone keeps their values)."""
    max_stable_step = getattr(model, "max_stable_step", None)
    if max_stable_step is None or not is_concrete(ts):
        return None
    with jax.ensure_compile_time_eval():
        limit = max_stable_step(SOLVERS[DEFAULT_SOLVER].build(), jnp.zeros(y0.shape, y0.dtype))
    if limit is None or not is_concrete(limit):
        return None
    times = np.asarray(ts)
    span, limit = float(times[-1] - times[0]), float(limit)
    return math.inf if limit <= 0 else span / limit


def default_solver(
    model: Any, y0: Array | np.ndarray, ts: Array | np.ndarray, *, rtol: Any, atol: Any
) -> Any:
    """The solver `simulate(solver=None)` runs, and why: `(solver, reason)`."""
    if is_langevin(model):
        return BAOAB(), None
    if is_stochastic(model):
        return default_stochastic_solver(model), None
    if has_mass_matrix(model):  # whatever its size: only the stiff solvers take M
        reason = "the model declares a mass matrix (M y' = f(t, y))"
        return SOLVERS[DEFAULT_STIFF_SOLVER].build(), reason
    estimate = explicit_step_estimate(model, y0, ts)
    if estimate is not None and estimate > EXPLICIT_STEP_LIMIT:
        reason = f"an explicit solver would need about {estimate:.2g} steps for stability"
    elif estimate is None and getattr(model, "is_stiff", False):
        # The declaration decides where no estimate can: the model states no stable step,
        # or its parameters are only known at run time.
        reason = "the model declares itself stiff"
    else:
        reason = None
    solver = resolve_solver(
        None, stiff=reason is not None, state_size=y0.size, rtol=rtol, atol=atol
    )
    return solver, reason
