"""Hamiltonian models and symplectic integrators: orders against the exact Kepler orbit, a
published energy error, bounded energy without drift, exact conservation of angular
momentum, time reversibility, the FPUT recurrence, Lennard-Jones forces against a NumPy
double loop, agreement with SciPy's DOP853, gradients against finite differences, refusals.
"""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

import simlab
from simlab.models import (
    AbstractHamiltonianModel,
    FPUTChain,
    HenonHeiles,
    Kepler,
    LennardJones,
    NBody,
    Pendulum,
)

SYMPLECTIC = ("symplectic_euler", "verlet", "forest_ruth", "mclachlan4", "yoshida6")


def _perihelion(eccentricity: float) -> jax.Array:
    """The Kepler state at perihelion of the orbit with semi-major axis 1 (mu = 1)."""
    speed = np.sqrt((1 + eccentricity) / (1 - eccentricity))
    return jnp.array([1 - eccentricity, 0.0, 0.0, speed])


def _exact_kepler(t: float, eccentricity: float) -> np.ndarray:
    """The Kepler orbit from perihelion (a = mu = 1) at time `t`: Kepler's equation
    E - e sin E = t solved by Newton's method to round-off."""
    anomaly = t
    for _ in range(60):
        anomaly -= (anomaly - eccentricity * np.sin(anomaly) - t) / (
            1 - eccentricity * np.cos(anomaly)
        )
    radius = 1 - eccentricity * np.cos(anomaly)
    root = np.sqrt(1 - eccentricity**2)
    return np.array(
        [
            np.cos(anomaly) - eccentricity,
            root * np.sin(anomaly),
            -np.sin(anomaly) / radius,
            root * np.cos(anomaly) / radius,
        ]
    )


@eqx.filter_jit
def _traced_solve(model, y0, ts, dt0, *, solver):
    return simlab.simulate(
        model, y0, ts, solver=solver, adaptive=False, dt0=dt0, max_steps=10**6
    ).ys


def _solve(model, y0, ts, dt0, *, solver):
    """A fixed-step solve with the step traced: one compilation per model, method and
    number of save times, whatever the step."""
    return _traced_solve(model, y0, jnp.asarray(ts), jnp.asarray(dt0), solver=solver)


@pytest.mark.parametrize("solver", SYMPLECTIC)
def test_order_against_the_exact_kepler_orbit(solver):
    eccentricity, end = 0.5, 3.0
    exact = _exact_kepler(end, eccentricity)
    ts = jnp.array([0.0, end])
    steps = np.array([100, 200, 400])
    errors = [
        np.max(
            np.abs(
                np.asarray(
                    _solve(Kepler(), _perihelion(eccentricity), ts, end / n, solver=solver)[-1]
                )
                - exact
            )
        )
        for n in steps
    ]
    measured = -np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert measured == pytest.approx(simlab.SOLVERS[solver].order, abs=0.1)


def test_mclachlan4_energy_error_on_kepler_matches_sundials_arkode():
    # SUNDIALS' ark_kepler example (e = 0.6, t = 100, dt = 0.01) reports |H - H0| <= 2.2e-9
    # for ARKODE_SPRK_MCLACHLAN_4_4; sampled every 0.1 here, the largest error is the same.
    model = Kepler()
    ys = _solve(model, _perihelion(0.6), jnp.linspace(0.0, 100.0, 1001), 0.01, solver="mclachlan4")
    error = np.max(np.abs(np.asarray(model.energy(ys) - model.energy(ys[0]))))
    assert 1.5e-9 < error < 3e-9


def test_energy_error_stays_bounded_while_runge_kutta_drifts():
    """10^5 steps of the pendulum at amplitude 2 rad: Verlet's energy error in the last
    tenth of the run is no larger than in the first; RK4's grows linearly."""
    model = Pendulum(length=1.0)
    y0 = jnp.array([2.0, 0.0])
    ts = jnp.linspace(0.0, 10_000.0, 2001)
    drift = {}
    for solver in ("verlet", "rk4"):
        ys = _solve(model, y0, ts, 0.1, solver=solver)
        error = np.abs(np.asarray(model.energy(ys) - model.energy(y0)))
        drift[solver] = np.max(error[-200:]) / np.max(error[1:201])
    assert drift["verlet"] < 1.1
    assert drift["rk4"] > 5


@pytest.mark.parametrize("solver", SYMPLECTIC)
def test_kepler_angular_momentum_is_conserved_to_roundoff(solver):
    model = Kepler()
    y0 = _perihelion(0.6)
    end = _solve(model, y0, jnp.array([0.0, 100.0]), 0.01, solver=solver)[-1]
    assert abs(float(model.angular_momentum(end) - model.angular_momentum(y0))) < 1e-12


def _flip_momenta(model, y):
    return jnp.concatenate([model.positions(y), -model.momenta(y)])


SYMMETRIC = ("verlet", "forest_ruth", "yoshida6")


def test_palindromic_methods_are_symmetric():
    symmetric = {name for name in SYMPLECTIC if simlab.SOLVERS[name].build().symmetric}
    assert symmetric == set(SYMMETRIC)


@pytest.mark.parametrize("solver", SYMMETRIC)
def test_forward_then_backward_returns_to_the_initial_state(solver):
    """A symmetric method with the momenta flipped retraces its path to round-off."""
    model = Kepler()
    y0 = _perihelion(0.5)
    ts = jnp.array([0.0, 10.0])
    there = _solve(model, y0, ts, 0.01, solver=solver)[-1]
    back = _solve(model, _flip_momenta(model, there), ts, 0.01, solver=solver)[-1]
    assert float(jnp.max(jnp.abs(_flip_momenta(model, back) - y0))) < 1e-12


def test_fput_energy_returns_to_the_first_mode():
    """Fermi, Pasta, Ulam and Tsingou's experiment: 16 masses, alpha = 0.25, all energy in
    mode 1. It spreads to the other modes, then returns to mode 1 almost completely."""
    model = FPUTChain(num_masses=16, alpha=0.25)
    sites = np.arange(1, 17)
    y0 = jnp.asarray(np.concatenate([np.sin(np.pi * sites / 17), np.zeros(16)]))
    ts = jnp.linspace(0.0, 2200.0, 221)
    ys = _solve(model, y0, ts, 0.1, solver="verlet")
    modes = np.asarray(model.mode_energies(ys))
    first = modes[:, 0] / modes.sum(axis=1)
    lowest = int(np.argmin(first))
    assert first[lowest] < 0.3
    assert np.max(first[lowest:]) > 0.95
    energy = np.asarray(model.energy(ys))
    assert np.max(np.abs(energy - energy[0])) < 1e-3 * energy[0]


def test_fput_mode_energies_sum_to_the_harmonic_energy():
    model = FPUTChain(num_masses=5, alpha=0.0)
    y = jnp.asarray(np.random.default_rng(0).normal(size=10))
    assert float(jnp.sum(model.mode_energies(y))) == pytest.approx(
        float(model.energy(y)), rel=1e-12
    )


def _numpy_lennard_jones(positions, box, epsilon, sigma, cutoff):
    """Energy and forces by a double loop over pairs, minimum image, truncated and shifted."""

    def pair(r):
        return 4 * epsilon * ((sigma / r) ** 12 - (sigma / r) ** 6)

    def pair_force(r):  # -dV/dr
        return 24 * epsilon * (2 * (sigma / r) ** 12 - (sigma / r) ** 6) / r

    energy, forces = 0.0, np.zeros_like(positions)
    for i in range(len(positions)):
        for j in range(i + 1, len(positions)):
            separation = positions[i] - positions[j]
            separation -= box * np.round(separation / box)
            r = np.sqrt(separation @ separation)
            if cutoff is not None and r >= cutoff:
                continue
            energy += pair(r) - (pair(cutoff) if cutoff is not None else 0.0)
            forces[i] += pair_force(r) * separation / r
            forces[j] -= pair_force(r) * separation / r
    return energy, forces


_energy = eqx.filter_jit(lambda model, y: model.energy(y))
_field = eqx.filter_jit(lambda model, y: model(0.0, y, None))


@pytest.mark.parametrize(("dimension", "cutoff"), [(2, 2.5), (3, 2.5), (3, None)])
def test_lennard_jones_energy_and_forces_equal_a_numpy_double_loop(dimension, cutoff):
    rng = np.random.default_rng(dimension)
    box, count = 6.0, 12
    side = 4 if dimension == 2 else 3
    lattice = np.stack(np.meshgrid(*[np.arange(side)] * dimension, indexing="ij"), -1)
    positions = (lattice.reshape(-1, dimension)[:count] + 0.5) * box / side
    positions = (positions + rng.uniform(-0.3, 0.3, positions.shape)) % box
    model = LennardJones(
        num_particles=count, box=box, epsilon=1.3, sigma=1.1, cutoff=cutoff, dimension=dimension
    )
    y = model.state(positions, np.zeros_like(positions))
    energy, forces = _numpy_lennard_jones(positions, box, 1.3, 1.1, cutoff)
    assert float(_energy(model, y)) == pytest.approx(energy, rel=1e-12)
    computed = np.asarray(_field(model, y))[count * dimension :].reshape(count, dimension)
    np.testing.assert_allclose(computed, forces, rtol=1e-10, atol=1e-12)


def test_henon_heiles_agrees_with_scipy_dop853():
    model = HenonHeiles()
    y0 = jnp.array([0.1, -0.2, 0.35, 0.1])  # H about 0.09: regular
    ts = jnp.linspace(0.0, 20.0, 5)
    ys = _solve(model, y0, ts, 0.01, solver="yoshida6")

    def field(t, y):
        x, v, px, py = y
        return [px, py, -x - 2 * x * v, -v - x**2 + v**2]

    reference = scipy.integrate.solve_ivp(
        field,
        (0.0, 20.0),
        np.asarray(y0),
        method="DOP853",
        t_eval=np.asarray(ts),
        rtol=1e-13,
        atol=1e-13,
    )
    np.testing.assert_allclose(np.asarray(ys), reference.y.T, atol=1e-10)


def test_outer_solar_system_energy_equals_a_numpy_sum():
    model, y0 = NBody.outer_solar_system()
    masses, G = np.asarray(model.masses), 2.95912208286e-4
    positions = np.asarray(y0[:18]).reshape(6, 3)
    momenta = np.asarray(y0[18:]).reshape(6, 3)
    energy = sum(momenta[i] @ momenta[i] / (2 * masses[i]) for i in range(6))
    for i in range(6):
        for j in range(i):
            energy -= G * masses[i] * masses[j] / np.linalg.norm(positions[i] - positions[j])
    assert float(model.energy(y0)) == pytest.approx(energy, rel=1e-13)
    assert model.state_names[3:6] == ("Jupiter.x", "Jupiter.y", "Jupiter.z")


def test_two_bodies_reduce_to_kepler():
    """Two bodies of masses m1, m2 move relative to each other as Kepler with mu = G(m1+m2)."""
    masses = np.array([0.7, 0.3])
    y_rel = np.asarray(_perihelion(0.4))
    reduced = masses[0] * masses[1] / masses.sum()
    positions = np.stack(
        [-masses[1] / masses.sum() * y_rel[:2], masses[0] / masses.sum() * y_rel[:2]]
    )
    momenta = np.stack([-reduced * y_rel[2:], reduced * y_rel[2:]])
    y0 = jnp.asarray(np.concatenate([positions.ravel(), momenta.ravel()]))
    model = NBody(masses=masses, G=1.0, dimension=2)
    ys = _solve(model, y0, jnp.array([0.0, 2.0]), 0.001, solver="forest_ruth")
    relative = np.asarray(ys[-1, 2:4] - ys[-1, 0:2])
    np.testing.assert_allclose(relative, _exact_kepler(2.0, 0.4)[:2], atol=1e-9)


@eqx.filter_jit
def _verlet_end(mu, y0):
    ts = jnp.array([0.0, 2.0])
    ys = simlab.simulate(Kepler(mu=mu), y0, ts, solver="verlet", adaptive=False, dt0=0.01).ys
    return ys[-1, 0] + 0.5 * ys[-1, 3]


def test_gradients_through_verlet_equal_finite_differences():
    mu, y0 = jnp.asarray(1.2), _perihelion(0.3)
    gradient_mu, gradient_y0 = jax.grad(_verlet_end, argnums=(0, 1))(mu, y0)
    step = 1e-6
    difference = (_verlet_end(mu + step, y0) - _verlet_end(mu - step, y0)) / (2 * step)
    assert float(gradient_mu) == pytest.approx(float(difference), rel=1e-7)
    basis = jnp.eye(4)
    differences = [
        (_verlet_end(mu, y0 + step * e) - _verlet_end(mu, y0 - step * e)) / (2 * step)
        for e in basis
    ]
    np.testing.assert_allclose(
        np.asarray(gradient_y0), np.asarray(differences), rtol=1e-6, atol=1e-9
    )


class _GeneralKepler(AbstractHamiltonianModel):
    """Kepler written as one Hamiltonian, declared non-separable."""

    separable: ClassVar[bool] = False
    state_names: ClassVar[tuple[str, ...]] = ("x", "y", "px", "py")

    def hamiltonian(self, q, p, args):
        return 0.5 * jnp.sum(p**2) - 1 / jnp.sqrt(jnp.sum(q**2))


def test_the_vector_field_is_hamiltons_equations():
    """Kepler's field is (p, -q/|q|^3), written as one Hamiltonian or as T + V."""
    y = _perihelion(0.3)
    q, p = np.asarray(y[:2]), np.asarray(y[2:])
    expected = np.concatenate([p, -q / np.linalg.norm(q) ** 3])
    np.testing.assert_allclose(np.asarray(Kepler()(0.0, y, None)), expected, rtol=1e-14)
    np.testing.assert_allclose(
        np.asarray(_GeneralKepler()(0.0, y, None)), np.asarray(Kepler()(0.0, y, None))
    )


def test_stability_intervals_of_verlet_and_symplectic_euler():
    # On the harmonic oscillator both one-step maps have trace 2 - (h omega)^2: stable below 2.
    for name in ("verlet", "symplectic_euler"):
        assert simlab.SOLVERS[name].build().stability_interval == pytest.approx(2.0, abs=2e-3)


def test_a_step_above_the_stability_limit_is_refused_with_the_limit():
    model = Pendulum(length=1.0)
    angle = 0.3
    limit = 2 / np.sqrt(9.81 * np.cos(angle))  # Verlet: h omega < 2, omega^2 = g cos(angle) / L
    with pytest.raises(simlab.SimulationError, match=f"largest stable step {limit:.6g}"):
        simlab.simulate(
            model,
            jnp.array([angle, 0.0]),
            jnp.array([0.0, 10.0]),
            solver="verlet",
            adaptive=False,
            dt0=1.05 * limit,
        )


def test_without_a_step_one_is_chosen_for_the_energy_error():
    """Verlet's step with h omega = 0.1, omega = sqrt(g/L): the pendulum's energy error is
    then near (h omega)^2 / 4 of its swing, well inside the stability limit h omega < 2."""
    model = Pendulum(length=1.0)
    y0 = jnp.array([0.0, 0.5])
    limit = float(model.max_stable_step(simlab.SOLVERS["verlet"].build(), y0))
    assert limit == pytest.approx(2 / np.sqrt(9.81), rel=1e-3)  # omega = sqrt(g/L) at the bottom
    ts = jnp.linspace(0.0, 10.0, 101)
    path = simlab.simulate(model, y0, ts, solver="verlet", adaptive=False)
    step = 0.1 / np.sqrt(9.81)
    assert int(path.stats["num_steps"]) == 100 * int(np.ceil(0.1 / step))  # 4 per save interval
    energy = np.asarray(model.energy(path.ys))
    assert np.max(np.abs(energy - energy[0])) < 0.0025 * 0.5**2 / 2


def test_refusals_name_the_problem():
    ts = jnp.array([0.0, 1.0])
    with pytest.raises(ValueError, match="separable Hamiltonians"):
        simlab.simulate(
            _GeneralKepler(), _perihelion(0.3), ts, solver="verlet", adaptive=False, dt0=0.01
        )
    lorenz = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)
    with pytest.raises(ValueError, match="integrates Hamiltonian models"):
        simlab.simulate(lorenz, jnp.ones(3), ts, solver="verlet", adaptive=False, dt0=0.01)
    with pytest.raises(ValueError, match="'masses' must be finite and lie in"):
        NBody(masses=jnp.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="cutoff must lie in"):
        LennardJones(num_particles=4, box=3.0, cutoff=2.0)
    model = LennardJones(num_particles=2, box=3.0, dimension=2)
    with pytest.raises(ValueError, match=r"particles \[1\] lie outside the periodic box"):
        model.state(jnp.array([[0.5, 0.5], [3.2, 1.0]]), jnp.zeros((2, 2)))
