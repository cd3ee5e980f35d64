"""simlab.fit as maximum likelihood: t0, missing data, noise models, against SciPy."""

from typing import ClassVar

import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.optimize
import scipy.special
import scipy.stats
from jaxtyping import Array, Float

import simlab
from simlab.models import AbstractODEModel, parameter


class Decay(AbstractODEModel):
    """dx/dt = -rate x: x(t) = x0 exp(-rate (t - t0))."""

    rate: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return -self.rate * y


class TwoDecays(AbstractODEModel):
    """Two independent decays sharing nothing but the fit: x' = -a x, y' = -b y."""

    a: Float[Array, ""] = parameter(lower=0.0)
    b: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x", "y")

    def __call__(self, t, y, args):
        return jnp.stack([-self.a * y[0], -self.b * y[1]])


# Tight solves, so that the fit's likelihood equals the closed form to ~1e-9.
TIGHT = dict(rtol=1e-10, atol=1e-12)
TS = jnp.linspace(0.5, 4.0, 15)


def closed_form(amplitude, rate, ts, t0=0.0):
    return amplitude * np.exp(-rate * (np.asarray(ts) - t0))


# --- t0 and missing data -----------------------------------------------------------------


def test_t0_starts_the_simulation_before_the_first_observation():
    observations = closed_form(3.0, 0.7, TS)[:, None]  # x(0) = 3, observed from t = 0.5
    result = simlab.fit(
        Decay(rate=0.3),
        TS,
        observations,
        y0=jnp.array([1.0]),
        t0=0.0,
        params=["rate"],
        fit_y0=True,
        simulate_options=TIGHT,
    )
    np.testing.assert_allclose(result.params["rate"], 0.7, rtol=1e-7)
    np.testing.assert_allclose(result.y0, [3.0], rtol=1e-7)  # the state at t0, not at ts[0]
    prediction, _ = result.predict(jnp.array([0.25, 1.0, 2.0]))
    np.testing.assert_allclose(prediction[:, 0], closed_form(3.0, 0.7, [0.25, 1.0, 2.0]), 1e-6)
    from_t0, _ = result.predict(jnp.array([0.0, 1.0]))  # t0 itself may be asked for
    np.testing.assert_allclose(from_t0[:, 0], closed_form(3.0, 0.7, [0.0, 1.0]), 1e-6)
    with pytest.raises(ValueError, match="t0 = 0.5 must come before the first observation"):
        simlab.fit(Decay(rate=0.3), TS, observations, y0=jnp.ones(1), t0=0.5, params=["rate"])


@pytest.fixture(scope="module")
def noisy_decay():
    clean = closed_form(2.0, 0.8, TS)[:, None]
    return clean + 0.05 * np.asarray(jr.normal(jr.key(0), clean.shape))


def test_missing_values_equal_a_fit_on_the_observed_subset(noisy_decay):
    missing = np.array([1, 4, 5, 11])
    keep = np.setdiff1d(np.arange(TS.size), missing)
    with_nan = noisy_decay.copy()
    with_nan[missing] = np.nan
    settings = dict(y0=jnp.ones(1), t0=0.0, params=["rate"], fit_y0=True, simulate_options=TIGHT)
    masked = simlab.fit(Decay(rate=0.3), TS, with_nan, **settings)
    subset = simlab.fit(Decay(rate=0.3), TS[keep], noisy_decay[keep], **settings)
    assert int(masked.num_observed) == keep.size
    for name in ("loss", "noise_variance", "log_likelihood", "aic", "bic"):
        np.testing.assert_allclose(getattr(masked, name), getattr(subset, name), rtol=1e-8)
    np.testing.assert_allclose(masked.params["rate"], subset.params["rate"], rtol=1e-8)
    np.testing.assert_allclose(masked.stderr["rate"], subset.stderr["rate"], rtol=1e-7)
    np.testing.assert_allclose(masked.covariance, subset.covariance, rtol=1e-7)
    # σ² counts the observed values only: 2·loss / (N_observed − p).
    np.testing.assert_allclose(masked.noise_variance, 2 * masked.loss / (keep.size - 2))


def test_observables_measured_at_different_times():
    ts = jnp.linspace(0.0, 3.0, 13)
    clean = np.stack([closed_form(1.0, 0.5, ts), closed_form(2.0, 1.5, ts)], axis=1)
    observations = clean.copy()
    observations[1::2, 0] = np.nan  # x measured at even times only,
    observations[::3, 1] = np.nan  # y at two of every three
    result = simlab.fit(
        TwoDecays(a=1.0, b=1.0),
        ts,
        observations,
        y0=jnp.array([1.0, 2.0]),
        params=["a", "b"],
        noise_scale=0.01,
        simulate_options=TIGHT,
    )
    np.testing.assert_allclose([result.params["a"], result.params["b"]], [0.5, 1.5], rtol=1e-7)
    # Known noise scale: covariance (JᵀJ)⁻¹ over the observed rows only, here in closed form.
    for name, amplitude, rate, column in (("a", 1.0, 0.5, 0), ("b", 2.0, 1.5, 1)):
        t = np.asarray(ts)[~np.isnan(observations[:, column])]
        derivative = -t * closed_form(amplitude, rate, t) / 0.01
        np.testing.assert_allclose(result.stderr[name], 1 / np.linalg.norm(derivative), 1e-6)


def series_fit(ts, observations=None, **settings):
    return simlab.fit(
        TwoDecays(a=1.0, b=1.0),
        ts,
        observations,
        params=["a", "b"],
        fit_y0=True,
        simulate_options=TIGHT,
        **settings,
    )


def test_series_at_their_own_times_equal_the_nan_masked_fit():
    # x measured at 8 times, y at 6 others (two shared); the fit to the two series is the
    # fit to the table on the union of their times with NaN where one was not measured.
    ts_x = np.array([0.0, 0.4, 0.9, 1.3, 1.8, 2.2, 2.9, 3.5])
    ts_y = np.array([0.2, 0.9, 1.5, 2.2, 2.6, 3.1])
    noise = np.asarray(jr.normal(jr.key(5), (ts_x.size + ts_y.size,)))
    x = closed_form(1.0, 0.5, ts_x) + 0.02 * noise[: ts_x.size]
    y = closed_form(2.0, 1.5, ts_y) + 0.02 * noise[ts_x.size :]
    union = np.union1d(ts_x, ts_y)
    table = np.full((union.size, 2), np.nan)
    table[np.searchsorted(union, ts_x), 0] = x
    table[np.searchsorted(union, ts_y), 1] = y
    settings = dict(y0=jnp.array([1.2, 1.8]), t0=-0.5)
    masked = series_fit(jnp.asarray(union), table, **settings)
    series = series_fit([simlab.Series(ts_x, x), simlab.Series(ts_y, y)], **settings)
    assert int(series.num_observed) == ts_x.size + ts_y.size == int(masked.num_observed)
    for name in ("a", "b"):
        np.testing.assert_allclose(series.params[name], masked.params[name], rtol=1e-10)
    np.testing.assert_allclose(series.y0, masked.y0, rtol=1e-10)
    np.testing.assert_allclose(series.covariance, masked.covariance, rtol=1e-8)
    for name in ("loss", "noise_variance", "log_likelihood", "aic"):
        np.testing.assert_allclose(getattr(series, name), getattr(masked, name), rtol=1e-10)
    # ... and both recover the truth within a few standard errors.
    for name, truth in (("a", 0.5), ("b", 1.5)):
        assert abs(float(series.params[name]) - truth) < 4 * float(series.stderr[name])
    # A batch of experiments, and several data sets, take series too.
    batch = [simlab.Series(ts_x, np.stack([x, x])), simlab.Series(ts_y, np.stack([y, y]))]
    batched = series_fit(batch, y0=jnp.array([[1.2, 1.8], [1.2, 1.8]]), t0=-0.5)
    np.testing.assert_allclose(batched.params["a"], masked.params["a"], rtol=1e-8)
    sets = series_fit(
        [[simlab.Series(ts_x, x), simlab.Series(ts_y, y)]] * 2,
        y0=[jnp.array([1.2, 1.8])] * 2,
        t0=-0.5,
    )
    np.testing.assert_allclose(sets.params["b"], masked.params["b"], rtol=1e-8)


@pytest.mark.parametrize(
    ("data", "observations", "match"),
    [
        ([simlab.Series([0.0, 1.0], [1.0, 2.0])] * 2, np.ones((2, 2)), "leave observations out"),
        (jnp.linspace(0.0, 1.0, 5), None, "observations are missing"),
        ([simlab.Series([0.0, 1.0], [1.0, 2.0]), [0.0, 1.0]], None, "mixes simlab.Series"),
        ([simlab.Series([0.0, 1.0], [1.0]), simlab.Series([0.0], [1.0])], None, "shape \\(T,\\)"),
        ([simlab.Series([1.0, 0.0], [1.0, 2.0])] * 2, None, "strictly increasing times"),
        (
            [simlab.Series([0.0, 1.0], np.ones((3, 2))), simlab.Series([0.0], [1.0])],
            None,
            "different batch shapes",
        ),
        ([simlab.Series([0.0, 1.0], [1.0, 2.0])] * 3, None, "must have shape \\(len\\(ts\\), 2\\)"),
        ([simlab.Series([0.0, 1.0], [np.nan, np.nan])] * 2, None, "all NaN: nothing is observed"),
    ],
)
def test_bad_series_are_reported(data, observations, match):
    with pytest.raises(ValueError, match=match):
        series_fit(data, observations, y0=jnp.ones(2))


def test_all_missing_and_inf_are_reported():
    nan = np.full((TS.size, 1), np.nan)
    with pytest.raises(ValueError, match="all NaN: nothing is observed"):
        simlab.fit(Decay(rate=0.3), TS, nan, y0=jnp.ones(1), params=["rate"])
    infinite = np.ones((TS.size, 1))
    infinite[3] = np.inf
    with pytest.raises(ValueError, match="1 inf value"):
        simlab.fit(Decay(rate=0.3), TS, infinite, y0=jnp.ones(1), params=["rate"])


# --- noise models: maximum likelihood against an independent SciPy optimisation ----------

COUNT_TS = jnp.linspace(0.0, 5.0, 20)
COUNT_TRUTH = (50.0, 0.6)  # amplitude, rate


def count_fit(observations, noise, **settings):
    return simlab.fit(
        Decay(rate=0.3),
        COUNT_TS,
        observations,
        y0=jnp.array([30.0]),
        params=["rate"],
        fit_y0=True,
        noise=noise,
        simulate_options=TIGHT,
        **settings,
    )


@pytest.fixture(scope="module")
def counts():
    mean = closed_form(*COUNT_TRUTH, COUNT_TS)
    return np.asarray(jr.poisson(jr.key(1), mean), dtype=float)[:, None]


def poisson_nll(x, y):
    mean = closed_form(x[0], x[1], COUNT_TS)
    return np.sum(mean - y * np.log(mean) + scipy.special.gammaln(y + 1))


def scipy_minimum(nll, x0):
    found = scipy.optimize.minimize(
        nll, x0, method="Nelder-Mead", options=dict(xatol=1e-10, fatol=1e-11, maxiter=40_000)
    )
    assert found.success, found.message
    return found.x, found.fun


def finite_difference_hessian(f, x, step=1e-4):
    x = np.asarray(x, float)
    h = step * np.maximum(np.abs(x), 1.0)
    hessian = np.empty((x.size, x.size))
    for i in range(x.size):
        for j in range(x.size):
            ei, ej = np.eye(x.size)[i] * h[i], np.eye(x.size)[j] * h[j]
            hessian[i, j] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)) / (
                4 * h[i] * h[j]
            )
    return hessian


@pytest.fixture(scope="module")
def poisson_fit(counts):
    return count_fit(counts, "poisson")


def test_poisson_mle_and_covariance_equal_scipy(counts, poisson_fit):
    y = counts[:, 0]
    x, nll = scipy_minimum(lambda x: poisson_nll(x, y), [30.0, 0.3])
    fitted = [float(poisson_fit.y0[0]), float(poisson_fit.params["rate"])]
    np.testing.assert_allclose(fitted, x, rtol=1e-5)
    np.testing.assert_allclose(poisson_fit.log_likelihood, -nll, rtol=1e-9)
    np.testing.assert_allclose(poisson_fit.aic, 2 * 2 + 2 * nll, rtol=1e-9)
    np.testing.assert_allclose(poisson_fit.bic, 2 * np.log(y.size) + 2 * nll, rtol=1e-9)
    # The covariance is the inverse observed Fisher information (the NLL's Hessian).
    hessian = finite_difference_hessian(lambda x: poisson_nll(x, y), x)
    order = [1, 0]  # the fit lists rate, then y0
    expected = np.linalg.inv(hessian)[np.ix_(order, order)]
    np.testing.assert_allclose(poisson_fit.covariance, expected, rtol=1e-4)
    assert np.isnan(poisson_fit.noise_variance)


class HandWrittenPoisson(simlab.AbstractNoise):
    """The Poisson likelihood as a user would write it."""

    def negative_log_likelihood(self, predicted, observed, noise_scale):
        return predicted - observed * jnp.log(predicted) + jax_gammaln(observed + 1)


def jax_gammaln(x):
    import jax.scipy.special

    return jax.scipy.special.gammaln(x)


def test_a_noise_model_of_ones_own(counts, poisson_fit):
    own = count_fit(counts, HandWrittenPoisson())
    np.testing.assert_allclose(own.params["rate"], poisson_fit.params["rate"], rtol=1e-7)
    np.testing.assert_allclose(own.log_likelihood, poisson_fit.log_likelihood, rtol=1e-10)


@pytest.mark.slow
def test_negative_binomial_fits_its_dispersion_as_scipy_does():
    mean = closed_form(*COUNT_TRUTH, COUNT_TS)
    # Over-dispersed counts: a gamma-Poisson mixture with dispersion 0.2.
    rates = jr.gamma(jr.key(2), 5.0, (mean.size,)) * mean / 5.0
    y = np.asarray(jr.poisson(jr.key(3), rates), dtype=float)
    result = count_fit(y[:, None], simlab.NegativeBinomial(dispersion=0.5))

    def nll(x):
        amplitude, rate, dispersion = x[0], x[1], np.exp(x[2])
        mu, size = closed_form(amplitude, rate, COUNT_TS), 1 / dispersion
        return -np.sum(
            scipy.special.gammaln(y + size)
            - scipy.special.gammaln(size)
            - scipy.special.gammaln(y + 1)
            + size * np.log(size / (size + mu))
            + y * np.log(mu / (size + mu))
        )

    x, minimum = scipy_minimum(nll, [30.0, 0.3, np.log(0.5)])
    fitted = [float(result.y0[0]), float(result.params["rate"])]
    np.testing.assert_allclose(fitted, x[:2], rtol=1e-5)
    np.testing.assert_allclose(result.params["noise.dispersion"], np.exp(x[2]), rtol=1e-5)
    np.testing.assert_allclose(result.log_likelihood, -minimum, rtol=1e-9)
    assert result.covariance_labels == ("rate", "y0.x", "noise.dispersion")
    np.testing.assert_allclose(result.aic, 2 * 3 + 2 * minimum, rtol=1e-9)
    # The covariance, the dispersion's included, is the inverse Hessian of the NLL in
    # natural units (the dispersion itself, not its logarithm).
    optimum = np.array([x[0], x[1], np.exp(x[2])])
    hessian = finite_difference_hessian(lambda z: nll([z[0], z[1], np.log(z[2])]), optimum)
    order = [1, 0, 2]  # the fit lists rate, then y0, then the noise model's dispersion
    expected = np.linalg.inv(hessian)[np.ix_(order, order)]
    np.testing.assert_allclose(result.covariance, expected, rtol=1e-3)


def test_gaussian_and_lognormal_likelihoods_with_a_fitted_scale(noisy_decay):
    y = noisy_decay[:, 0]
    settings = dict(y0=jnp.ones(1), t0=0.0, params=["rate"], fit_y0=True, simulate_options=TIGHT)
    for noise, transform in (("gaussian", lambda v: v), ("lognormal", np.log)):
        result = simlab.fit(Decay(rate=0.3), TS, noisy_decay, noise=noise, **settings)

        def residuals(x, transform=transform):
            return transform(closed_form(x[0], x[1], TS)) - transform(y)

        found = scipy.optimize.least_squares(residuals, [1.0, 0.3], xtol=1e-14, ftol=1e-14)
        fitted = [float(result.y0[0]), float(result.params["rate"])]
        np.testing.assert_allclose(fitted, found.x, rtol=1e-5)
        sigma = np.sqrt(np.mean(found.fun**2))  # the maximum-likelihood noise scale
        mean = closed_form(*found.x, TS)
        if noise == "gaussian":
            log_likelihood = scipy.stats.norm.logpdf(y, mean, sigma).sum()
        else:
            log_likelihood = scipy.stats.lognorm.logpdf(y, s=sigma, scale=mean).sum()
        np.testing.assert_allclose(result.log_likelihood, log_likelihood, rtol=1e-7)
        # k = 3: rate, y0 and the noise scale.
        np.testing.assert_allclose(result.bic, 3 * np.log(y.size) - 2 * log_likelihood, 1e-7)
        # The unbiased residual variance scales the Gauss–Newton covariance.
        jacobian = found.jac
        expected = np.sum(found.fun**2) / (y.size - 2) * np.linalg.inv(jacobian.T @ jacobian)
        np.testing.assert_allclose(result.covariance, expected[::-1, ::-1], rtol=1e-4)


@pytest.mark.parametrize(
    ("noise", "data", "change", "error", "match"),
    [
        ("poisson", -1.0, {}, ValueError, "negative or non-integer value"),
        ("poisson", 2.5, {}, ValueError, "models counts.*e.g. 2.5"),
        ("negative_binomial", -3.0, {}, ValueError, "negative or non-integer"),
        ("lognormal", 0.0, {}, ValueError, "needs positive data"),
        ("poisson", 2.0, dict(fit_noise=True), ValueError, "fit_noise=True fits the scale"),
        ("poisson", 2.0, dict(method="least_squares"), ValueError, "method='quasi_newton'"),
        ("student", 2.0, {}, ValueError, "unknown noise model 'student'"),
        ("gaussian", 2.0, dict(bounds={"rate": (0.5, 2.0)}), ValueError, "rate.*strictly inside"),
        ("gaussian", 2.0, dict(bounds={"rate": (-1.0, 2.0)}), ValueError, "declared range"),
        ("gaussian", 2.0, dict(bounds={"speed": (0.0, 2.0)}), ValueError, "not in params"),
        ("gaussian", 2.0, dict(bounds={"rate": (2.0, 1.0)}), ValueError, "lower < upper"),
        ("poisson", 2.0, dict(noise_scale=0.5), ValueError, "Poisson noise takes no noise_scale"),
    ],
)
def test_noise_models_that_do_not_suit_the_data_are_reported(noise, data, change, error, match):
    observations = np.full((TS.size, 1), 3.0)
    observations[2] = data
    with pytest.raises(error, match=match):
        simlab.fit(
            Decay(rate=0.3),
            TS,
            observations,
            y0=jnp.ones(1),
            params=["rate"],
            noise=noise,
            **change,
        )


@pytest.mark.parametrize("dispersion", [0.0, -1.0, np.inf, np.nan, np.array([0.5, 0.5])])
def test_a_negative_binomial_needs_one_positive_dispersion(dispersion):
    with pytest.raises(ValueError, match="one positive, finite number"):
        simlab.NegativeBinomial(dispersion=dispersion)
