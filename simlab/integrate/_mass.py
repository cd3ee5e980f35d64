"""The mass matrix a model declares for $M y' = f(t, y)$, checked and made dense.

A model declares a constant mass matrix as its `mass_matrix` property: a 1-D array (the
diagonal) or a 2-D one; `None` (or no such property) is the identity, an ODE. Only
simlab's stiff solvers take one (`STIFF_SOLVERS_WITH_MASS`).
"""

from typing import Any

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._misc import is_concrete

STIFF_SOLVERS_WITH_MASS = "solver='rodas5p' or solver='radau5'"


def has_mass_matrix(model: Any) -> bool:
    """Whether `model` declares a mass matrix (a static decision)."""
    return getattr(model, "mass_matrix", None) is not None


def mass_matrix_of(model: Any, state_size: int) -> Array | None:
    """The model's mass matrix as a dense `(state_size, state_size)` array for the flat
    state, or `None` where it declares none. A ValueError says what is wrong with it."""
    declared = getattr(model, "mass_matrix", None)
    if declared is None:
        return None
    owner = type(model).__name__
    if callable(declared):
        raise ValueError(
            f"{owner}.mass_matrix must be a constant array (its diagonal, or the full "
            "matrix); got a callable. A mass matrix that depends on t or y is not supported: "
            "move the dependence into the vector field (e.g. divide by it where it is "
            "invertible)."
        )
    mass = jnp.asarray(declared)
    if not jnp.issubdtype(mass.dtype, jnp.floating):
        mass = mass.astype(float)
    if mass.shape == (state_size,):
        mass = jnp.diag(mass)
    elif mass.shape != (state_size, state_size):
        raise ValueError(
            f"{owner}.mass_matrix must be of shape ({state_size},) (the diagonal) or "
            f"({state_size}, {state_size}) for a state of {state_size} components; got shape "
            f"{mass.shape}."
        )
    if is_concrete(mass) and not np.all(np.isfinite(np.asarray(mass))):
        raise ValueError(f"{owner}.mass_matrix must be finite; it holds NaN or inf.")
    return mass


def refuse_mass_matrix(model: Any, solver_label: str) -> None:
    """Raises for a model with a mass matrix given to a solver that ignores it."""
    if has_mass_matrix(model):
        raise ValueError(
            f"{type(model).__name__} declares a mass matrix (M y' = f(t, y), "
            f"differential-algebraic where M is singular), which {solver_label} cannot take: "
            f"it solves y' = f(t, y). Pass {STIFF_SOLVERS_WITH_MASS}."
        )
