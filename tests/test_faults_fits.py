"""Degenerate fits, sampler inputs and folded branches: each is refused, flagged, or followed.

A successor of test_faults.py for fits, the sampler and continuation.
"""

import warnings
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float

import simlab
import simlab.plot
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


# --- 6. the sampler guards its inputs and its posterior ----------------------------------

LINE_TIMES = jnp.linspace(0.0, 2.0, 10)
EXACT_FOR_LINES = dict(solver="rk4", adaptive=False, dt0=0.25)


class BrokenDrift(AbstractODEModel):
    """dx/dt = slope, but NaN for a slope above `limit`: a model broken past a threshold."""

    slope: Float[Array, ""] = parameter(lower=-2.0, upper=2.0)
    limit: Float[Array, ""] = parameter()
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return jnp.broadcast_to(jnp.where(self.slope > self.limit, jnp.nan, self.slope), y.shape)


def _line_fit(limit):
    """A fit of x(t) = 1 + 0.8 t observed with noise of sd 0.3: the slope's posterior has
    sd 0.3 / sqrt(sum t^2) = 0.075."""
    noise = 0.3 * np.sin(37.0 * np.arange(LINE_TIMES.size))  # fixed, roughly zero-mean
    observations = 1.0 + 0.8 * LINE_TIMES + jnp.asarray(noise)
    return simlab.fit(
        BrokenDrift(slope=0.5, limit=limit), LINE_TIMES, observations[:, None],
        y0=jnp.array([1.0]), params=["slope"], noise_scale=0.3,
        simulate_options=EXACT_FOR_LINES,
    )  # fmt: skip


@pytest.fixture(scope="module")
def sound_line_fit():
    return _line_fit(limit=5.0)  # broken far beyond where the posterior has mass


def _sample(result, **settings):
    return simlab.sample(
        result, num_samples=150, num_warmup=150, num_chains=2, key=jax.random.key(0), **settings
    )


@pytest.mark.parametrize("target", [0.0, 1.0, 1.5, -0.2, float("nan")])
def test_a_target_acceptance_outside_zero_one_is_refused(sound_line_fit, target):
    with pytest.raises(ValueError, match="target_acceptance .* strictly between 0 and 1"):
        _sample(sound_line_fit, target_acceptance=target)


@pytest.mark.slow
def test_a_posterior_cut_off_by_nan_is_reported():
    result = _line_fit(limit=0.85)
    with pytest.warns(UserWarning, match=r"\d+ of 300 transitions ran into .* not finite"):
        posterior = _sample(result)
    rejected = np.asarray(posterior.rejected)
    assert rejected.shape == (2, 150) and rejected.mean() > 0.01
    draws = posterior.flat_samples()["slope"]
    assert draws.max() < 0.85  # the chains never cross into the broken region


def test_a_posterior_clear_of_nan_samples_without_a_warning(sound_line_fit):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        posterior = _sample(sound_line_fit)
    assert not np.any(np.asarray(posterior.rejected))
    draws = posterior.flat_samples()["slope"]
    assert draws.max() > 0.85  # the same posterior reaches past where the other was cut


# --- 7. continuation follows folds ---------------------------------------------------------

FOLD_R, FOLD_X = 2 / (3 * np.sqrt(3)), 1 / np.sqrt(3)  # the folds of r + x - x^3 = 0
REQUESTED_R = jnp.linspace(-1.0, 1.0, 41)


class Cusp(AbstractODEModel):
    """dx/dt = r + x - x^3: fixed points on r = x^3 - x, an S-curve folding back at
    x = -+1/sqrt(3), r = +-2/(3 sqrt(3)); the middle part, where 1 - 3x^2 > 0, is unstable."""

    r: Float[Array, ""] = parameter()
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return self.r + y - y**3


@pytest.fixture(scope="module")
def s_curve():
    return simlab.continuation(Cusp(r=-1.0), "r", REQUESTED_R, jnp.array([-1.3]))


def test_continuation_goes_round_both_folds_of_an_s_curve(s_curve):
    folds = s_curve.bifurcations
    assert [fold.kind for fold in folds] == ["fold", "fold"]
    np.testing.assert_allclose([fold.value for fold in folds], [FOLD_R, -FOLD_R], atol=1e-9)
    np.testing.assert_allclose([fold.state[0] for fold in folds], [-FOLD_X, FOLD_X], atol=1e-6)
    r, x = s_curve.values, s_curve.states[:, 0]
    np.testing.assert_allclose(r + x - x**3, 0.0, atol=1e-9)  # every point is a fixed point
    # x rises along the whole curve, in small steps: lower, middle, upper part, no jump.
    assert np.all(np.diff(x) > 0) and np.all(np.diff(x) < 0.2)
    assert x[0] < -1.3 and x[-1] > 1.3  # from r = -1 on the lower part to r = 1 on the upper
    # Stable where d/dx (r + x - x^3) = 1 - 3x^2 < 0; unstable on the middle part.
    assert list(np.unique(s_curve.labels[np.abs(x) > FOLD_X])) == ["stable"]
    assert list(np.unique(s_curve.labels[np.abs(x) < FOLD_X])) == ["unstable"]
    # Every requested value is a point, three times where the three parts overlap.
    for value in np.asarray(REQUESTED_R):
        assert np.sum(r == value) == (3 if abs(value) < FOLD_R else 1)


def test_the_diagram_of_an_s_curve_draws_its_middle_dashed_between_the_folds(s_curve):
    ax = simlab.plot.bifurcation(s_curve, "x")
    drawn = [line for line in ax.lines if len(line.get_xdata())]
    dashed = [line for line in drawn if line.get_linestyle() == "--"]
    solid = [line for line in drawn if line.get_linestyle() == "-" and line.get_marker() != "s"]
    assert len(dashed) == 1 and len(solid) == 2
    np.testing.assert_allclose(dashed[0].get_xdata()[[0, -1]], [FOLD_R, -FOLD_R])
    np.testing.assert_allclose(dashed[0].get_ydata()[[0, -1]], [-FOLD_X, FOLD_X], atol=1e-6)
    (markers,) = [line for line in drawn if line.get_marker() == "s"]
    np.testing.assert_allclose(markers.get_xdata(), [FOLD_R, -FOLD_R])


def test_a_branch_that_runs_out_of_points_warns():
    with pytest.warns(UserWarning, match=r"stops at r = .* after max_points = 30 points"):
        branch = simlab.continuation(
            Cusp(r=-1.0), "r", REQUESTED_R, jnp.array([-1.3]), max_points=30
        )
    assert branch.values.size == 30
