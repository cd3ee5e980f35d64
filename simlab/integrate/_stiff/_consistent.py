r"""Consistent initial values for $M y' = f(t, y)$ with a constant, possibly singular $M$.

With the singular value decomposition $M = U \Sigma V^\top$, the columns of $U$ and $V$
belonging to zero singular values span the algebraic equations ($U_a^\top f = 0$) and the
algebraic directions of the state ($V_a$). Given the differential part $V_d^\top y_0$, the
algebraic part is found by Newton's method on the square system

$$U_a^\top f(t_0, y) = 0, \qquad V_d^\top (y - y_0) = 0.$$

For a diagonal $M$ with zeros this solves the algebraic components and keeps the others;
for a full $M$ (circuits, where a capacitor couples two node voltages) it keeps what $M$
sees of $y_0$ and adjusts the rest. The subspaces are structural (which equations are
algebraic), so no derivative flows through the decomposition: one of $M$'s repeated
singular values would make it infinite.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool

from ..._results import RESULTS
from ._lu import lu_factor, lu_solve

# The algebraic block is taken as singular below this many roundoffs of its largest value.
SINGULAR_ROUNDOFFS = 1e4
NEWTON_MAX_STEPS = 64  # Newton iterations; a consistent state takes a handful


class AlgebraicSplit(NamedTuple):
    """The singular vectors of the mass matrix and which of them are algebraic."""

    left: Array  # U: column i pairs with singular value i
    right_t: Array  # V^T: row i pairs with singular value i
    algebraic: Bool[Array, " n"]


class Initialization(NamedTuple):
    """What the consistent initialization found: the state, its status, what was changed
    (`correction = y - y0`) and the largest residual of the algebraic equations there."""

    y0: Array
    status: RESULTS
    correction: Array
    residual: Array


def algebraic_split(mass: Array) -> AlgebraicSplit:
    """The singular vectors of `mass`, with singular values below roundoff marked algebraic."""
    mass = jax.lax.stop_gradient(mass)
    left, values, right_t = jnp.linalg.svd(mass)
    roundoff = mass.shape[0] * jnp.finfo(mass.dtype).eps * values[0]
    return AlgebraicSplit(left, right_t, values <= roundoff)


def algebraic_residual(split: AlgebraicSplit, f: Array) -> Array:
    """The largest absolute residual of the algebraic equations $U_a^\\top f$."""
    return jnp.max(jnp.where(split.algebraic, jnp.abs(split.left.T @ f), 0.0), initial=0.0)


def algebraic_block_singular(split: AlgebraicSplit, jac: Array) -> Array:
    r"""Whether $U_a^\top J V_a$, the Jacobian of the algebraic equations in the algebraic
    directions, is singular: then the system is not of index 1 (a constraint that does
    not involve the algebraic unknowns, as in a pendulum's position constraint)."""
    block = split.left.T @ jac @ split.right_t.T
    both = split.algebraic[:, None] & split.algebraic[None, :]
    scale = jnp.max(jnp.where(both, jnp.abs(block), 0.0))
    scale = jnp.where(scale > 0, scale, 1.0)
    # The differential directions get the identity (times the scale), leaving only the
    # algebraic block to decide the smallest singular value.
    padded = jnp.where(both, block, scale * jnp.eye(block.shape[0], dtype=block.dtype))
    smallest = jnp.min(jnp.linalg.svd(padded, compute_uv=False))
    threshold = SINGULAR_ROUNDOFFS * block.shape[0] * jnp.finfo(block.dtype).eps * scale
    return jnp.any(split.algebraic) & (smallest <= threshold)


def consistent_initial_state(
    vector_field, t0: Array, y0: Array, mass: Array, rtol: Array, atol: Array, *, solve: bool
) -> Initialization:
    """Makes `y0` consistent with the algebraic equations (`solve=True`) or checks it only.

    The status is `RESULTS.singular_algebraic_jacobian` where the algebraic block of the
    Jacobian is singular at `y0`, `RESULTS.inconsistent_initial_state` where Newton's
    method finds no consistent state, and successful otherwise.
    """
    split = algebraic_split(mass)
    jac = jax.jacfwd(lambda y: vector_field(t0, y))(y0)
    singular = algebraic_block_singular(split, jac)
    if solve:
        y = _newton(vector_field, t0, y0, split, rtol, atol)
    else:
        y = y0
    finite = jnp.all(jnp.isfinite(y))
    y = jnp.where(finite & ~singular, y, y0)
    residual = algebraic_residual(split, vector_field(t0, y))
    status = RESULTS.where(finite, RESULTS.successful, RESULTS.inconsistent_initial_state)
    status = RESULTS.where(singular, RESULTS.singular_algebraic_jacobian, status)
    return Initialization(y, status, y - y0, residual)


def _newton(vector_field, t0, y0, split: AlgebraicSplit, rtol, atol) -> Array:
    r"""Newton's method on the algebraic equations with the differential part held;
    `NaN` where it does not converge.

    The iterations run on values (no derivative flows through them); one more Newton step
    from the converged state then carries the derivative of the implicit function
    theorem, $-(\partial R/\partial y)^{-1} \partial R/\partial \theta$, as the residual
    vanishes there. Written with `jnp` rather than Optimistix, whose linear solves compare
    the operator's structure with its sharding, which `simlab.sweep`'s `shard_map` adds.
    """

    def residual(y):
        algebraic = split.left.T @ vector_field(t0, y)
        differential = split.right_t @ (y - y0)
        return jnp.where(split.algebraic, algebraic, differential)

    def newton_step(y):
        return y - lu_solve(lu_factor(jax.jacfwd(residual)(y)), residual(y))

    def running(carry):
        _, change, iterations = carry
        return (iterations < NEWTON_MAX_STEPS) & (change > 1.0)  # NaN: stop

    def iterate(carry):
        y, _, iterations = carry
        y_new = newton_step(y)
        scale = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y_new))
        change = jnp.max(jnp.abs(y_new - y) / scale)
        return y_new, change, iterations + 1

    start = (jax.lax.stop_gradient(y0), jnp.array(jnp.inf, y0.dtype), jnp.array(0))
    converged_y, change, _ = jax.lax.while_loop(running, iterate, start)
    converged = change <= 1.0
    y = newton_step(jax.lax.stop_gradient(converged_y))
    return jnp.where(converged, y, jnp.nan)
