"""A channel with open ends on the staggered grid: the Krylov pressure solve against a dense
NumPy solve, the preconditioner's iteration counts, the projection with an inflow and an
outflow, developing flow reaching the scheme's exact Poiseuille profile downstream with
equal mass flux through every section, the gradient wrt the inflow speed against central
differences, and the refusals of misplaced open sides."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab.integrate import SOLVERS
from simlab.models import WalledNavierStokes2D

RK4 = SOLVERS["rk4"].build()
LENGTH = 2.0


@eqx.filter_jit
def _run(model, y0, ts, dt):
    trajectory = simlab.simulate(
        model, y0, ts, solver="rk4", adaptive=False, dt0=dt, max_steps=10_000, throw=False
    )
    return trajectory.ys, trajectory.result


def _second_difference(n, h, high):
    """The 1-D second difference over h^2: zero normal derivative at the low face; at the
    high face zero derivative ("neumann"), p = 0 ("outlet": the ghost is -p) or periodic."""
    matrix = -2 * np.eye(n) + np.eye(n, k=1) + np.eye(n, k=-1)
    matrix[0, 0] += 1.0
    if high == "periodic":
        matrix[0, 0] -= 1.0
        matrix[0, -1] = matrix[-1, 0] = 1.0
    else:
        matrix[-1, -1] += {"neumann": 1.0, "outlet": -1.0}[high]
    return matrix / h**2


def _discrete_poiseuille(model, mean_speed):
    r"""The steady profile of the scheme in a fully developed channel of height 1: the
    5-point viscous term with no-slip ghosts holds $u = a(\eta(1 - \eta) + h^2/4)$ exactly
    (the parabola shifted as for the periodic channel), and $a$ carries the inlet's flux:
    the midpoint sum of $\eta(1 - \eta)$ is $1/6 + h^2/12$."""
    (_, eta), h = model.grid.coordinates(), model.grid.spacing[1]
    amplitude = mean_speed / (1 / 6 + h**2 / 12 + h**2 / 4)
    return amplitude * (eta * (1 - eta) + h**2 / 4)


@pytest.fixture(scope="module")
def channel():
    """Uniform inflow at speed 1 into a channel of 16 x 8 cells, length 2, Re = 1, marched
    to t = 2: 20 viscous times h^2/nu of the slowest cross-channel mode's 1/pi^2."""
    model, y0 = WalledNavierStokes2D.open_channel((16, 8), length=LENGTH)
    dt = 0.9 * float(model.max_stable_step(RK4, y0))
    ys, result = _run(model, y0, jnp.array([0.0, 1.0, 1.5, 2.0]), jnp.asarray(dt))
    assert result == simlab.RESULTS.successful
    return model, ys


@pytest.mark.parametrize(
    "boundary",
    [
        [(simlab.Inflow(1.0), simlab.Outflow()), "dirichlet"],
        [(simlab.Inflow(1.0), simlab.Outflow()), "periodic"],
        ["dirichlet", "dirichlet"],  # no outlet: p of zero mean, for s less its mean
    ],
    ids=["outlet-walls", "outlet-periodic", "walls"],
)
def test_krylov_solve_matches_a_dense_solve(boundary):
    grid = simlab.Grid((12, 6), extent=(2.0, 1.0), boundary=boundary)
    model = WalledNavierStokes2D(viscosity=1.0, grid=grid, pressure_solve="krylov")
    (nx, ny), (hx, hy) = grid.shape, grid.spacing
    outlet = isinstance(grid.boundaries[0][1], simlab.Outflow)
    laplacian = np.kron(
        _second_difference(nx, hx, "outlet" if outlet else "neumann"), np.eye(ny)
    ) + np.kron(
        np.eye(nx), _second_difference(ny, hy, "periodic" if grid.is_periodic[1] else "neumann")
    )
    source = np.random.default_rng(0).normal(size=grid.shape)
    solvable = source if outlet else source - source.mean()
    dense = np.linalg.lstsq(laplacian, solvable.ravel(), rcond=None)[0].reshape(grid.shape)
    pressure = np.asarray(model.solve_pressure(jnp.asarray(source)))
    np.testing.assert_allclose(pressure, dense, rtol=0, atol=1e-9 * np.max(np.abs(dense)))


def test_preconditioner_cuts_the_iterations():
    # Measured: 12 steps preconditioned, 77 without (16 x 8); 22 and 253 on 64 x 16.
    source = jax.random.normal(jax.random.PRNGKey(0), (16, 8))
    model, _ = WalledNavierStokes2D.open_channel((16, 8), length=LENGTH)
    with_it = int(model.pressure_krylov(source)[1])
    without = int(model.pressure_krylov(source, preconditioned=False)[1])
    assert with_it <= 14 and without >= 5 * with_it, (with_it, without)
    # Without an outlet the preconditioner is the exact inverse (the transform solve).
    grid = simlab.Grid((16, 8), boundary="dirichlet")
    walled = WalledNavierStokes2D(viscosity=1.0, grid=grid, pressure_solve="krylov")
    assert int(walled.pressure_krylov(source)[1]) <= 2


@pytest.mark.parametrize("profile", ["uniform", "parabolic"])
def test_projection_with_inflow_and_outflow(profile):
    model, y0 = WalledNavierStokes2D.open_channel((16, 8), length=LENGTH, profile=profile)
    h = model.grid.spacing
    field = jax.random.normal(jax.random.PRNGKey(1), model.state_shape)
    for projected in (y0, model.project(field)):
        roundoff = 1e-13 * float(jnp.max(jnp.abs(projected))) / min(h)
        assert float(jnp.max(jnp.abs(model.divergence(projected)))) < roundoff
        # Mass in = mass out through every section (the walls carry none).
        np.testing.assert_allclose(jnp.sum(projected[0], axis=1) * h[1], 1.0, atol=1e-13)
        np.testing.assert_allclose(model.project(projected), projected, atol=1e-12)
    assert float(jnp.max(jnp.abs(y0[1, :, -1]))) == 0.0  # the top wall's faces


def test_developing_flow_reaches_poiseuille_downstream(channel):
    model, ys = channel
    h = model.grid.spacing[1]
    steady = float(jnp.max(jnp.abs(ys[-1] - ys[-2])))
    assert steady < 1e-12
    scale = float(jnp.max(jnp.abs(ys))) / min(model.grid.spacing)
    assert float(jnp.max(jnp.abs(jax.vmap(model.divergence)(ys)))) < 1e-12 * scale
    final = ys[-1]
    np.testing.assert_allclose(jnp.sum(final[0], axis=1) * h, 1.0, atol=1e-12)  # every section
    # Near the inlet the uniform profile is still developing; at the outlet it is the
    # scheme's Poiseuille flow (measured 9e-7 off, v below 1e-5) ...
    discrete = _discrete_poiseuille(model, 1.0)
    assert float(jnp.max(jnp.abs(final[0, 0] - discrete))) > 0.1
    np.testing.assert_allclose(final[0, -1], discrete, atol=5e-6)
    assert float(jnp.max(jnp.abs(final[1, -1]))) < 2e-5
    # ... which is second order from the exact 6 eta (1 - eta): the difference
    # (3/2 - 12 eta (1 - eta)) h^2 / (1 + 2 h^2) is at most 3 h^2 / 2.
    (_, eta) = model.grid.coordinates()
    exact = 6 * eta * (1 - eta)
    error = float(jnp.max(jnp.abs(final[0, -1] - exact)))
    assert 1.4 * h**2 < error < 1.5 * h**2, error / h**2


@jax.jit
def _energy_after_a_step(inflow_speed):
    """The energy after an Euler step from the potential flow of the inflow: the inflow
    enters through the projection, the ghosts and the momentum tendency."""
    model, y0 = WalledNavierStokes2D.open_channel((8, 4), length=1.0, inflow_speed=inflow_speed)
    return model.kinetic_energy(y0 + 0.01 * model(0.0, y0, None))


def test_gradient_wrt_inflow_speed_matches_finite_differences():
    speed, step = jnp.asarray(1.0), 1e-5
    gradient = jax.jit(jax.grad(_energy_after_a_step))(speed)
    difference = (_energy_after_a_step(speed + step) - _energy_after_a_step(speed - step)) / (
        2 * step
    )
    assert float(difference) > 0.5  # a derivative that matters
    np.testing.assert_allclose(gradient, difference, rtol=1e-8)


def test_refusals_of_misplaced_open_sides():
    inflow, outflow = simlab.Inflow(1.0), simlab.Outflow()

    def model(boundary, **options):
        grid = simlab.Grid((8, 4), boundary=boundary)
        return WalledNavierStokes2D(viscosity=1.0, grid=grid, **options)

    with pytest.raises(ValueError, match="periodic on one side only"):
        simlab.Grid((8, 4), boundary=[(simlab.Periodic(), outflow), "dirichlet"])
    with pytest.raises(ValueError, match="Outflow\\(\\) on the high-y side"):
        model(["dirichlet", ("dirichlet", outflow)])
    with pytest.raises(ValueError, match="Inflow\\(\\) on the high-x side"):
        model([(outflow, inflow), "dirichlet"])
    with pytest.raises(ValueError, match="needs an outlet"):
        model([(inflow, "dirichlet"), "dirichlet"])
    with pytest.raises(ValueError, match=r"shape \(4,\); got shape \(8,\)"):
        model([(simlab.Inflow(jnp.ones(8)), outflow), "dirichlet"])
    with pytest.raises(ValueError, match="1-D array"):
        simlab.Inflow(jnp.ones((4, 2)))
    with pytest.raises(ValueError, match="'transform' cannot hold p = 0"):
        model([(inflow, outflow), "dirichlet"], pressure_solve="transform")
    with pytest.raises(ValueError, match="pressure_solve must be one of"):
        model(["dirichlet", "dirichlet"], pressure_solve="multigrid")
    with pytest.raises(ValueError, match="profile must be 'uniform' or 'parabolic'"):
        WalledNavierStokes2D.open_channel(profile="plug")
