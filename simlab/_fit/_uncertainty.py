"""Standard errors from the observed Fisher information at the optimum: the Gauss–Newton
form $J^\top J$ for least-squares noise, the Hessian of the negative log-likelihood else."""

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
        labels += [path] if shape == () else [f"{path}[{_entry(i)}]" for i in np.ndindex(shape)]
    if problem.fit_y0:
        many_sets = len(problem.experiments) > 1
        for g, experiment in enumerate(problem.experiments):
            batch, *state_shape = experiment.y0.shape
            # Named components read `y0.prey`; a grid's entries `y0[2,3]`, as NumPy indexes.
            entries = (
                [f".{name}" for name in state_names]
                if state_names and len(state_shape) == 1 and len(state_names) == state_shape[0]
                else [f"[{_entry(i)}]" for i in np.ndindex(*state_shape)]
            )
            for b in range(batch):
                prefix = "y0" + (f"[{g}]" if many_sets else "") + (f"[{b}]" if batch > 1 else "")
                labels += [prefix + entry for entry in entries]
    labels += [f"noise.{path}" for path in problem.noise_paths]
    return tuple(labels)


def _entry(index: tuple[int, ...]) -> str:
    """An array entry's index as NumPy writes it: `(1, 2)` → `"1,2"`."""
    return ",".join(str(i) for i in index)


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


def residual_jacobian(problem: FitProblem, model, y0s):
    r"""$J = \partial r / \partial\theta$ in natural units, and the predictions at $\theta$
    (`FitProblem.predictions_at`), both from one forward-mode pass through the solves.

    Differentiating with respect to $\theta$ itself is the chain rule through the transform
    done exactly: $\operatorname{Cov}_\theta = G\,\operatorname{Cov}_u G^\top$ with
    $G = \mathrm{d}\theta/\mathrm{d}u$. Rows of missing observations are zero.
    """
    theta = natural_values(problem, model, y0s)

    def residuals_of(theta):
        fitted_model, fitted_y0s = with_natural_values(problem, model, y0s, theta)
        predictions = problem.predictions_at(fitted_model, fitted_y0s, "forward")
        return problem.residuals_from(predictions)[0], predictions

    return jax.jacfwd(residuals_of, has_aux=True)(theta)


def covariance(jacobian: Array, sigma2: Array):
    r"""$\sigma^2 (J^\top J)^{-1}$, $J$ from `residual_jacobian`.

    `sigma2` is 1 when the noise scales are known, else the estimated residual variance.
    Columns are scaled to unit norm before the SVD so that the singular-value test does not
    depend on units. Entries along a near-singular direction get variance `inf` (and `nan`
    covariances); the returned flags say which.
    """
    column_norms = jnp.linalg.norm(jacobian, axis=0)
    safe_norms = jnp.where(column_norms > 0, column_norms, 1.0)
    _, singular, vh = jnp.linalg.svd(jacobian / safe_norms[None, :], full_matrices=False)
    return _pseudo_inverse(singular**2, vh, safe_norms**2, column_norms == 0, sigma2)


def hessian_covariance(problem: FitProblem, model, y0s, noise):
    r"""$H^{-1}$, $H$ the Hessian of $-\log L$ in natural units: the fitted scalars, then the
    noise model's parameters. Same scaling and singular-direction test as `covariance`.
    Also returns $-\log L$ and whether every solve succeeded, from the same pass."""
    theta = jnp.concatenate(
        [natural_values(problem, model, y0s)]
        + [jnp.ravel(getattr(noise, p)) for p in problem.noise_paths]
    )
    num_fitted = theta.size - len(problem.noise_paths)

    def nll_of(theta):
        fitted_model, fitted_y0s = with_natural_values(problem, model, y0s, theta[:num_fitted])
        fitted_noise = eqx.tree_at(
            lambda n: [getattr(n, p) for p in problem.noise_paths],
            noise,
            list(theta[num_fitted:]),
        )
        nll, ok = problem.negative_log_likelihood_at(
            fitted_model, fitted_y0s, fitted_noise, "forward"
        )
        return nll, (nll, ok)

    hessian, likelihood = jax.jacfwd(jax.jacfwd(nll_of, has_aux=True), has_aux=True)(theta)
    hessian = 0.5 * (hessian + hessian.T)
    diagonal = jnp.abs(jnp.diag(hessian))
    safe = jnp.where(diagonal > 0, diagonal, 1.0)
    scale = jnp.sqrt(safe)
    eigenvalues, vectors = jnp.linalg.eigh(hessian / jnp.outer(scale, scale))
    order = jnp.argsort(eigenvalues)[::-1]
    cov, unidentifiable = _pseudo_inverse(
        eigenvalues[order], vectors[:, order].T, safe, diagonal == 0, 1.0
    )
    return cov, unidentifiable, likelihood


def _pseudo_inverse(values, vh, squared_norms, zero_columns, sigma2):
    """`sigma2 · V diag(1/values) Vᵀ / (n nᵀ)` over the informative directions (values in
    decreasing order); flags the scalars that take part in an uninformative one."""
    small = values <= SINGULAR_RTOL**2 * values[0]
    inverse = jnp.where(small, 0.0, 1.0 / jnp.where(small, 1.0, values))
    norms = jnp.sqrt(squared_norms)
    cov = sigma2 * ((vh.T * inverse[None, :]) @ vh) / jnp.outer(norms, norms)
    # A parameter takes part in a singular direction when it has weight in that singular
    # vector; a parameter with no effect at all (zero column) is unidentifiable too.
    involvement = jnp.max(jnp.where(small[:, None], jnp.abs(vh), 0.0), axis=0)
    unidentifiable = (involvement > 1e-3) | zero_columns
    either = unidentifiable[:, None] | unidentifiable[None, :]
    cov = jnp.where(either, jnp.nan, cov)
    cov = jnp.where(jnp.diag(unidentifiable), jnp.inf, cov)
    return cov, unidentifiable
