"""The BAOAB Langevin thermostat: the Gibbs distribution sampled (exactly in the positions
of a harmonic potential at any stable step, as Leimkuhler & Matthews 2013 show), velocity
Verlet without friction, strong order 1, keys, pathwise gradients, clear refusals.

Statistical assertions use fixed keys; each states the confidence of its tolerance.
"""

import functools
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
from jaxtyping import Array, Float, TypeCheckError

import simlab
from simlab.integrate import BAOAB, AbstractSymplecticSolver
from simlab.integrate._brownian import Increment
from simlab.models import AbstractHamiltonianModel, Langevin, parameter


class Oscillator(AbstractHamiltonianModel):
    """H = p^2 / 2m + k q^2 / 2."""

    stiffness: Float[Array, ""] = parameter(lower=0.0)
    mass: Float[Array, ""] = parameter(lower=0.0)

    state_names: ClassVar[tuple[str, ...]] = ("q", "p")

    def kinetic(self, p, args):
        return jnp.sum(p**2) / (2 * self.mass)

    def potential(self, q, args):
        return self.stiffness * jnp.sum(q**2) / 2


class DoubleWell(AbstractHamiltonianModel):
    """H = p^2 / 2 + (q^2 - 1)^2 / 4: wells at q = ±1, barrier 1/4."""

    state_names: ClassVar[tuple[str, ...]] = ("q", "p")

    def kinetic(self, p, args):
        return 0.5 * jnp.sum(p**2)

    def potential(self, q, args):
        return jnp.sum((q**2 - 1) ** 2) / 4


class VelocityVerlet(AbstractSymplecticSolver):
    """Half kick, drift, half kick: what BAOAB is without friction."""

    order = 2
    drifts = (0.0, 1.0, 0.0)
    kicks = (0.5, 0.5)


STIFFNESS, MASS, TEMPERATURE = 4.0, 0.25, 0.5
OMEGA = (STIFFNESS / MASS) ** 0.5  # 4
OSCILLATOR = Oscillator(stiffness=STIFFNESS, mass=MASS)
MEMBERS = 8192


@functools.partial(jax.jit, static_argnames=("dt0", "end"))
def _ends(model, keys, *, dt0, end):
    """The state at `end` of one path per key, each started at rest at the origin."""

    def solve(key):
        ts = jnp.array([0.0, end])
        y0 = jnp.zeros(2)
        return simlab.simulate(model, y0, ts, key=key, adaptive=False, dt0=dt0).ys[-1]

    return jax.vmap(solve)(keys)


def _variance_bound(samples, expected, sigmas=4.0):
    """The sample variance's distance from `expected` in standard errors, the variance of a
    Gaussian's sample variance being 2 sigma^4 / n."""
    return abs(np.var(samples) - expected) / (expected * np.sqrt(2 / samples.size)) < sigmas


@jax.jit
def _one_step_matrices(model, h):
    """F and G of BAOAB's one-step map y -> F y + G xi on a harmonic model, from simlab's step."""

    def step(y, xi):
        dW = jnp.concatenate([jnp.zeros(1), xi]) * jnp.sqrt(h)
        return BAOAB().step(model, jnp.zeros(()), y, h, Increment(dW, dW), None)

    return jax.jacfwd(step, (0, 1))(jnp.zeros(2), jnp.zeros(1))


def _stationary_covariance(model, h):
    """F, and the exact stationary covariance of y -> F y + G xi (a discrete Lyapunov
    equation)."""
    F, G = (np.asarray(matrix) for matrix in _one_step_matrices(model, jnp.asarray(h)))
    return F, scipy.linalg.solve_discrete_lyapunov(F, G @ G.T)


def test_small_steps_sample_the_gibbs_variances():
    """h omega = 0.08: Var q = kT/k and Var p = m kT (BAOAB's bias in p, (h omega)^2/4 =
    1.6e-3, is a tenth of a standard error); 8192 independent paths after 4 relaxation times
    (the variance has relaxed to within e^-8), within 4 standard errors (99.99 %)."""
    model = Langevin(OSCILLATOR, friction=2.0, temperature=TEMPERATURE)
    ends = np.asarray(_ends(model, jax.random.split(jax.random.key(1), MEMBERS), dt0=0.02, end=4.0))
    assert _variance_bound(ends[:, 0], TEMPERATURE / STIFFNESS)
    assert _variance_bound(ends[:, 1], MASS * TEMPERATURE)
    assert abs(np.mean(ends[:, 0])) < 4 * np.sqrt(TEMPERATURE / STIFFNESS / MEMBERS)


@pytest.mark.parametrize("friction", [0.1, 1.0, 10.0])
def test_positions_are_exact_at_any_stable_step_and_momenta_are_not(friction):
    """The stationary covariance of the one-step map: Var q = kT/k exactly up to
    h omega < 2, Var p = m kT (1 - (h omega)^2 / 4), and unstable beyond 2."""
    model = Langevin(OSCILLATOR, friction=friction, temperature=TEMPERATURE)
    for scaled in (0.5, 1.5, 1.99):
        F, covariance = _stationary_covariance(model, scaled / OMEGA)
        assert np.max(np.abs(np.linalg.eigvals(F))) < 1
        assert covariance[0, 0] == pytest.approx(TEMPERATURE / STIFFNESS, rel=1e-12)
        momenta = MASS * TEMPERATURE * (1 - scaled**2 / 4)
        assert covariance[1, 1] == pytest.approx(momenta, rel=1e-12)
    F, _ = _stationary_covariance(model, 2.01 / OMEGA)
    assert np.max(np.abs(np.linalg.eigvals(F))) > 1
    assert float(model.max_stable_step(BAOAB(), jnp.zeros(2))) == pytest.approx(2 / OMEGA)


def test_a_large_step_keeps_the_position_variance_and_biases_the_momenta():
    """h omega = 1.5: the sampled Var q is kT/k, the sampled Var p is m kT (1 - 9/16),
    each within 4 standard errors (99.99 %), and the latter 30 standard errors from m kT."""
    model = Langevin(OSCILLATOR, friction=2.0, temperature=TEMPERATURE)
    keys = jax.random.split(jax.random.key(2), MEMBERS)
    ends = np.asarray(_ends(model, keys, dt0=1.5 / OMEGA, end=1.5 / OMEGA * 40))
    biased = MASS * TEMPERATURE * (1 - 1.5**2 / 4)
    assert _variance_bound(ends[:, 0], TEMPERATURE / STIFFNESS)
    assert _variance_bound(ends[:, 1], biased)
    assert not _variance_bound(ends[:, 1], MASS * TEMPERATURE, sigmas=30.0)


def test_double_well_positions_follow_the_boltzmann_density():
    """kT = 0.5 (twice the barrier), friction 1, h = 0.05: <q^2> and <q^4> against
    quadrature of exp(-V/kT), within 4 standard errors of the 8192-path means (99.99 %)
    plus BAOAB's O(h^2) bias (< 1e-3)."""
    model = Langevin(DoubleWell(), friction=1.0, temperature=0.5)
    ends = _ends(model, jax.random.split(jax.random.key(3), MEMBERS), dt0=0.05, end=20.0)
    q = np.asarray(ends[:, 0])
    weight = lambda x: np.exp(-((x**2 - 1) ** 2) / 4 / 0.5)  # noqa: E731
    norm = scipy.integrate.quad(weight, -6, 6)[0]
    for power in (2, 4):
        exact = scipy.integrate.quad(lambda x, n=power: x**n * weight(x), -6, 6)[0] / norm
        standard_error = np.std(q**power) / np.sqrt(q.size)
        assert abs(np.mean(q**power) - exact) < 4 * standard_error + 1e-3


def test_without_friction_it_is_velocity_verlet():
    """friction = 0: the O step is the identity, whatever the key and temperature; BAOAB's
    two half drifts equal velocity Verlet's one drift to round-off over 500 steps; BAOAB is
    the default solver of a Langevin model."""
    ts = jnp.linspace(0.0, 5.0, 11)
    y0 = jnp.array([0.3, 0.8])
    verlet = simlab.simulate(
        DoubleWell(), y0, ts, solver=VelocityVerlet(), adaptive=False, dt0=0.01
    )
    frictionless = Langevin(DoubleWell(), friction=0.0, temperature=0.7)
    baoab = simlab.simulate(frictionless, y0, ts, key=jax.random.key(0), adaptive=False, dt0=0.01)
    np.testing.assert_allclose(baoab.ys, verlet.ys, rtol=0, atol=1e-12)
    assert (baoab.solver, baoab.integrator) == ("baoab", "sde")


def test_strong_order_one_on_the_fine_path():
    """Double well with friction 1 and kT = 0.5 to t = 1: the reference is BAOAB on a fine
    path (steps of 2^-10); coarse steps see the sums of its increments."""
    model = Langevin(DoubleWell(), friction=1.0, temperature=0.5)
    per_unit = 2**10

    @functools.partial(jax.jit, static_argnames="factor")
    @functools.partial(jax.vmap, in_axes=(0, None))
    def solve(fine, factor):
        h = jnp.asarray(factor / per_unit)
        coarse = fine.reshape(-1, factor).sum(axis=1)

        def body(y, dW):
            draw = jnp.stack([jnp.zeros(()), dW])
            return BAOAB().step(model, jnp.zeros(()), y, h, Increment(draw, draw), None), None

        return jax.lax.scan(body, jnp.array([0.5, 0.0]), coarse)[0]

    rng = np.random.default_rng(5)
    fine = jnp.asarray(rng.normal(0.0, np.sqrt(1 / per_unit), (16, per_unit)))
    reference = solve(fine, 1)
    factors = [2**4, 2**5, 2**6]
    errors = [float(jnp.sum(jnp.linalg.norm(solve(fine, f) - reference, axis=1))) for f in factors]
    slope = np.polyfit(np.log(factors), np.log(errors), 1)[0]
    assert slope == pytest.approx(simlab.SOLVERS["baoab"].order, abs=0.25)


def test_keys_give_paths_under_vmap_and_jit():
    """The same key gives the same path alone under jit and as a member of a vmap."""
    model = Langevin(DoubleWell(), friction=1.0, temperature=0.5)
    ts = jnp.linspace(0.0, 1.0, 5)

    def path(key):
        fixed = dict(adaptive=False, dt0=0.05)
        return simlab.simulate(model, jnp.array([1.0, 0.0]), ts, key=key, **fixed).ys

    keys = jax.random.split(jax.random.key(4), 3)
    batch = jax.jit(jax.vmap(path))(keys)
    alone = jax.jit(path)
    np.testing.assert_array_equal(batch[1], alone(keys[1]))
    np.testing.assert_array_equal(alone(keys[1]), alone(keys[1]))
    assert not np.allclose(batch[0], batch[1])


def test_pathwise_gradient_matches_central_differences():
    """d/d(stiffness, friction, temperature) of the mean q^2 over a fixed key's path, against
    central differences in float64."""
    key, ts = jax.random.key(6), jnp.linspace(0.0, 2.0, 21)

    @jax.jit
    def mean_square(stiffness, friction, temperature):
        model = Langevin(Oscillator(stiffness=stiffness, mass=MASS), friction, temperature)
        ys = simlab.simulate(model, jnp.array([0.5, 0.0]), ts, key=key, adaptive=False, dt0=0.02)
        return jnp.mean(ys.ys[:, 0] ** 2)

    point = (4.0, 1.5, 0.5)
    gradient = jax.jit(jax.grad(mean_square, argnums=(0, 1, 2)))(*point)
    step = 1e-5
    for index, value in enumerate(gradient):
        up, down = list(point), list(point)
        up[index] += step
        down[index] -= step
        central = (mean_square(*up) - mean_square(*down)) / (2 * step)
        assert float(value) == pytest.approx(float(central), rel=1e-6)


class Quartic(AbstractHamiltonianModel):
    state_names: ClassVar[tuple[str, ...]] = ("q", "p")

    def kinetic(self, p, args):
        return jnp.sum(p**4)

    def potential(self, q, args):
        return jnp.sum(q**2)


class Coupled(AbstractHamiltonianModel):
    """A position-dependent mass: H cannot be split."""

    separable: ClassVar[bool] = False
    state_names: ClassVar[tuple[str, ...]] = ("q", "p")

    def hamiltonian(self, q, p, args):
        return jnp.sum(p**2 * (1 + q**2)) / 2


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Langevin(Coupled(), friction=1.0, temperature=1.0), "separable"),
        (lambda: Langevin(Quartic(), friction=1.0, temperature=1.0), "not of that form"),
        (lambda: Langevin(DoubleWell(), friction=-1.0, temperature=1.0), "'friction'"),
        (lambda: Langevin(DoubleWell(), friction=1.0, temperature=-0.1), "'temperature'"),
    ],
)
def test_langevin_refuses_models_it_cannot_thermostat(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_langevin_refuses_a_model_without_energies():
    """A ValueError, or under the test suite's type checking the annotation's error; both
    name the class to use."""
    lorenz = simlab.models.Lorenz(sigma=1.0, rho=1.0, beta=1.0)
    with pytest.raises((ValueError, TypeCheckError), match="AbstractHamiltonianModel"):
        Langevin(lorenz, friction=1.0, temperature=1.0)


def test_simulate_refuses_keys_solvers_and_steps_that_do_not_fit():
    model = Langevin(DoubleWell(), friction=1.0, temperature=0.5)
    y0, ts = jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0])
    fixed = dict(adaptive=False, dt0=0.05)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match=r"pass key=jax\.random\.key"):
        simlab.simulate(model, y0, ts, solver="baoab", **fixed)
    with pytest.raises(ValueError, match="simlab.models.Langevin"):
        simlab.simulate(DoubleWell(), y0, ts, solver="baoab", key=key, **fixed)
    ornstein_uhlenbeck = simlab.models.OrnsteinUhlenbeck(theta=1.0, mu=0.0, sigma=1.0)
    with pytest.raises(ValueError, match="BAOAB integrates Langevin dynamics"):
        simlab.simulate(ornstein_uhlenbeck, y0[:1], ts, solver="baoab", key=key, **fixed)
    with pytest.raises(ValueError, match="'baoab'"):
        simlab.simulate(model, y0, ts, solver="verlet", key=key, **fixed)
    # omega = sqrt(V''(1)) = sqrt(2) at the bottom of a well: steps above 2/omega are unstable.
    with pytest.raises(simlab.SimulationError, match="largest stable step 1.414"):
        simlab.simulate(model, y0, jnp.array([0.0, 10.0]), key=key, adaptive=False, dt0=1.5)


def test_drift_and_diffusion_are_the_langevin_equations():
    """dq = p/m dt, dp = (-k q - gamma p) dt + sqrt(2 gamma kT m) dW, written out."""
    model = Langevin(OSCILLATOR, friction=2.0, temperature=TEMPERATURE)
    y = jnp.array([0.3, -0.7])
    expected = [-0.7 / MASS, -STIFFNESS * 0.3 + 2.0 * 0.7]
    np.testing.assert_allclose(model.drift(0.0, y, None), expected, rtol=1e-14)
    noise = [0.0, np.sqrt(2 * 2.0 * TEMPERATURE * MASS)]
    np.testing.assert_allclose(model.diffusion(0.0, y, None), noise, rtol=1e-14)


def test_euler_maruyama_runs_the_same_sde_to_its_own_stationary_variance():
    """Euler–Maruyama's one-step map on the oscillator is y -> (I + hJ) y + sqrt(h) g xi,
    with J and g the Langevin equations': the sampled variances of 4096 paths match that
    map's stationary covariance (a discrete Lyapunov equation) within 4 standard errors."""
    friction, h = 2.0, 0.01
    model = Langevin(OSCILLATOR, friction=friction, temperature=TEMPERATURE)

    @jax.jit
    def ends(keys):
        def solve(key):
            ts = jnp.array([0.0, 5.0])
            fixed = dict(adaptive=False, dt0=h)
            return simlab.simulate(
                model, jnp.zeros(2), ts, key=key, solver="euler_maruyama", **fixed
            ).ys[-1]

        return jax.vmap(solve)(keys)

    samples = np.asarray(ends(jax.random.split(jax.random.key(8), 4096)))
    J = np.array([[0.0, 1 / MASS], [-STIFFNESS, -friction]])
    g = np.array([0.0, np.sqrt(2 * friction * TEMPERATURE * MASS)])
    covariance = scipy.linalg.solve_discrete_lyapunov(np.eye(2) + h * J, h * np.outer(g, g))
    assert _variance_bound(samples[:, 0], covariance[0, 0])
    assert _variance_bound(samples[:, 1], covariance[1, 1])
