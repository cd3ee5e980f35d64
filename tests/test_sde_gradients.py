"""Pathwise gradients of expectations with common random numbers, forward and reverse,
against the analytic derivatives of geometric Brownian motion's mean and the
Ornstein–Uhlenbeck variance.

Each path's derivative comes from forward mode through its own solve; their sample
standard deviation over sqrt(n) is the standard error of the pathwise gradient, and the
analytic value must lie within 4 of them (99.99 % for a normal estimate). The
discretisation bias of the steps used is below a tenth of that.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab.integrate import brownian_path
from simlab.models import GeometricBrownianMotion, OrnsteinUhlenbeck

PATHS = 512
KEY = jax.random.key(17)
T = 1.0
TS = jnp.array([0.0, T])
Y0 = jnp.array([1.0])


def final_x(trajectory):
    return trajectory.ys[-1, 0]


def final_moments(trajectory):
    x = trajectory.ys[-1, 0]
    return {"x": x, "x2": x**2}


def gbm(mu):
    return GeometricBrownianMotion(mu=mu, sigma=0.4)


def ou(theta):
    return OrnsteinUhlenbeck(theta=theta, mu=1.0, sigma=0.5)


@functools.partial(jax.jit, static_argnames=("build", "observable", "dt0", "adjoint"))
def estimate(value, *, build, observable, dt0, adjoint=None):
    return simlab.expectation(
        build(value), Y0, TS, observable, paths=PATHS, key=KEY, dt0=dt0, adjoint=adjoint
    ).mean


@functools.partial(jax.jit, static_argnames=("build", "dt0"))
def ends_and_derivatives(value, *, build, dt0):
    """Each path's X_T and dX_T/dvalue, by forward mode through its own solve."""

    def ends(value):
        def end(path):
            key = jax.random.fold_in(KEY, path)
            model = build(value)
            return simlab.simulate(
                model, Y0, TS, key=key, adaptive=False, dt0=dt0, adjoint="forward"
            ).ys[-1, 0]

        return jax.vmap(end)(jnp.arange(PATHS))

    return jax.jvp(ends, (value,), (jnp.ones_like(value),))


def reverse_and_forward(value, **settings):
    reverse = jax.grad(lambda v: _scalar(estimate(v, **settings)))(value)
    forward_settings = settings | dict(adjoint="forward")
    forward = jax.jvp(lambda v: _scalar(estimate(v, **forward_settings)), (value,), (1.0,))[1]
    return float(reverse), float(forward)


def _scalar(mean):
    """The estimate itself, or the variance E[x^2] - E[x]^2 from the moments."""
    return mean if not isinstance(mean, dict) else mean["x2"] - mean["x"] ** 2


@pytest.mark.slow
def test_gradient_of_the_geometric_brownian_motion_mean():
    """d/dmu E[X_T] = T x0 e^{mu T} = e^{0.5}. Milstein's mean is x0 (1 + mu h)^{T/h}, so
    with h = 2^-8 its derivative is 0.2 % below e^{0.5}, under a tenth of the standard error
    (about 1.6 %)."""
    settings = dict(build=gbm, observable=final_x, dt0=2.0**-8)
    reverse, forward = reverse_and_forward(0.5, **settings)
    ends, derivatives = ends_and_derivatives(0.5, build=gbm, dt0=2.0**-8)
    assert reverse == pytest.approx(forward, rel=1e-10)
    assert reverse == pytest.approx(float(jnp.mean(derivatives)), rel=1e-10)
    # Along a path of the exact solution dX_T/dmu = T X_T; Milstein's comes close.
    np.testing.assert_allclose(derivatives, T * ends, rtol=0.02)
    standard_error = float(jnp.std(derivatives, ddof=1)) / np.sqrt(PATHS)
    assert abs(reverse - T * np.exp(0.5 * T)) < 4 * standard_error


def test_gradient_of_the_ornstein_uhlenbeck_variance():
    """From x0 = mu, Var X_T = sigma^2 (1 - e^{-2 theta T}) / (2 theta), so
    d/dtheta Var X_T = sigma^2 (T e^{-2 theta T} / theta - (1 - e^{-2 theta T}) / (2 theta^2)).
    The gradient of the sample variance is the mean of 2 (x_p - mean x) dx_p/dtheta over
    the paths (exactly), with the standard error of that mean. SRA1 (weak order 2) with
    h = 2^-6 leaves a bias of order 1e-4, under a tenth of the standard error."""
    theta, sigma = 1.0, 0.5
    settings = dict(build=ou, observable=final_moments, dt0=2.0**-6)
    reverse, forward = reverse_and_forward(theta, **settings)
    ends, derivatives = ends_and_derivatives(theta, build=ou, dt0=2.0**-6)
    terms = 2 * (ends - jnp.mean(ends)) * derivatives
    assert reverse == pytest.approx(forward, rel=1e-10)
    assert reverse == pytest.approx(float(jnp.mean(terms)), rel=1e-8)
    decay = np.exp(-2 * theta * T)
    exact = sigma**2 * (T * decay / theta - (1 - decay) / (2 * theta**2))
    standard_error = float(jnp.std(terms, ddof=1)) / np.sqrt(PATHS)
    assert abs(reverse - exact) < 4 * standard_error


def test_expectation_averages_the_paths_a_sweep_runs():
    """The estimate's paths are the sweep's: the same mean of the same 16 paths."""
    theta = 2.0
    swept = simlab.sweep(
        ou(1.0),
        {"theta": np.array([theta])},
        Y0,
        TS,
        paths=16,
        key=KEY,
        observable=lambda trajectory: {"x": final_x(trajectory)},
        adaptive=False,
        dt0=2.0**-6,
        progress=False,
    )
    estimate = simlab.expectation(ou(theta), Y0, TS, final_x, paths=16, key=KEY, dt0=2.0**-6)
    assert float(estimate.mean) == pytest.approx(float(swept.observables["x_mean"][0]), rel=1e-12)
    variance = float(swept.observables["x_variance"][0])
    assert float(estimate.standard_error) == pytest.approx(np.sqrt(variance / 16), rel=1e-10)


def test_expectation_refuses_deterministic_models_and_bad_counts():
    lorenz = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)
    with pytest.raises(ValueError, match="deterministic: simulate it once"):
        simlab.expectation(lorenz, jnp.ones(3), TS, final_x, paths=4, key=KEY, dt0=0.1)
    with pytest.raises(ValueError, match="paths must be a positive integer"):
        simlab.expectation(ou(1.0), Y0, TS, final_x, paths=0, key=KEY, dt0=0.1)
    with pytest.raises(ValueError, match="pass key=|JAX key"):
        simlab.expectation(ou(1.0), Y0, TS, final_x, paths=4, key=jnp.zeros(3), dt0=0.1)


@pytest.mark.slow
def test_an_adaptive_expectation_and_its_gradient_follow_the_exact_paths():
    """With `solver="spark", adaptive=True` every path runs on its key's virtual Brownian
    tree; geometric Brownian motion's exact solution on that same tree,
    X_T = exp((mu - sigma^2/2) T + sigma W_T), and its derivative T X_T give the estimate
    and its reverse-mode gradient to within 1e-4 and 1e-3 at rtol 1e-6 (7e-6 and 3e-4
    measured; 2e-3 and 6e-3 at rtol 1e-4), far tighter than the sampling error the
    analytic mean e^{mu T} lies within."""
    mu, sigma, paths = 0.5, 0.4, 32

    def mean(mu):
        return simlab.expectation(
            GeometricBrownianMotion(mu=mu, sigma=sigma),
            Y0,
            TS,
            final_x,
            paths=paths,
            key=KEY,
            solver="spark",
            adaptive=True,
            rtol=1e-6,
            atol=1e-8,
        ).mean

    value, gradient = jax.value_and_grad(mean)(mu)
    trees = jax.vmap(lambda p: brownian_path(jax.random.fold_in(KEY, p), TS)[-1])(jnp.arange(paths))
    exact = np.exp((mu - sigma**2 / 2) * T + sigma * np.asarray(trees))
    np.testing.assert_allclose(float(value), exact.mean(), rtol=1e-4)
    np.testing.assert_allclose(float(gradient), (T * exact).mean(), rtol=1e-3)
    standard_error = exact.std(ddof=1) / np.sqrt(paths)
    assert abs(exact.mean() - np.exp(mu * T)) < 4 * standard_error
