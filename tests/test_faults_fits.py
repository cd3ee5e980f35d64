"""Degenerate fits, sampler inputs and folded branches: each is refused, flagged, or followed.

A successor of test_faults.py for fits, the sampler and continuation.
"""

import warnings
from typing import ClassVar

import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float

import simlab
from simlab.models import AbstractODEModel, parameter


class Decay(AbstractODEModel):
    """dx/dt = -a x: x(t) = x0 exp(-a t)."""

    a: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return -self.a * y


class Counter(AbstractODEModel):
    """dx/dt = rate: a cumulative count x(t) = rate t from x(0) = 0."""

    rate: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return jnp.broadcast_to(self.rate, y.shape)


# --- 5. degenerate fits are refused or flagged -------------------------------------------

TWO_TIMES = jnp.array([0.0, 1.0])
TWO_POINTS = 1.3 * jnp.exp(-0.7 * TWO_TIMES)[:, None]


def _fit_two_points(**settings):
    """x0 and a from two observations: as many unknowns as data."""
    return simlab.fit(
        Decay(a=0.5), TWO_TIMES, TWO_POINTS, y0=jnp.array([1.0]), params=["a"], fit_y0=True,
        **settings,
    )  # fmt: skip


def test_a_fitted_noise_scale_with_no_degrees_of_freedom_is_flagged():
    with pytest.warns(UserWarning, match="no degrees of freedom for its noise scale: 2 observed"):
        result = _fit_two_points()
    assert bool(result.converged)  # the curve passes through both points...
    np.testing.assert_allclose(result.params["a"], 0.7, rtol=1e-6)
    # ...but nothing is left to estimate the noise from: no scale, no errors, no likelihood.
    for value in (result.noise_variance, result.stderr["a"], result.log_likelihood):
        assert np.isnan(value)
    assert np.isnan(result.aic) and np.isnan(result.bic)


def test_a_known_noise_scale_with_no_degrees_of_freedom_is_well_defined():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = _fit_two_points(noise_scale=0.1)
    # a = log(y1 / y2): Var a = s² (1/y1² + 1/y2²) by the delta method, exact here.
    y1, y2 = np.asarray(TWO_POINTS[:, 0])
    np.testing.assert_allclose(result.stderr["a"], 0.1 * np.hypot(1 / y1, 1 / y2), rtol=1e-6)
    np.testing.assert_allclose(result.y0_stderr, [0.1], rtol=1e-6)
    assert np.isfinite(result.aic) and np.isfinite(result.log_likelihood)


@pytest.mark.parametrize("noise", ["poisson", "negative_binomial", "lognormal"])
def test_a_start_predicting_a_non_positive_mean_is_refused(noise):
    ts = jnp.linspace(0.0, 2.0, 5)
    data = jnp.array([[3.0], [2.0], [4.0], [1.0], [2.0]])
    with pytest.raises(
        ValueError, match=r"needs a positive predicted mean.*e\.g\. -5 for x at t = 0, where 3"
    ):
        simlab.fit(Decay(a=0.5), ts, data, y0=jnp.array([-5.0]), params=["a"], noise=noise)


def test_a_count_that_starts_at_zero_where_zero_is_observed_is_fitted():
    """Poisson counts with mean rate·t: the maximum-likelihood rate is Σy / Σt."""
    ts = jnp.arange(5.0)
    counts = jnp.array([0.0, 2.0, 5.0, 5.0, 9.0])
    result = simlab.fit(
        Counter(rate=1.0), ts, counts[:, None], y0=jnp.array([0.0]), params=["rate"],
        noise="poisson",
    )  # fmt: skip
    np.testing.assert_allclose(result.params["rate"], counts.sum() / ts.sum(), rtol=1e-6)
