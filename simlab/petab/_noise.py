"""PEtab's noise models: the negative log-likelihood of measurements given simulated values
and the noise parameter, for normal and Laplace noise on a lin, log or log10 scale."""

import math

import jax.numpy as jnp

TRANSFORMATIONS = ("lin", "log", "log10")
DISTRIBUTIONS = ("normal", "laplace")


def negative_log_likelihood(simulated, measured, sigma, transformation: str, distribution: str):
    """Elementwise $-\\log p(m \\mid s, \\sigma)$ of measurements `measured` on the linear
    scale, with the noise on the `transformation` scale of the simulated values `simulated`:
    `sigma` is the standard deviation (normal) or the scale (Laplace) there. The density is
    of the untransformed measurement, so a log scale adds $\\log m$ (and $\\log \\ln 10$)."""
    if transformation not in TRANSFORMATIONS:
        raise NotImplementedError(f"PEtab: observableTransformation {transformation!r}.")
    if distribution not in DISTRIBUTIONS:
        raise NotImplementedError(f"PEtab: noiseDistribution {distribution!r}.")
    if transformation == "lin":
        residual, jacobian = simulated - measured, 0.0
    elif transformation == "log":
        residual, jacobian = jnp.log(simulated) - jnp.log(measured), jnp.log(measured)
    else:
        residual = jnp.log10(simulated) - jnp.log10(measured)
        jacobian = jnp.log(measured * math.log(10.0))
    if distribution == "normal":
        return (
            0.5 * math.log(2 * math.pi) + jnp.log(sigma) + jacobian + 0.5 * (residual / sigma) ** 2
        )
    return jnp.log(2 * sigma) + jacobian + jnp.abs(residual) / sigma


def unscale(x, scales: tuple[str, ...]):
    """Parameters on their PEtab scales (lin, log, log10) as linear values."""
    if not scales:
        return jnp.asarray(x)
    x = jnp.asarray(x)
    return jnp.stack(
        [
            x[i] if s == "lin" else jnp.exp(x[i]) if s == "log" else 10.0 ** x[i]
            for i, s in enumerate(scales)
        ]
    )
