"""simlab.sample: NUTS posteriors against a closed form, diagnostics, priors, bad input."""

from typing import ClassVar

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from jaxtyping import Array, Float

import simlab
import simlab.plot
from simlab.models import AbstractODEModel, parameter


class Drift(AbstractODEModel):
    """dx/dt = slope: x(t) = x(0) + slope t, linear in the slope."""

    slope: Float[Array, ""] = parameter()
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return jnp.broadcast_to(self.slope, y.shape)


TS = jnp.linspace(0.0, 2.0, 10)
SIGMA, PRIOR_MEAN, PRIOR_SD = 0.3, 0.0, 0.5
FAST = dict(solver="rk4", adaptive=False, dt0=0.25)  # exact for a linear solution


def _noisy_line_fit(key, **settings):
    """A fit of x(t) = 1 + 0.7 t observed with noise of sd SIGMA, and the observations."""
    observations = 1.0 + 0.7 * TS + SIGMA * jr.normal(key, TS.shape)
    result = simlab.fit(
        Drift(slope=0.1),
        TS,
        observations[:, None],
        y0=jnp.array([1.0]),
        params=["slope"],
        simulate_options=FAST,
        **settings,
    )
    return result, np.asarray(observations)


@pytest.fixture(scope="module")
def drift_fit():
    return _noisy_line_fit(jr.key(0), noise_scale=SIGMA)


@pytest.fixture(scope="module")
def posterior(drift_fit):
    result, _ = drift_fit
    prior = jax.tree_util.Partial(jax.scipy.stats.norm.logpdf, loc=PRIOR_MEAN, scale=PRIOR_SD)
    return simlab.sample(
        result,
        priors={"slope": prior},
        num_samples=1000,
        num_warmup=300,
        num_chains=4,
        key=jr.key(1),
    )


def test_posterior_matches_the_conjugate_closed_form(drift_fit, posterior):
    _, observations = drift_fit
    t = np.asarray(TS)
    # Gaussian likelihood, linear in the slope, Gaussian prior: a Gaussian posterior.
    precision = 1 / PRIOR_SD**2 + np.sum(t**2) / SIGMA**2
    mean = (PRIOR_MEAN / PRIOR_SD**2 + np.sum(t * (observations - 1.0)) / SIGMA**2) / precision
    sd = precision**-0.5
    draws = posterior.flat_samples()["slope"]
    summary = posterior.summary()
    ess = float(summary.loc["slope", "ess_bulk"])
    assert ess > 400 and float(summary.loc["slope", "r_hat"]) < 1.01
    # Monte Carlo error of the mean is sd/√ESS; of the sd about sd/√(2 ESS).
    assert abs(draws.mean() - mean) < 4 * sd / np.sqrt(ess)
    assert abs(draws.std() - sd) < 4 * sd / np.sqrt(2 * ess)
    # The 95% central interval of the draws matches the Gaussian's.
    np.testing.assert_allclose(
        np.percentile(draws, [2.5, 97.5]), mean + 1.96 * sd * np.array([-1, 1]), atol=0.15 * sd
    )
    assert posterior.samples["slope"].shape == (4, 1000)
    assert int(jnp.sum(posterior.divergent)) == 0
    data = posterior.to_arviz()
    assert data.posterior["slope"].shape == (4, 1000)
    figure = simlab.plot.corner(posterior)
    assert len(figure.axes) == 1


def test_priors_are_checked(drift_fit):
    result, _ = drift_fit
    with pytest.raises(ValueError, match="no default \\(uniform\\) prior"):
        simlab.sample(result, key=jr.key(0))
    bounded = simlab.fit(
        simlab.models.DampedPendulum(length=1.0, damping=0.5),
        TS,
        jnp.stack([jnp.cos(3 * TS), -3 * jnp.sin(3 * TS)], axis=1),
        y0=jnp.array([1.0, 0.0]),
        params=["damping"],
        bounds={"damping": (0.01, 2.0)},
        throw=False,
    )
    with pytest.raises(
        ValueError, match="reaches outside its range.*inside the parameter's bounds"
    ):
        simlab.sample(bounded, priors={"damping": (0.0, 5.0)}, key=jr.key(0))
    fitted = float(bounded.params["damping"])
    with pytest.raises(ValueError, match="lies outside its prior.*widen the prior"):
        simlab.sample(bounded, priors={"damping": (fitted + 0.05, 2.0)}, key=jr.key(0))
    with pytest.raises(ValueError, match="must have lower < upper"):
        simlab.sample(bounded, priors={"damping": (1.0, 0.5)}, key=jr.key(0))
    with pytest.raises(ValueError, match="a pair \\(lower, upper\\) of numbers"):
        simlab.sample(bounded, priors={"damping": (0.1, "high")}, key=jr.key(0))
    with pytest.raises(ValueError, match="not sampled"):
        simlab.sample(result, priors={"slope": (0, 1), "speed": np.log}, key=jr.key(0))
    with pytest.raises(ValueError, match="pass key="):
        simlab.sample(result, priors={"slope": np.log}, key=None)


@pytest.fixture(scope="module")
def line_fit():
    """x(t) = x0 + slope·t with unknown x0, slope and noise scale: linear regression."""
    return _noisy_line_fit(jr.key(2), fit_y0=True, bounds={"slope": (-5.0, 5.0)})


@pytest.mark.slow
def test_regression_posterior_is_the_students_t_of_the_closed_form(line_fit):
    # Flat priors on (x0, slope) and Jeffreys' p(σ) ∝ 1/σ: (x0, slope) is Student-t with
    # ν = n − 2 degrees of freedom, centred on least squares, scale s²(XᵀX)⁻¹ (s² = RSS/ν),
    # and σ² is scaled inverse chi-square (ν, s²) (Gelman et al., BDA3, §14.2).
    result, observations = line_fit
    t = np.asarray(TS)
    design = np.stack([np.ones_like(t), t], axis=1)
    estimate, rss, *_ = np.linalg.lstsq(design, observations, rcond=None)
    nu = t.size - 2
    s2 = float(rss[0]) / nu
    cov = s2 * np.linalg.inv(design.T @ design) * nu / (nu - 2)
    posterior = simlab.sample(result, num_samples=1000, num_warmup=300, num_chains=4, key=jr.key(3))
    assert list(posterior.samples) == ["slope", "y0.x", "noise.scale"]
    draws = posterior.flat_samples()
    summary = posterior.summary()
    assert float(summary["r_hat"].max()) < 1.01
    for i, name in enumerate(["y0.x", "slope"]):
        ess = float(summary.loc[name, "ess_bulk"])
        sd = np.sqrt(cov[i, i])
        assert ess > 400
        assert abs(draws[name].mean() - estimate[i]) < 4 * sd / np.sqrt(ess)
        # A t with 8 degrees of freedom has kurtosis 4.5: the sd's error is wider.
        assert abs(draws[name].std() - sd) < 0.12 * sd
    correlation = np.corrcoef(draws["y0.x"], draws["slope"])[0, 1]
    assert abs(correlation - cov[0, 1] / np.sqrt(cov[0, 0] * cov[1, 1])) < 0.05
    variance = draws["noise.scale"] ** 2  # σ itself: the data carry no noise_scale
    # E σ² = ν s²/(ν − 2) for the scaled inverse chi-square.
    expected = nu * s2 / (nu - 2)
    assert abs(variance.mean() - expected) < 0.1 * expected
    assert int(jnp.sum(posterior.divergent)) == 0


def test_sampler_coordinates_follow_the_labels(line_fit):
    # The chains' coordinates, the fit's covariance (the starting mass matrix) and the
    # draws' labels share one order, whatever order the position's leaves ravel in.
    from simlab import _sample

    result, _ = line_fit
    problem, _ = _sample._with_prior_ranges(result, {})
    labels = (*result.covariance_labels, "noise.scale")
    density = _sample._LogPosterior(problem=problem, priors=(), labels=labels)
    raveled, unravel = jax.flatten_util.ravel_pytree(density.optimum(result))
    order = _sample._label_order(density, unravel, raveled)
    coordinates = raveled[order]
    natural = density.natural(unravel(raveled))
    slope = problem.transform("slope").to_natural(coordinates[0])
    np.testing.assert_allclose(natural, [slope, coordinates[1], np.exp(coordinates[2])])
    np.testing.assert_allclose(natural[:2], [result.params["slope"], result.y0[0]])
