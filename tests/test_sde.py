"""Stochastic differential equations: strong and weak orders against exact solutions on the
solver's own Brownian path, stationary moments, keys, pathwise gradients, clear refusals.

Statistical assertions use fixed keys; each states the confidence of its tolerance.
"""

import functools
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float

import simlab
from simlab.integrate import SRA1, brownian_path
from simlab.integrate._brownian import Increment
from simlab.models import AbstractSDEModel, GeometricBrownianMotion, OrnsteinUhlenbeck, parameter

GBM = GeometricBrownianMotion(mu=0.5, sigma=0.8)
TS = jnp.linspace(0.0, 1.0, 3)
KEYS = jax.random.split(jax.random.key(7), 256)


@functools.partial(jax.jit, static_argnames=("solver", "dt0"))
def _gbm_ends(model, keys, *, solver, dt0):
    def end(key):
        path = simlab.simulate(
            model, jnp.array([1.0]), TS, key=key, adaptive=False, dt0=dt0, solver=solver
        )
        return path.ys[-1, 0]

    return jax.vmap(end)(keys)


def _exact_gbm_ends(model, keys, dt0):
    W = jax.vmap(lambda key: brownian_path(key, TS, dt0))(keys)[:, -1]
    return jnp.exp((model.mu - model.sigma**2 / 2) * TS[-1] + model.sigma * W)


def _observed_order(steps, errors):
    return np.polyfit(np.log(steps), np.log(errors), 1)[0]


@pytest.mark.parametrize(("solver", "order"), [("euler_maruyama", 0.5), ("milstein", 1.0)])
def test_strong_order_on_geometric_brownian_motion_against_its_exact_path(solver, order):
    steps = [2.0**-3, 2.0**-5, 2.0**-7]
    errors = [
        float(
            jnp.mean(
                jnp.abs(_gbm_ends(GBM, KEYS, solver=solver, dt0=h) - _exact_gbm_ends(GBM, KEYS, h))
            )
        )
        for h in steps
    ]
    assert _observed_order(steps, errors) == pytest.approx(order, abs=0.2)


def _fine_path(rng, num_coarse, per_coarse, h_fine):
    return rng.normal(0.0, np.sqrt(h_fine), size=(num_coarse * per_coarse,))


def _coarse_increments(fine, per_coarse, h):
    """dW and the space-time Lévy area H = (1/h) ∫ (W_s - s W_h / h) ds of each coarse step,
    from the fine increments (trapezoidal quadrature of the fine path)."""
    blocks = fine.reshape(-1, per_coarse)
    W = np.concatenate([np.zeros((blocks.shape[0], 1)), np.cumsum(blocks, axis=1)], axis=1)
    s = np.linspace(0.0, 1.0, per_coarse + 1)
    bridge = W - s * W[:, -1:]
    H = np.trapezoid(bridge, s, axis=1)
    return W[:, -1], H


def test_sra1_reaches_strong_order_one_and_a_half_on_additive_noise():
    """Ornstein–Uhlenbeck with a nonlinear drift, dX = -(X + X^3) dt + dW: the reference is
    SRA1 on the fine path itself (steps of 2^-12); coarse steps see the same path's dW and H."""

    class Cubic(AbstractSDEModel):
        scale: Float[Array, ""] = parameter()
        state_names: ClassVar[tuple[str, ...]] = ("x",)
        additive: ClassVar[bool] = True

        def drift(self, t, y, args):
            return -(y + y**3)

        def diffusion(self, t, y, args):
            return jnp.broadcast_to(self.scale, y.shape)

    model, solver, per_fine = Cubic(scale=1.0), SRA1(), 2**12
    step = jax.jit(lambda y, h, dW, H: solver.step(model, 0.0, y, h, Increment(dW, H), None))

    def solve(fine, factor):
        h = 1.0 / (per_fine // factor)
        dW, H = _coarse_increments(fine, factor, h)

        def body(y, increments):
            return step(y, h, jnp.array([increments[0]]), jnp.array([increments[1]])), None

        return jax.lax.scan(body, jnp.array([0.5]), jnp.stack([dW, H], axis=1))[0][0]

    rng = np.random.default_rng(3)
    factors = [2**4, 2**5, 2**6]  # coarse steps of 2^-8, 2^-7, 2^-6
    errors = np.zeros(len(factors))
    for _ in range(24):
        fine = _fine_path(rng, per_fine, 1, 1.0 / per_fine)
        reference = solve(fine, 1)
        errors += [abs(float(solve(fine, f) - reference)) for f in factors]
    assert _observed_order([1.0 / per_fine * f for f in factors], errors) == pytest.approx(
        1.5, abs=0.25
    )


def test_weak_error_of_euler_maruyama_is_its_exact_mean():
    """E[S_T] of Euler–Maruyama on GBM is exactly (1 + mu h)^n (each step multiplies the mean
    by 1 + mu h), here 2.25 against the exact e = 2.718: the sample mean of 4096 paths lies
    within 4 standard errors (99.99 %) of the former and 20 of them from the latter."""
    model = GeometricBrownianMotion(mu=1.0, sigma=0.5)
    ends = _gbm_ends(
        model, jax.random.split(jax.random.key(11), 4096), solver="euler_maruyama", dt0=0.5
    )
    standard_error = float(jnp.std(ends)) / 64
    assert float(jnp.mean(ends)) == pytest.approx(1.5**2, abs=4 * standard_error)
    assert abs(float(jnp.mean(ends)) - np.e) > 20 * standard_error


@pytest.mark.parametrize(
    ("solver", "variance"),
    [
        ("euler_maruyama", 0.25 / (2 - 0.2)),
        ("sra1", 0.25 / 2),
    ],  # EM: sigma^2 / (2 theta - theta^2 h)
)
def test_ornstein_uhlenbeck_stationary_moments(solver, variance):
    """theta = 1, sigma = 0.5, mu = 0.3, from x = 0.3 + 2 to t = 12, steps of 0.2: mean and
    variance of 8192 paths within 4 standard errors (99.99 %)."""
    model = OrnsteinUhlenbeck(theta=1.0, mu=0.3, sigma=0.5)

    def end(key):
        ts = jnp.array([0.0, 12.0])
        path = simlab.simulate(
            model, jnp.array([2.3]), ts, key=key, adaptive=False, dt0=0.2, solver=solver
        )
        return path.ys[-1, 0]

    ends = jax.jit(jax.vmap(end))(jax.random.split(jax.random.key(5), 8192))
    n = ends.shape[0]
    assert float(jnp.mean(ends)) == pytest.approx(0.3, abs=4 * np.sqrt(variance / n))
    assert float(jnp.var(ends)) == pytest.approx(variance, abs=4 * variance * np.sqrt(2 / n))


def test_a_path_depends_only_on_its_key():
    """The same key gives the same path directly, under jit and as one member of a vmap (to
    rounding: XLA may fuse the arithmetic of differently compiled programs differently)."""
    key = KEYS[3]

    def run(key):
        return simlab.simulate(GBM, jnp.array([1.0]), TS, key=key, adaptive=False, dt0=0.05).ys

    direct = run(key)
    np.testing.assert_allclose(jax.jit(run)(key), direct, rtol=1e-14)
    np.testing.assert_allclose(jax.vmap(run)(KEYS[:5])[3], direct, rtol=1e-14)
    assert not np.allclose(run(KEYS[4]), direct)


@pytest.mark.parametrize("solver", ["euler_maruyama", "milstein"])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_a_batch_of_paths_equals_the_paths_solved_one_at_a_time_bit_for_bit(solver, dtype):
    """64 keys solved as one vmap and each alone (both compiled) give identical bits: a
    path's normals do not depend on whether it is solved in a batch. The model and save
    times are arguments, as in a sweep, so that neither program folds them into constants
    (which XLA may reassociate differently in each)."""
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        pytest.skip("float64 needs jax_enable_x64")
    model = GeometricBrownianMotion(mu=jnp.asarray(0.5, dtype), sigma=jnp.asarray(0.8, dtype))
    ts = jnp.linspace(0.0, 1.0, 5, dtype=dtype)

    @jax.jit
    def run(model, ts, key):
        path = simlab.simulate(
            model, jnp.array([1.0], dtype), ts, key=key, adaptive=False, dt0=0.01, solver=solver
        )
        return path.ys

    keys = KEYS[:64]
    batch = np.asarray(jax.jit(jax.vmap(run, (None, None, 0)))(model, ts, keys))
    alone = np.stack([np.asarray(run(model, ts, key)) for key in keys])
    assert batch.dtype == dtype
    assert np.array_equal(batch, alone)


def test_a_path_is_the_same_whichever_save_times_split_its_steps():
    """Blocks of steps' increments span save times: saving every 0.1 or only at the end,
    100 steps of 0.01 reach the same end state and pass through the same Brownian path."""
    coarse, fine = jnp.array([0.0, 1.0]), jnp.linspace(0.0, 1.0, 11)

    def end(ts):
        path = simlab.simulate(GBM, jnp.array([1.0]), ts, key=KEYS[5], adaptive=False, dt0=0.01)
        return path.ys[-1, 0]

    np.testing.assert_allclose(end(fine), end(coarse), rtol=1e-12)
    np.testing.assert_allclose(
        brownian_path(KEYS[5], fine, 0.01)[-1], brownian_path(KEYS[5], coarse, 0.01)[-1]
    )


def test_brownian_increments_are_independent_standard_normals():
    """4096 steps of a 3-component noise: the scaled increments pass a Kolmogorov–Smirnov
    test against N(0, 1) (p > 1e-3), and their correlation with the next step's and with
    the same component 32 steps on (across blocks) is below 4 standard errors (99.99 %)."""
    from scipy import stats

    steps = 4096
    ts = jnp.linspace(0.0, 1.0, steps + 1)
    W = brownian_path(jax.random.key(13), ts, 1.0 / steps, (3,))
    z = np.asarray(jnp.diff(W, axis=0)) * np.sqrt(steps)
    assert stats.kstest(z.ravel(), "norm").pvalue > 1e-3
    for lag in (1, 32):
        correlation = np.corrcoef(z[:-lag].ravel(), z[lag:].ravel())[0, 1]
        assert abs(correlation) < 4 / np.sqrt(z[lag:].size)


def test_pathwise_gradient_of_the_mean_matches_the_analytic_derivative():
    """d/dmu E[S_1] = S_0 e^mu for GBM. With common random numbers the pathwise gradient of
    the sample mean equals a central difference of the same sample mean (float64, same keys),
    and lies within 4 standard errors of the analytic value."""
    keys = jax.random.split(jax.random.key(2), 2048)

    def mean_end(mu):
        model = GeometricBrownianMotion(mu=mu, sigma=0.8)
        return jnp.mean(_gbm_ends(model, keys, solver="milstein", dt0=2.0**-6))

    gradient = float(jax.grad(mean_end)(0.5))
    eps = 1e-5
    difference = (float(mean_end(0.5 + eps)) - float(mean_end(0.5 - eps))) / (2 * eps)
    assert gradient == pytest.approx(difference, rel=1e-7)
    # Each path's derivative is about T S_T (exact for the exact solution), T = 1.
    ends = _gbm_ends(
        GeometricBrownianMotion(mu=0.5, sigma=0.8), keys, solver="milstein", dt0=2.0**-6
    )
    assert gradient == pytest.approx(np.exp(0.5), abs=4 * float(jnp.std(ends)) / np.sqrt(2048))


class _GeneralNoise(AbstractSDEModel):
    scale: Float[Array, ""] = parameter()
    state_names: ClassVar[tuple[str, ...]] = ("x", "y")
    noise: ClassVar[str] = "general"

    def drift(self, t, y, args):
        return -y

    def diffusion(self, t, y, args):
        return self.scale * jnp.array([[y[0], 1.0, 0.0], [0.0, y[1], 1.0]])


def test_general_noise_runs_with_euler_maruyama_and_its_brownian_path():
    model = _GeneralNoise(scale=0.0)  # no noise: the exact solution is y0 exp(-t)
    path = simlab.simulate(model, jnp.array([1.0, 2.0]), TS, key=KEYS[0], adaptive=False, dt0=1e-3)
    assert path.solver == "euler_maruyama"
    np.testing.assert_allclose(path.ys[-1], jnp.array([1.0, 2.0]) * np.exp(-1.0), rtol=1e-3)
    assert brownian_path(KEYS[0], TS, 1e-3, (3,)).shape == (3, 3)


def test_the_default_solver_is_the_strongest_the_noise_allows():
    def run(model, y0):
        return simlab.simulate(model, y0, TS, key=KEYS[0], adaptive=False, dt0=0.1).solver

    assert run(OrnsteinUhlenbeck(theta=1.0, mu=0.0, sigma=1.0), jnp.array([0.0])) == "sra1"
    assert run(GBM, jnp.array([1.0])) == "milstein"
    assert run(_GeneralNoise(scale=1.0), jnp.array([1.0, 2.0])) == "euler_maruyama"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(), "pass key=jax.random.key"),
        (dict(key=jax.random.split(jax.random.key(0), 3)), "one JAX key"),
        (dict(key=3), r"jax\.random\.key\(3\)"),
        (dict(key=jnp.zeros(5)), "must be a JAX key"),
        (dict(key=jax.random.key(0), solver="tsit5"), "solves ODEs"),
        (dict(key=jax.random.key(0), adaptive=True), "takes fixed steps: pass adaptive=False"),
    ],
)
def test_stochastic_models_refuse_bad_keys_and_solvers(settings, message):
    settings = dict(adaptive=False, dt0=0.1) | settings
    with pytest.raises((ValueError, TypeError), match=message):
        simlab.simulate(GBM, jnp.array([1.0]), TS, **settings)


class _MislabelledAdditive(AbstractSDEModel):
    """Geometric Brownian motion that declares its noise additive: it is not."""

    mu: Float[Array, ""] = parameter()
    sigma: Float[Array, ""] = parameter()
    state_names: ClassVar[tuple[str, ...]] = ("S",)
    additive: ClassVar[bool] = True

    def drift(self, t, y, args):
        return self.mu * y

    def diffusion(self, t, y, args):
        return self.sigma * y


def test_a_diffusion_that_depends_on_the_state_cannot_be_declared_additive():
    """SRA1 on sigma*y would silently run at strong order 1/2: the declaration is refused
    before any step, in simulate, sweep and expectation; the same noise declared as what it
    is runs (Milstein), as does a truly additive model."""
    model = _MislabelledAdditive(mu=0.5, sigma=0.8)
    fixed = dict(key=KEYS[0], adaptive=False, dt0=0.1)
    refusal = r"declares additive = True, but its diffusion depends on the state"
    with pytest.raises(ValueError, match=refusal):
        simlab.simulate(model, jnp.array([1.0]), TS, **fixed)
    with pytest.raises(ValueError, match=refusal):
        simlab.sweep(model, {"mu": jnp.array([0.5])}, jnp.array([1.0]), TS, paths=2, **fixed)
    with pytest.raises(ValueError, match=refusal):
        simlab.expectation(model, jnp.array([1.0]), TS, lambda p: p.ys[-1], paths=2, **fixed)
    path = simlab.simulate(GBM, jnp.array([1.0]), TS, **fixed)
    assert path.solver == "milstein" and path.succeeded
    ou = OrnsteinUhlenbeck(theta=1.0, mu=0.0, sigma=0.5)
    assert simlab.simulate(ou, jnp.array([1.0]), TS, **fixed).solver == "sra1"


def test_refusals_name_the_noise_and_the_argument():
    key = jax.random.key(0)
    fixed = dict(key=key, adaptive=False, dt0=0.1)
    with pytest.raises(ValueError, match="diagonal or scalar noise"):
        simlab.simulate(_GeneralNoise(scale=1.0), jnp.ones(2), TS, solver="milstein", **fixed)
    with pytest.raises(ValueError, match="additive noise"):
        simlab.simulate(GBM, jnp.ones(1), TS, solver="sra1", **fixed)
    with pytest.raises(ValueError, match="deterministic: leave key out"):
        simlab.simulate(
            simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3), jnp.ones(3), TS, key=key
        )
    with pytest.raises(ValueError, match="solves stochastic models"):
        simlab.simulate(
            simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3),
            jnp.ones(3),
            TS,
            solver="euler_maruyama",
            adaptive=False,
            dt0=0.1,
        )

    class WrongShape(_GeneralNoise):
        noise: ClassVar[str] = "diagonal"

    with pytest.raises(ValueError, match=r"returns shape \(2, 3\), but diagonal noise"):
        simlab.simulate(WrongShape(scale=1.0), jnp.ones(2), TS, solver="euler_maruyama", **fixed)


def test_the_fan_chart_draws_the_quantiles_of_the_paths():
    import simlab.plot

    rng = np.random.default_rng(0)
    ts = np.linspace(0.0, 1.0, 11)
    paths = np.cumsum(rng.normal(size=(400, 11)), axis=1)
    ax = simlab.plot.fan_chart(ts, paths[..., None], bands=(0.9,), sample_paths=3)
    band = ax.collections[0].get_paths()[0].vertices
    at_end = band[np.isclose(band[:, 0], 1.0), 1]
    np.testing.assert_allclose(sorted(set(at_end)), np.quantile(paths[:, -1], [0.05, 0.95]))
    assert len(ax.lines) == 3 + 1  # sample paths and the median
    with pytest.raises(ValueError, match="fractions in"):
        simlab.plot.fan_chart(ts, paths, bands=(90,))
    with pytest.raises(ValueError, match="shape"):
        simlab.plot.fan_chart(ts, paths[0])


def test_chemical_langevin_sir_conserves_people_and_its_mean_follows_the_ode():
    """Every path keeps S + I + R = N (the noise moves people between compartments). From 1 %
    infected, the mean of 256 paths at day 20 lies within 4 standard errors (99.99 %) of the
    deterministic SIR on the same Euler grid, and the relative fluctuations shrink as
    1/sqrt(N): tenfold from N = 10^4 to N = 10^6 (accepted between 7 and 14)."""
    ts, keys = jnp.array([0.0, 10.0, 20.0]), jax.random.split(jax.random.key(4), 256)

    def ends(population):
        y0 = population * jnp.array([0.99, 0.01, 0.0])
        noisy = simlab.models.StochasticSIR(beta=0.4, gamma=0.1, population=population)

        def end(key):
            return simlab.simulate(noisy, y0, ts, key=key, adaptive=False, dt0=0.05).ys[-1]

        deterministic = simlab.models.SIR(beta=0.4, gamma=0.1, population=population)
        euler = simlab.simulate(deterministic, y0, ts, solver="euler", adaptive=False, dt0=0.05)
        return jax.jit(jax.vmap(end))(keys), euler.ys[-1]

    small, _ = ends(1e4)
    large, expected = ends(1e6)
    np.testing.assert_allclose(jnp.sum(large, axis=1), 1e6, rtol=1e-12)
    standard_error = jnp.std(large, axis=0) / np.sqrt(256)
    assert np.all(np.abs(jnp.mean(large, axis=0) - expected) < 4 * standard_error)
    shrink = (jnp.std(small[:, 1]) / 1e4) / (jnp.std(large[:, 1]) / 1e6)
    assert 7.0 < float(shrink) < 14.0


def test_fitzhugh_nagumo_without_noise_is_the_deterministic_neuron():
    model = simlab.models.StochasticFitzHughNagumo(
        current=0.5, a=0.7, b=0.8, epsilon=0.08, noise_strength=0.0
    )
    ts = jnp.linspace(0.0, 20.0, 5)
    path = simlab.simulate(model, jnp.array([-1.0, 1.0]), ts, key=KEYS[0], adaptive=False, dt0=0.01)
    assert path.solver == "sra1"
    ode = simlab.simulate(
        lambda t, y, args: model.drift(t, y, args),
        jnp.array([-1.0, 1.0]),
        ts,
        rtol=1e-10,
        atol=1e-10,
    )
    np.testing.assert_allclose(path.ys, ode.ys, atol=1e-5)


@pytest.mark.parametrize(("h", "stable"), [(0.25, True), (0.5, False)])
def test_mean_square_stability_of_euler_maruyama_on_the_linear_test_equation(h, stable):
    """dX = -3 X dt + sqrt(3) X dW (Higham, SIAM Review 43, 2001): Euler–Maruyama's second
    moment is exactly r^n with r = (1 + h lambda)^2 + h mu^2, below 1 (decaying, as the SDE's)
    for h = 0.25 and above 1 (growing) for h = 0.5. The sample mean of X^2 over 8192 paths
    lies within 4 standard errors (99.99 %) of r^n."""
    model = GeometricBrownianMotion(mu=-3.0, sigma=np.sqrt(3.0))
    keys = jax.random.split(jax.random.key(8), 8192)
    squares = _gbm_ends(model, keys, solver="euler_maruyama", dt0=h) ** 2
    rate = (1 - 3 * h) ** 2 + 3 * h
    expected = rate ** round(1.0 / h)
    assert (rate < 1) == stable
    standard_error = float(jnp.std(squares)) / np.sqrt(8192)
    assert float(jnp.mean(squares)) == pytest.approx(expected, abs=4 * standard_error)
