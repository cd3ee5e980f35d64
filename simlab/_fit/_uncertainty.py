"""Standard errors from the Gauss–Newton approximation of the Hessian at the optimum."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._problem import FitProblem, get_path

# A direction is unidentifiable when its singular value, relative to the largest, is below
# this: about the square root of float64 precision, far below any real information content.
SINGULAR_RTOL = 1e-7


def covariance_labels(problem: FitProblem, state_names) -> tuple[str, ...]:
    """Names of the scalar entries the covariance is over: parameters, then fitted y0."""
    labels = []
    for path in problem.array_paths:
        shape = jnp.shape(get_path(problem.model, path))
        labels += [path] if shape == () else [f"{path}[{i}]" for i in np.ndindex(shape)]
    if problem.fit_y0:
        many_sets = len(problem.experiments) > 1
        for g, experiment in enumerate(problem.experiments):
            batch, *state_shape = experiment.y0.shape
            names = (
                list(state_names)
                if state_names and len(state_shape) == 1 and len(state_names) == state_shape[0]
                else [str(i) for i in np.ndindex(*state_shape)]
            )
            for b in range(batch):
                prefix = "y0" + (f"[{g}]" if many_sets else "") + (f"[{b}]" if batch > 1 else "")
                labels += [f"{prefix}.{name}" for name in names]
    return tuple(labels)


def natural_values(problem: FitProblem, model, y0s) -> Array:
    """The fitted scalars in natural units, flattened in `covariance_labels` order."""
    parts = [jnp.ravel(get_path(model, p)) for p in problem.array_paths]
    if problem.fit_y0:
        parts += [jnp.ravel(y0) for y0 in y0s]
    return jnp.concatenate(parts) if parts else jnp.zeros((0,))


def with_natural_values(problem: FitProblem, model, y0s, theta: Array):
    """The inverse of `natural_values`: puts the flat vector `theta` back in place."""
    offset, values = 0, []
    for path in problem.array_paths:
        old = get_path(model, path)
        values.append(theta[offset : offset + old.size].reshape(old.shape))
        offset += old.size
    if problem.array_paths:
        model = eqx.tree_at(lambda m: [get_path(m, p) for p in problem.array_paths], model, values)
    if problem.fit_y0:
        new_y0s = []
        for y0 in y0s:
            new_y0s.append(theta[offset : offset + y0.size].reshape(y0.shape))
            offset += y0.size
        y0s = tuple(new_y0s)
    return model, y0s


def covariance(problem: FitProblem, model, y0s, loss: Array, num_fitted: int):
    r"""$\hat\sigma^2 (J^\top J)^{-1}$ with $J = \partial r / \partial\theta$ in natural units.

    Differentiating with respect to $\theta$ itself is the chain rule through the transform
    done exactly: $\operatorname{Cov}_\theta = G\,\operatorname{Cov}_u G^\top$ with
    $G = \mathrm{d}\theta/\mathrm{d}u$. $\hat\sigma^2 = 2\,\mathrm{loss}/(N - p)$ counts every
    fitted scalar in $p$ (network weights included). Columns are scaled to unit norm before
    the SVD so that the singular-value test does not depend on units. Entries along a
    near-singular direction get variance `inf` (and `nan` covariances); the returned flags
    say which.
    """
    theta = natural_values(problem, model, y0s)

    def residuals_of(theta):
        return problem.residuals_at(*with_natural_values(problem, model, y0s, theta), "forward")[0]

    jacobian = jax.jacfwd(residuals_of)(theta)
    num_residuals = jacobian.shape[0]
    dof = num_residuals - num_fitted
    sigma2 = jnp.where(dof > 0, 2 * loss / max(dof, 1), jnp.nan)
    column_norms = jnp.linalg.norm(jacobian, axis=0)
    safe_norms = jnp.where(column_norms > 0, column_norms, 1.0)
    _, singular, vh = jnp.linalg.svd(jacobian / safe_norms[None, :], full_matrices=False)
    small = singular <= SINGULAR_RTOL * singular[0]
    inverse_squares = jnp.where(small, 0.0, 1.0 / jnp.where(small, 1.0, singular) ** 2)
    scaled_cov = (vh.T * inverse_squares[None, :]) @ vh
    cov = sigma2 * scaled_cov / jnp.outer(safe_norms, safe_norms)
    # A parameter takes part in a singular direction when it has weight in that singular
    # vector; a parameter with no effect at all (zero column) is unidentifiable too.
    involvement = jnp.max(jnp.where(small[:, None], jnp.abs(vh), 0.0), axis=0)
    unidentifiable = (involvement > 1e-3) | (column_norms == 0)
    either = unidentifiable[:, None] | unidentifiable[None, :]
    cov = jnp.where(either, jnp.nan, cov)
    cov = jnp.where(jnp.diag(unidentifiable), jnp.inf, cov)
    return cov, unidentifiable
