"""Incompressible flow with walls on a staggered grid: the pressure solve against a dense
NumPy Laplacian, the divergence at roundoff, Poiseuille flow's exact profile and second-order
convergence, the Taylor-Green tendency's second order, the lid-driven cavity against Ghia,
Ghia & Shin (1982), gradients against finite differences, and the refusals of bad input."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab.integrate import SOLVERS
from simlab.models import WalledNavierStokes2D, poiseuille_velocity

RK4 = SOLVERS["rk4"].build()

# Ghia, Ghia & Shin, J. Comput. Phys. 48 (1982) 387-411, Table I: u on the vertical
# centreline x = 1/2 of the cavity at Re = 100 (their 129 x 129 grid), without the wall
# points y = 0 and 1. Taken from the paper's Table I as reproduced at
# https://pdfslide.us/documents/cavityflow-2-ghia.html; public cavity benchmarks (e.g. the
# PetIBM examples of barbagroup) transcribe the same values.
GHIA_Y = np.array(
    [0.9766, 0.9688, 0.9609, 0.9531, 0.8516, 0.7344, 0.6172, 0.5000]
    + [0.4531, 0.2813, 0.1719, 0.1016, 0.0703, 0.0625, 0.0547]
)
GHIA_U_RE100 = np.array(
    [0.84123, 0.78871, 0.73722, 0.68717, 0.23151, 0.00332, -0.13641, -0.20581]
    + [-0.21090, -0.15662, -0.10150, -0.06434, -0.04775, -0.04192, -0.03717]
)
# The largest difference measured on 32^2 cells is 2.0e-3. Refined to 96^2 and 128^2 cells
# (benchmarks/bench_walled_flow.py) the profile converges to 1e-4 and the difference settles
# at 4.9e-3 (at y = 0.8516): the accuracy of Ghia's own 129^2 solution, which bounds any
# agreement.
GHIA_TOLERANCE = 5e-3
DIVERGENCE_TOLERANCE = 1e-12


@eqx.filter_jit
def _run(model, y0, ts, dt):
    """Fixed RK4 steps of `dt` through the save times `ts`, both traced: one compilation
    per model structure serves every run."""
    trajectory = simlab.simulate(
        model, y0, ts, solver="rk4", adaptive=False, dt0=dt, max_steps=100_000, throw=False
    )
    return trajectory.ys, trajectory.result


def _states(model, y0, ts, dt):
    ys, result = _run(model, y0, jnp.asarray(ts), jnp.asarray(dt))
    assert result == simlab.RESULTS.successful
    return ys


def _stable_step(model, y0):
    return 0.9 * float(model.max_stable_step(RK4, y0))


def _max_divergence(model, ys):
    return float(jnp.max(jnp.abs(jax.vmap(model.divergence)(ys))))


@pytest.fixture(scope="module")
def cavity():
    """The Re = 100 cavity on 32^2 cells, marched from rest to t = 20 (steady)."""
    model, y0 = WalledNavierStokes2D.lid_driven_cavity(num_cells=32, reynolds=100.0)
    ys = _states(model, y0, [0.0, 10.0, 15.0, 20.0], _stable_step(model, y0))
    return model, ys


def _neumann_laplacian(n, h, periodic):
    """The 1-D second difference over h^2 with zero normal derivative, or periodic."""
    matrix = -2 * np.eye(n) + np.eye(n, k=1) + np.eye(n, k=-1)
    if periodic:
        matrix[0, -1] = matrix[-1, 0] = 1.0
    else:
        matrix[0, 0] = matrix[-1, -1] = -1.0
    return matrix / h**2


@pytest.mark.parametrize("boundary", [["dirichlet", "dirichlet"], ["periodic", "dirichlet"]])
def test_pressure_solve_inverts_the_dense_laplacian(boundary):
    grid = simlab.Grid((6, 5), extent=(1.5, 1.0), boundary=boundary)
    model = WalledNavierStokes2D(viscosity=0.1, grid=grid)
    (nx, ny), (hx, hy) = grid.shape, grid.spacing
    laplacian = np.kron(_neumann_laplacian(nx, hx, grid.is_periodic[0]), np.eye(ny)) + np.kron(
        np.eye(nx), _neumann_laplacian(ny, hy, False)
    )
    source = np.random.default_rng(0).normal(size=grid.shape)
    pressure = np.asarray(model.solve_pressure(jnp.asarray(source)))
    np.testing.assert_allclose(
        (laplacian @ pressure.ravel()).reshape(grid.shape), source - source.mean(), atol=1e-11
    )
    assert abs(pressure.mean()) < 1e-14


def test_projection_is_divergence_free_and_idempotent(cavity):
    model, _ = cavity
    field = jax.random.normal(jax.random.PRNGKey(0), model.state_shape)
    projected = model.project(field)
    assert float(jnp.max(jnp.abs(model.divergence(projected)))) < DIVERGENCE_TOLERANCE
    assert float(jnp.max(jnp.abs(projected[0, -1]))) == 0.0  # no flow through the wall
    np.testing.assert_allclose(model.project(projected), projected, atol=1e-14)
    # The projection is orthogonal: what it removes is orthogonal to what it keeps.
    assert abs(float(jnp.vdot(field - projected, projected))) < 1e-10 * float(
        jnp.vdot(field, field)
    )


def test_divergence_stays_at_roundoff(cavity):
    model, ys = cavity
    # From rest, with the lid: every saved state over 600 steps.
    scale = float(jnp.max(jnp.abs(ys))) / min(model.grid.spacing)
    assert _max_divergence(model, ys) < DIVERGENCE_TOLERANCE * scale
    # From a random divergence-free field, after 40 steps.
    y0 = model.project(jax.random.normal(jax.random.PRNGKey(1), model.state_shape))
    dt = 0.25 * float(model.max_stable_step(RK4, y0))
    moved = _states(model, y0, dt * np.array([0.0, 10.0, 20.0, 40.0]), dt)
    assert _max_divergence(model, moved) < DIVERGENCE_TOLERANCE
    assert float(jnp.max(jnp.abs(moved[-1] - y0))) > 0.1  # it did move


def test_cavity_matches_ghia_at_re_100(cavity):
    model, ys = cavity
    assert float(jnp.max(jnp.abs(ys[-1] - ys[-2]))) < 1e-3  # steady: t = 15 to 20
    y, u = model.centreline_profile(ys[-1])
    error = np.max(np.abs(np.interp(GHIA_Y, np.asarray(y), np.asarray(u)) - GHIA_U_RE100))
    assert error < GHIA_TOLERANCE, error
    assert float(jnp.min(u)) == pytest.approx(-0.2109, abs=GHIA_TOLERANCE)  # the return flow


def test_cavity_matches_ghia_at_re_1000():
    """Re = 1000 on 128^2 cells (cell Reynolds number 7.8: the centred scheme holds without
    upwinding here). Measured: 3.1e-3 from Ghia's Table I at t = 50, settling to 3.0e-3 by
    t = 80; on 64^2 cells it settles at 1.8e-2."""
    model, y0 = WalledNavierStokes2D.lid_driven_cavity(num_cells=128, reynolds=1000.0)
    with pytest.warns(UserWarning, match="cell Reynolds number"):
        ys = _states(model, y0, [0.0, 40.0, 50.0], _stable_step(model, y0))
    assert float(jnp.max(jnp.abs(ys[-1] - ys[-2]))) < 2e-3  # nearly steady: t = 40 to 50
    ghia_y, ghia_u = simlab.datasets.ghia_cavity_centreline(1000)
    y, u = model.centreline_profile(ys[-1])
    error = np.max(np.abs(np.interp(ghia_y, np.asarray(y), np.asarray(u)) - ghia_u))
    assert error < GHIA_TOLERANCE, error


def test_poiseuille_profile_converges_at_second_order():
    errors = []
    for num_y in (8, 16):
        model, y0 = WalledNavierStokes2D.channel(num_cells=(4, num_y))
        # The slowest viscous mode decays as exp(-nu pi^2 t): gone by t = 1.5 (4e-7).
        final = _states(model, y0, [0.0, 1.0, 1.5], _stable_step(model, y0))[-1]
        error = final - poiseuille_velocity(model)
        errors.append(float(jnp.max(jnp.abs(error))))
        # The interior second difference is exact for the parabola; the wall's ghost value
        # closes it for the parabola shifted by G h^2 / (8 nu), the discrete steady state.
        h = model.grid.spacing[1]
        offset = float(model.body_force) * h**2 / (8 * float(model.viscosity))
        np.testing.assert_allclose(error[0], offset, rtol=0, atol=2e-6)  # the transient
        assert float(jnp.max(jnp.abs(error[1]))) < 1e-12  # v = 0
    np.testing.assert_allclose(np.array(errors[:-1]) / np.array(errors[1:]), 4.0, rtol=1e-3)


def _taylor_green(num_cells):
    """The periodic Taylor–Green field psi = sin x sin 2y on the MAC grid: face velocities
    as differences of psi at the cell corners, so divergence-free to roundoff."""
    h = 2 * np.pi / num_cells
    x, y = np.meshgrid(h * np.arange(num_cells + 1), h * np.arange(num_cells + 1), indexing="ij")
    psi = np.sin(x) * np.sin(2 * y)
    u = (psi[1:, 1:] - psi[1:, :-1]) / h
    v = -(psi[1:, 1:] - psi[:-1, 1:]) / h
    return jnp.asarray(np.stack([u, v]))


def test_taylor_green_tendency_converges_at_second_order():
    # psi is an eigenfunction of the Laplacian, |k|^2 = 5, so its advection is a pressure
    # gradient and the exact tendency is -nu |k|^2 u: the projected advection, viscosity
    # and projection together must reproduce it to O(h^2).
    errors = []
    for num_cells in (64, 128):
        grid = simlab.Grid((num_cells, num_cells), extent=2 * np.pi)
        model = WalledNavierStokes2D(viscosity=0.1, grid=grid)
        field = _taylor_green(num_cells)
        assert float(jnp.max(jnp.abs(model.divergence(field)))) < DIVERGENCE_TOLERANCE
        exact = -0.1 * 5 * field
        errors.append(float(jnp.max(jnp.abs(model(0.0, field, None) - exact))))
    order = np.log2(errors[0] / errors[1])
    assert 1.9 < order < 2.1, (errors, order)


def test_gradients_match_finite_differences(cavity):
    def final_energy(viscosity, lid_speed):
        # The cavity's structure: the primal runs share the fixture's compiled solve.
        model, y0 = WalledNavierStokes2D.lid_driven_cavity(num_cells=32, lid_speed=lid_speed)
        model = eqx.tree_at(lambda m: m.viscosity, model, viscosity)
        ys, _ = _run(model, y0, jnp.array([0.0, 0.1, 0.2, 0.3]), jnp.asarray(0.005))
        return model.kinetic_energy(ys[-1])

    point = (jnp.asarray(0.05, float), jnp.asarray(1.0, float))  # strong types, as the fixture's
    gradients = jax.grad(final_energy, argnums=(0, 1))(*point)
    for index, gradient in enumerate(gradients):
        step = 1e-6
        shifts = [
            tuple(p + (s if i == index else 0.0) for i, p in enumerate(point))
            for s in (step, -step)
        ]
        difference = (final_energy(*shifts[0]) - final_energy(*shifts[1])) / (2 * step)
        assert abs(float(difference)) > 1e-3  # a derivative that matters
        np.testing.assert_allclose(gradient, difference, rtol=1e-7)


def test_cfl_step_and_refusals(cavity):
    model, _ = cavity
    y0 = jnp.zeros(model.state_shape)
    # The lid's speed bounds the flow from rest: C / (1/h + 0/h).
    assert float(model.cfl_step(y0, courant=0.5)) == pytest.approx(0.5 / 32)
    limit = float(model.max_stable_step(RK4, y0))
    ts = jnp.array([0.0, 1.0])
    with pytest.raises(simlab.SimulationError, match="above the largest stable step"):
        simlab.simulate(model, y0, ts, solver="rk4", adaptive=False, dt0=1.5 * limit)
    swirl = jax.random.normal(jax.random.PRNGKey(2), model.state_shape)
    with pytest.raises(ValueError, match=r"model.project\(y0\)"):
        model.max_stable_step(RK4, swirl)
    assert float(model.max_stable_step(RK4, model.project(swirl))) > 0
    with pytest.raises(ValueError, match="2-D"):
        WalledNavierStokes2D(viscosity=0.1, grid=simlab.Grid((8,)))
    with pytest.raises(ValueError, match="walled along y"):
        poiseuille_velocity(model)


def _as_float32(tree):
    return jax.tree.map(lambda x: x.astype(jnp.float32) if eqx.is_inexact_array(x) else x, tree)


@pytest.mark.parametrize("make", ["cavity", "burgers", "advection_diffusion"])
def test_fixed_steps_in_float32_follow_float64(make):
    """The stable-step estimate mixes the float64 Laplacian symbol with the model's own
    parameters: a float32 model must still run (strict dtype promotion) and track float64."""
    grid = simlab.Grid((16,), extent=1.0, boundary="periodic")
    x = np.asarray(grid.coordinates()[0])
    model, y0 = {
        "cavity": lambda: WalledNavierStokes2D.lid_driven_cavity(num_cells=8, reynolds=10.0),
        "burgers": lambda: (
            simlab.models.Burgers(viscosity=0.05, grid=grid),
            jnp.asarray(np.sin(2 * np.pi * x)),
        ),
        "advection_diffusion": lambda: (
            simlab.models.AdvectionDiffusion(
                diffusivity=0.05, velocity=jnp.array([1.0]), grid=grid
            ),
            jnp.asarray(np.sin(2 * np.pi * x)),
        ),
    }[make]()
    ts, dt = np.array([0.0, 0.1]), 0.005

    def final(model, y0, dtype):
        return simlab.simulate(
            model, y0, ts.astype(dtype), solver="rk4", adaptive=False, dt0=dt
        ).ys[-1]

    single = final(*_as_float32((model, y0)), np.float32)
    assert single.dtype == jnp.float32
    np.testing.assert_allclose(single, final(model, y0, np.float64), atol=1e-5)
