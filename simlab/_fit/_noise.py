r"""Noise models: the likelihood of an observation given the model's prediction.

A fit is maximum likelihood, $\hat\theta = \arg\min_\theta \sum_i -\log p(y_i \mid \mu_i(\theta))$,
$\mu_i$ the predicted value of observation $y_i$. Noise models whose negative log-likelihood is
$\tfrac12 r_i^2$ plus terms free of $\theta$ (Gaussian, log-normal) are fitted by least squares
on the residuals $r_i$, and their covariance is the Gauss–Newton form, exact for them; the
others are fitted by a quasi-Newton minimiser on the negative log-likelihood, and their
covariance is the inverse Hessian (the observed Fisher information).
"""

import abc
import math
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import jax.scipy.stats as jstats
import numpy as np
from jaxtyping import Array, ArrayLike

from .._misc import is_concrete

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class AbstractNoise(eqx.Module):
    r"""A noise model: $-\log p(y \mid \mu)$ for each observation.

    Subclass it for a likelihood of your own: implement `negative_log_likelihood`. Its
    floating-point array fields (e.g. a dispersion) are fitted with the model's parameters,
    on a log scale, so they must be positive; constants belong in plain Python fields.

    !!! example

        ```python
        import equinox as eqx
        import jax.numpy as jnp
        import jax.scipy.stats as jstats
        import simlab

        class StudentT(simlab.AbstractNoise):
            scale: float
            df: float = 4.0

            def negative_log_likelihood(self, predicted, observed, noise_scale):
                z = (observed - predicted) / (self.scale * noise_scale)
                return -jstats.t.logpdf(z, self.df) + jnp.log(self.scale * noise_scale)
        ```
    """

    # Whether the likelihood is defined only for a positive predicted mean: a fit then
    # refuses to start where the prediction is not (its loss would be flat there).
    needs_positive_mean: ClassVar[bool] = False

    @abc.abstractmethod
    def negative_log_likelihood(self, predicted: Array, observed: Array, noise_scale: Array):
        """$-\\log p(y \\mid \\mu)$, elementwise: `predicted` $\\mu$, `observed` $y$ and the
        per-point `noise_scale` all have one shape, and so does the result."""

    def check_observations(self, observations: np.ndarray, where: str) -> None:
        """Raises a `ValueError` if the (observed, finite) values do not suit this model."""


class AbstractLeastSquaresNoise(AbstractNoise):
    r"""A noise model with $-\log p(y\mid\mu) = \tfrac12 r(\mu, y)^2 + c(y)$: fitted by least
    squares on $r$, with a noise scale $\sigma$ that is given or estimated."""

    @abc.abstractmethod
    def residuals(self, predicted: Array, observed: Array, noise_scale: Array) -> Array:
        """The standardised residual $r$ of each observation."""


class Gaussian(AbstractLeastSquaresNoise):
    r"""Additive Gaussian noise: $y = \mu + \sigma\varepsilon$, $\varepsilon \sim N(0, 1)$.

    $r = (\mu - y)/\sigma$ and $-\log p = \tfrac12 r^2 + \log\sigma + \tfrac12\log 2\pi$.
    """

    def residuals(self, predicted, observed, noise_scale):
        return (predicted - observed) / noise_scale

    def negative_log_likelihood(self, predicted, observed, noise_scale):
        r = self.residuals(predicted, observed, noise_scale)
        return 0.5 * r**2 + jnp.log(noise_scale) + _HALF_LOG_2PI


class LogNormal(AbstractLeastSquaresNoise):
    r"""Multiplicative noise: $\log y = \log\mu + \sigma\varepsilon$, $\varepsilon \sim N(0,1)$.

    The usual model for concentrations and population counts far from zero: the error is a
    fraction of the value. $r = (\log\mu - \log y)/\sigma$ and
    $-\log p = \tfrac12 r^2 + \log\sigma + \log y + \tfrac12\log 2\pi$. Data must be positive.
    """

    needs_positive_mean: ClassVar[bool] = True

    def residuals(self, predicted, observed, noise_scale):
        tiny = jnp.finfo(jnp.result_type(predicted)).tiny
        return (jnp.log(jnp.maximum(predicted, tiny)) - jnp.log(observed)) / noise_scale

    def negative_log_likelihood(self, predicted, observed, noise_scale):
        r = self.residuals(predicted, observed, noise_scale)
        return 0.5 * r**2 + jnp.log(noise_scale) + jnp.log(observed) + _HALF_LOG_2PI

    def check_observations(self, observations, where):
        if np.any(observations <= 0):
            raise ValueError(
                f"noise='lognormal' needs positive data, but observations{where} hold "
                f"{int(np.sum(observations <= 0))} value(s) <= 0; use noise='gaussian', or "
                "'poisson'/'negative_binomial' for counts that can be zero."
            )


def _check_counts(observations: np.ndarray, where: str, name: str) -> None:
    bad = (observations < 0) | (observations != np.round(observations))
    if np.any(bad):
        raise ValueError(
            f"noise={name!r} models counts, but observations{where} hold {int(np.sum(bad))} "
            f"negative or non-integer value(s) (e.g. {observations[bad][0]:g}); use "
            "noise='gaussian' or 'lognormal' for continuous data."
        )


def _positive(predicted):
    # A count model needs a positive mean; a trial point predicting <= 0 is given a mean
    # just above zero, which the data then penalise heavily (a finite, rejectable loss).
    return jnp.maximum(predicted, jnp.finfo(jnp.result_type(predicted)).tiny ** 0.5)


class Poisson(AbstractNoise):
    r"""Counts: $y \sim \mathrm{Poisson}(\mu)$, $-\log p = \mu - y\log\mu + \log y!$.

    Variance equals the mean; `noise_scale` is not used.
    """

    needs_positive_mean: ClassVar[bool] = True

    def negative_log_likelihood(self, predicted, observed, noise_scale):
        return -jstats.poisson.logpmf(observed, _positive(predicted))

    def check_observations(self, observations, where):
        _check_counts(observations, where, "poisson")


class NegativeBinomial(AbstractNoise):
    r"""Over-dispersed counts: mean $\mu$, variance $\mu + \phi\mu^2$, dispersion $\phi > 0$
    fitted with the model (the Poisson model is the limit $\phi \to 0$).

    $p(y) = \binom{y + 1/\phi - 1}{y}\, q^{1/\phi} (1-q)^y$ with $q = 1/(1 + \phi\mu)$.

    **Arguments:**

    - `dispersion`: the starting value of $\phi$.
    """

    needs_positive_mean: ClassVar[bool] = True

    dispersion: Array

    def __init__(self, dispersion: ArrayLike = 1.0):
        self.dispersion = jnp.asarray(dispersion, dtype=float)

    def __check_init__(self):
        if is_concrete(self.dispersion) and not (
            self.dispersion.ndim == 0 and 0 < float(self.dispersion) < math.inf
        ):
            raise ValueError(
                f"the dispersion of a negative binomial must be one positive, finite number "
                f"(the Poisson limit is dispersion -> 0); got {np.asarray(self.dispersion)}."
            )

    def negative_log_likelihood(self, predicted, observed, noise_scale):
        mean = _positive(predicted)
        size = 1.0 / self.dispersion
        return -jstats.nbinom.logpmf(observed, size, size / (size + mean))

    def check_observations(self, observations, where):
        _check_counts(observations, where, "negative_binomial")


NOISE_MODELS = {
    "gaussian": Gaussian,
    "lognormal": LogNormal,
    "poisson": Poisson,
    "negative_binomial": NegativeBinomial,
}


def noise_model(noise) -> AbstractNoise:
    """The noise model named by `noise=` (a name or an `AbstractNoise` instance)."""
    if isinstance(noise, AbstractNoise):
        return noise
    if isinstance(noise, str) and noise in NOISE_MODELS:
        return NOISE_MODELS[noise]()
    raise ValueError(
        f"unknown noise model {noise!r}; use one of {list(NOISE_MODELS)} or an instance of "
        "simlab.AbstractNoise."
    )


def noise_parameters(noise: AbstractNoise) -> list[str]:
    """Names of the noise model's fitted (floating-point array) fields."""
    return [
        name
        for name in noise.__dataclass_fields__
        if eqx.is_inexact_array(getattr(noise, name, None))
    ]
