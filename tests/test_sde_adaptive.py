"""Adaptive steps on stochastic models (SPaRK on the key's virtual Brownian tree): the strong
error against geometric Brownian motion's exact solution on the tree's own path as the
tolerance shrinks, agreement in the mean with the lean fixed-step solve as its step
shrinks, pathwise derivatives against the exact one, and clear refusals.

Statistical assertions use fixed keys; each states the confidence of its tolerance.
"""

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float

import simlab
from simlab.integrate import brownian_path
from simlab.integrate._sde import stratonovich_drift
from simlab.models import AbstractSDEModel, GeometricBrownianMotion, parameter

TS = jnp.linspace(0.0, 1.0, 3)
Y0 = jnp.array([1.0])
KEYS = jax.random.split(jax.random.key(3), 64)
TOLERANCES = (1e-3, 1e-4, 1e-5)  # rtol; atol is rtol / 100


def _adaptive_end(mu, sigma, key, rtol, adjoint="forward"):
    model = GeometricBrownianMotion(mu=mu, sigma=sigma)
    path = simlab.simulate(
        model, Y0, TS, solver="spark", key=key, rtol=rtol, atol=rtol / 100, adjoint=adjoint
    )
    return path.ys[-1, 0], path.stats["num_accepted_steps"]


@jax.jit
def _adaptive_ends(mu, sigma, keys, rtol):
    """Per path: S_T, its pathwise derivative in mu (forward mode), the tree's W_T, steps."""

    def one(key):
        end = lambda m: _adaptive_end(m, sigma, key, rtol)  # noqa: E731
        (value, steps), (slope, _) = jax.jvp(end, (mu,), (jnp.ones_like(mu),))
        return value, slope, brownian_path(key, TS)[-1], steps

    return jax.vmap(one)(keys)


@jax.jit
def _euler_maruyama_ends(mu, sigma, keys, dt0):
    """S_T of the lean fixed-step loop (a traced dt0: one compiled solve for every step)."""
    model = GeometricBrownianMotion(mu=mu, sigma=sigma)
    end = lambda key: simlab.simulate(  # noqa: E731
        model, Y0, TS, solver="euler_maruyama", key=key, adaptive=False, dt0=dt0
    ).ys[-1, 0]
    return jax.vmap(end)(keys)


def _exact_end(mu, sigma, W_T):
    return jnp.exp((mu - sigma**2 / 2) * TS[-1] + sigma * W_T)


@pytest.fixture(scope="module")
def gbm_runs():
    """The adaptive solves of GBM(mu=0.5, sigma=0.8) at each tolerance."""
    return {rtol: _adaptive_ends(0.5, 0.8, KEYS, rtol) for rtol in TOLERANCES}


def test_strong_error_on_the_trees_path_falls_as_the_tolerance_shrinks(gbm_runs):
    """The strong error E|S_T - exact S_T| (Kloeden & Platen's), over 64 fixed paths."""
    errors, steps = [], []
    for rtol in TOLERANCES:
        ends, _, W_T, num_steps = gbm_runs[rtol]
        errors.append(float(jnp.mean(jnp.abs(ends - _exact_end(0.5, 0.8, W_T)))))
        steps.append(float(jnp.mean(num_steps)))
    assert errors[0] > errors[1] > errors[2]
    assert steps[0] < steps[1] < steps[2]
    # Against the mean number of steps the error falls at least at SPaRK's order for any
    # noise, 1/2, and not faster than the order 1 it has on diagonal noise with uniform
    # steps (measured: 0.71).
    order = -np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert 0.5 < order < 1.2


def test_pathwise_derivative_is_the_exact_one_and_central_differences_of_the_solve(gbm_runs):
    # On a fixed path dS_T/dmu = T S_T; the solve's own derivative is that within its error.
    rtol = TOLERANCES[1]
    _, slopes, W_T, _ = gbm_runs[rtol]
    np.testing.assert_allclose(slopes, TS[-1] * _exact_end(0.5, 0.8, W_T), rtol=0.02)
    # Step ends lie on the tree's grid (2^-20 of the span), so a perturbation this small
    # moves none of them and the solve is smooth in mu (float64).
    step = 1e-9
    above, below = (_adaptive_ends(0.5 + s, 0.8, KEYS, rtol)[0] for s in (step, -step))
    np.testing.assert_allclose(slopes, (above - below) / (2 * step), rtol=1e-5)


def test_a_path_depends_on_its_key_alone_not_on_its_place_in_the_batch(gbm_runs):
    rtol = TOLERANCES[0]
    reversed_ends = _adaptive_ends(0.5, 0.8, KEYS[::-1], rtol)[0]
    np.testing.assert_array_equal(reversed_ends[::-1], gbm_runs[rtol][0])


def test_mean_agrees_with_the_lean_fixed_step_solve_as_its_step_shrinks():
    """Euler–Maruyama's mean of GBM is exactly (1 + mu h)^(T/h): its gap to the adaptive mean
    is that bias within 4 standard errors (a miss has probability below 1e-4 for each step
    if the adaptive mean is unbiased), so the gap closes as the step shrinks."""
    mu, sigma = 1.0, 0.1
    adaptive, _, _, _ = _adaptive_ends(mu, sigma, KEYS, 1e-3)
    gaps = []
    for dt0 in (1 / 2, 1 / 8, 1 / 32):
        lean = _euler_maruyama_ends(mu, sigma, KEYS, dt0)
        stderr = float(jnp.sqrt((jnp.var(lean) + jnp.var(adaptive)) / KEYS.shape[0]))
        gap = float(jnp.mean(lean) - jnp.mean(adaptive))
        bias = (1 + mu * dt0) ** (1 / dt0) - np.exp(mu)
        assert abs(gap - bias) < 4 * stderr
        gaps.append((abs(gap), stderr))
    (coarse, coarse_stderr), _, (fine, fine_stderr) = gaps
    assert coarse > 4 * coarse_stderr and fine < 4 * fine_stderr


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(solver="milstein"), r"Milstein takes fixed steps.*solver='spark'"),
        (dict(), r"Milstein takes fixed steps.*solver='spark'"),  # the default solver
        (dict(solver="spark", adaptive=False, dt0=0.1), "SPaRK takes adaptive steps only"),
        (dict(solver="spark", key=None), r"pass key=jax\.random\.key"),
        (dict(solver="spark", adjoint="backsolve"), "adjoint=None, 'checkpoint'"),
        (dict(solver="spark", integrator="diffrax"), "drop integrator='diffrax'"),
    ],
)
def test_adaptive_steps_refuse_fixed_step_methods_and_missing_keys(settings, message):
    settings = dict(key=jax.random.key(0)) | settings
    with pytest.raises(ValueError, match=message):
        simlab.simulate(GeometricBrownianMotion(mu=0.5, sigma=0.8), Y0, TS, **settings)


def test_spark_refuses_deterministic_models():
    lorenz = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)
    with pytest.raises(ValueError, match="SPaRK solves stochastic models"):
        simlab.simulate(lorenz, jnp.ones(3), TS, solver="spark")


def test_reverse_mode_gradient_equals_forward_mode_and_the_exact_derivative(gbm_runs):
    """`jax.grad` (the default checkpointed reverse mode) on one path, against forward mode
    (checked against central differences above) and dS_T/dmu = T S_T on the tree's path."""
    rtol = TOLERANCES[1]
    _, slopes, W_T, _ = gbm_runs[rtol]
    end = lambda mu: _adaptive_end(mu, 0.8, KEYS[0], rtol, adjoint=None)[0]  # noqa: E731
    gradient = jax.jit(jax.grad(end))(0.5)
    np.testing.assert_allclose(gradient, slopes[0], rtol=1e-8)
    np.testing.assert_allclose(gradient, TS[-1] * _exact_end(0.5, 0.8, W_T[0]), rtol=0.02)


def test_a_refused_fixed_step_of_a_stochastic_model_names_the_stochastic_remedies():
    grid = simlab.Grid((16,), extent=1.0, boundary="periodic")
    heat = simlab.models.StochasticHeat(diffusivity=1.0, noise_strength=0.1, grid=grid)
    with pytest.raises(simlab.SimulationError, match="for a stochastic model .* solver='spark'"):
        simlab.simulate(heat, grid.zeros(), TS, key=jax.random.key(0), adaptive=False, dt0=0.1)


def test_a_fixed_step_blow_up_suggests_a_smaller_step_or_adaptive_steps():
    # Euler–Maruyama on the double well's cubic drift overshoots without bound for dt0 = 1.
    well = simlab.models.DoubleWell(D=0.1)
    with pytest.raises(simlab.SimulationError, match=r"smaller dt0, or solver='spark'"):
        simlab.simulate(
            well,
            jnp.array([3.0]),
            jnp.array([0.0, 20.0]),
            key=jax.random.key(0),
            solver="euler_maruyama",
            adaptive=False,
            dt0=1.0,
        )


class _CrossedNoise(AbstractSDEModel):
    """General noise whose columns depend on every component (no commutativity)."""

    scale: Float[Array, ""] = parameter()
    state_names: ClassVar[tuple[str, ...]] = ("x", "y")
    noise: ClassVar[str] = "general"

    def drift(self, t, y, args):
        return -y

    def diffusion(self, t, y, args):
        x, z = y
        return self.scale * jnp.array([[x * z, jnp.sin(x), 1.0], [z**2, x * jnp.cos(z), x]])


def test_the_stratonovich_drift_is_the_ito_drift_less_half_the_noise_correction():
    # GBM by hand: mu S - sigma^2 S / 2.
    gbm = GeometricBrownianMotion(mu=0.5, sigma=0.8)
    drift = stratonovich_drift(gbm)(0.0, jnp.array([2.0]), None)
    np.testing.assert_allclose(drift, [(0.5 - 0.8**2 / 2) * 2.0], rtol=1e-14)
    # General noise against the full Jacobian: sum over j, k of G_kj dG_ij/dy_k.
    model, y = _CrossedNoise(scale=0.7), jnp.array([0.3, -1.2])
    G = model.diffusion(0.0, y, None)
    dG = jax.jacfwd(lambda state: model.diffusion(0.0, state, None))(y)  # [i, j, k]
    expected = model.drift(0.0, y, None) - 0.5 * jnp.einsum("kj,ijk->i", G, dG)
    np.testing.assert_allclose(stratonovich_drift(model)(0.0, y, None), expected, rtol=1e-14)
