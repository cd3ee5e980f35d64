"""PDE models by the method of lines: analytic solutions, orders, conservation, stability."""

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import without_type_checks
from scipy import ndimage

import simlab
from simlab.models import AdvectionDiffusion, Burgers, GrayScott, Heat, Wave


# Fixed RK4 steps small enough that the time error is far below the spatial one.
def _rk4(dt0: float) -> dict:
    return dict(solver="rk4", adaptive=False, dt0=dt0, max_steps=100_000)


def _fitted_order(errors, sizes) -> float:
    slope, _ = np.polyfit(np.log(sizes), np.log(errors), 1)
    return -slope


def _line(num_cells, boundary="periodic", extent=2 * np.pi):
    return simlab.Grid((num_cells,), extent=extent, boundary=boundary)


@pytest.mark.parametrize(("order", "sizes"), [(2, (16, 32)), (4, (16, 32))])
def test_heat_fourier_mode_decays_at_the_exact_rate_with_the_stencils_order(order, sizes):
    diffusivity, wavenumber, end = 0.1, 2, 1.0
    errors = []
    for size in sizes:
        grid = _line(size)
        (x,) = grid.coordinates()
        model = Heat(diffusivity=diffusivity, grid=grid, order=order)
        y0, ts = jnp.sin(wavenumber * x), jnp.array([0.0, end])
        trajectory = simlab.simulate(model, y0, ts, **_rk4(0.01))
        exact = np.exp(-diffusivity * wavenumber**2 * end) * np.sin(wavenumber * x)
        errors.append(float(jnp.max(jnp.abs(trajectory.ys[-1] - exact))))
    assert abs(_fitted_order(errors, sizes) - order) < 0.2


def test_heat_with_dirichlet_walls_matches_the_sine_series():
    grid = _line(24, boundary=simlab.Dirichlet(0.0), extent=1.0)
    (x,) = grid.coordinates()
    y0 = jnp.sin(np.pi * x) + 0.5 * jnp.sin(3 * np.pi * x)
    ts = jnp.array([0.0, 0.05])
    trajectory = simlab.simulate(Heat(diffusivity=1.0, grid=grid), y0, ts, **_rk4(1e-4))
    # The semi-discrete modes decay with the stencil's eigenvalues (2 cos(kh) - 2) / h^2.
    h = grid.spacing[0]
    rates = [(2 - 2 * np.cos(k * np.pi * h)) / h**2 for k in (1, 3)]
    exact = np.exp(-rates[0] * 0.05) * np.sin(np.pi * x) + 0.5 * np.exp(-rates[1] * 0.05) * np.sin(
        3 * np.pi * x
    )
    np.testing.assert_allclose(trajectory.ys[-1], exact, atol=1e-8)


def test_forward_mode_sensitivity_of_a_decaying_mode():
    """d/dD of a decaying 2-D Fourier mode, by forward mode through the solve, equals
    the semi-discrete value -lambda t exp(-D lambda t) sin(x) sin(y)."""
    grid = simlab.Grid((12, 12), extent=2 * np.pi)
    x, y = grid.mesh()
    y0, end = jnp.sin(x) * jnp.sin(y), 0.5
    h = grid.spacing[0]
    rate = 2 * (2 - 2 * np.cos(h)) / h**2  # the 5-point stencil's eigenvalue, two axes

    def final(diffusivity):
        model = Heat(diffusivity=diffusivity, grid=grid)
        ts = jnp.array([0.0, end])
        return simlab.simulate(model, y0, ts, adjoint="forward", **_rk4(0.01)).ys[-1]

    _, tangent = jax.jvp(final, (0.2,), (1.0,))
    expected = -rate * end * np.exp(-0.2 * rate * end) * y0
    np.testing.assert_allclose(tangent, expected, atol=1e-8)


@pytest.mark.parametrize("boundary", ["periodic", "neumann"])
def test_mass_is_conserved_with_a_diffusivity_field(boundary):
    grid = simlab.Grid((10, 8), extent=(1.0, 0.8), boundary=boundary)
    rng = np.random.default_rng(0)
    diffusivity = 0.01 + 0.02 * rng.uniform(size=grid.shape)
    velocity = np.stack([np.full(grid.shape, 0.3), np.zeros(grid.shape)])
    model = AdvectionDiffusion(diffusivity=diffusivity, velocity=velocity, grid=grid)
    if boundary == "neumann":  # no inflow through walls: diffusion only
        model = Heat(diffusivity=diffusivity, grid=grid)
    y0 = jnp.asarray(rng.uniform(size=grid.shape))
    trajectory = simlab.simulate(model, y0, jnp.linspace(0.0, 2.0, 3), solver="rk4", adaptive=False)
    masses = np.asarray(jax.vmap(grid.integrate)(trajectory.ys))
    np.testing.assert_allclose(masses, masses[0], rtol=1e-12)
    assert float(jnp.std(trajectory.ys[-1])) < 0.9 * float(jnp.std(y0))  # it did diffuse


def test_wave_energy_drift_is_bounded_over_many_periods():
    grid = _line(32, extent=1.0)
    (x,) = grid.coordinates()
    model = Wave(wave_speed=1.0, grid=grid)
    y0 = jnp.stack([jnp.exp(-50 * (x - 0.5) ** 2), jnp.zeros_like(x)])
    ts = jnp.linspace(0.0, 50.0, 201)  # fifty crossings of the domain
    trajectory = simlab.simulate(model, y0, ts, **_rk4(grid.spacing[0] / 4))
    energy = np.asarray(model.energy(trajectory.ys))
    drift = np.abs(energy - energy[0]) / energy[0]
    assert drift.max() < 1e-3  # RK4's slight damping of the shortest waves, O(dt^4)
    # The pulse comes back to its start after each period (wave speed 1, extent 1),
    # up to the dispersion of the second-order stencil.
    period_error = jnp.max(jnp.abs(trajectory.ys[4, 0] - y0[0]))
    assert float(period_error) < 0.05


def _cole_hopf(x, t, viscosity, offset=1.5):
    decay = np.exp(-viscosity * t)
    return 2 * viscosity * decay * np.sin(x) / (offset + decay * np.cos(x))


def test_burgers_matches_cole_hopf_with_second_order_convergence():
    viscosity, end, sizes = 0.2, 2.0, (32, 64)
    errors = []
    for size in sizes:
        grid = _line(size)
        (x,) = grid.coordinates()
        model = Burgers(viscosity=viscosity, grid=grid, scheme="central")
        y0 = jnp.asarray(_cole_hopf(np.asarray(x), 0.0, viscosity))
        trajectory = simlab.simulate(model, y0, jnp.array([0.0, end]), **_rk4(0.005))
        exact = _cole_hopf(np.asarray(x), end, viscosity)
        errors.append(float(jnp.max(jnp.abs(trajectory.ys[-1] - exact))))
    assert errors[-1] < 2e-3
    assert abs(_fitted_order(errors, sizes) - 2) < 0.2


GRAY_SCOTT_GRID = simlab.Grid((64, 64), spacing=1.0)
GRAY_SCOTT = GrayScott(
    feed_rate=0.035, kill_rate=0.065, diffusivity_u=0.2, diffusivity_v=0.1, grid=GRAY_SCOTT_GRID
)


def _gray_scott_seed():
    u, v = np.ones(GRAY_SCOTT_GRID.shape), np.zeros(GRAY_SCOTT_GRID.shape)
    u[28:36, 28:36], v[28:36, 28:36] = 0.5, 0.25
    v[28:36, 28:36] += 0.01 * np.random.default_rng(0).uniform(size=(8, 8))
    return jnp.asarray(np.stack([u, v]))


def _gray_scott_run(y0):
    return simlab.simulate(
        GRAY_SCOTT,
        y0,
        jnp.linspace(0.0, 4000.0, 3),
        solver="euler",
        adaptive=False,
        dt0=0.95,
        max_steps=10_000,
    )


def test_gray_scott_homogeneous_state_stays_put():
    steady = jnp.stack([jnp.ones(GRAY_SCOTT_GRID.shape), jnp.zeros(GRAY_SCOTT_GRID.shape)])
    assert float(jnp.max(jnp.abs(GRAY_SCOTT(0.0, steady, None)))) == 0.0
    trajectory = _gray_scott_run(steady)
    np.testing.assert_array_equal(trajectory.ys[-1], steady)


def test_gray_scott_seed_forms_spots():
    seed = _gray_scott_seed()
    final_v = np.asarray(_gray_scott_run(seed).ys[-1, 1])
    _, num_spots = ndimage.label(final_v > 0.1)
    assert num_spots > 1
    assert final_v.var() > 3 * float(seed[1].var())


def test_gradients_with_respect_to_diffusivity_match_finite_differences():
    grid = _line(12, boundary=(simlab.Dirichlet(1.0), simlab.Neumann(0.0)), extent=1.0)
    (x,) = grid.coordinates()
    y0 = jnp.exp(-20 * (x - 0.4) ** 2)
    ts = jnp.linspace(0.0, 0.2, 5)
    target = jnp.cos(3 * x)

    @jax.jit
    def loss(diffusivity):
        model = Heat(diffusivity=diffusivity, grid=grid)
        trajectory = simlab.simulate(model, y0, ts, solver="rk4", adaptive=False, dt0=0.005)
        return jnp.sum((trajectory.ys - target[None]) ** 2)

    field = jnp.asarray(0.05 + 0.05 * np.random.default_rng(1).uniform(size=grid.shape))
    direction = jnp.asarray(np.random.default_rng(2).standard_normal(grid.shape))
    step = 1e-6
    for diffusivity, tangent in ((field, direction), (field * 0 + 0.07, field * 0 + 1.0)):
        gradient = jax.grad(loss)(diffusivity)
        finite_difference = (
            loss(diffusivity + step * tangent) - loss(diffusivity - step * tangent)
        ) / (2 * step)
        np.testing.assert_allclose(jnp.vdot(gradient, tangent), finite_difference, rtol=1e-6)


def test_scalar_diffusivity_gradient_matches_finite_differences():
    grid = _line(12, extent=1.0)
    (x,) = grid.coordinates()
    y0 = jnp.sin(2 * np.pi * x)

    @jax.jit
    def loss(diffusivity):
        trajectory = simlab.simulate(
            Heat(diffusivity=diffusivity, grid=grid), y0, jnp.array([0.0, 0.5]), **_rk4(0.01)
        )
        return jnp.sum(trajectory.ys[-1] ** 2)

    value, gradient = jax.jit(jax.value_and_grad(loss))(0.02)
    step = 1e-5
    finite_difference = (loss(0.02 + step) - loss(0.02 - step)) / (2 * step)
    np.testing.assert_allclose(gradient, finite_difference, rtol=1e-5)
    # The exact semi-discrete answer: d/dD sum(exp(-2 D lambda t) sin^2) = -2 lambda t value.
    h = grid.spacing[0]
    rate = (2 - 2 * np.cos(2 * np.pi * h)) / h**2
    np.testing.assert_allclose(gradient, -2 * rate * 0.5 * value, rtol=1e-6)


def test_fixed_step_above_the_stability_limit_is_refused_with_the_limit():
    grid = simlab.Grid((16, 16), extent=1.0)
    model = Heat(diffusivity=0.5, grid=grid)
    y0 = jnp.zeros(grid.shape)
    # Forward Euler on the 5-point Laplacian: dt <= h^2 / (2 d D).
    limit = (1 / 16) ** 2 / (2 * 2 * 0.5)
    assert model.max_stable_step(dfx.Euler(), y0) == pytest.approx(limit, rel=1e-6)
    with pytest.raises(simlab.SimulationError, match="largest stable step 0.001953"):
        simlab.simulate(
            model, y0, jnp.array([0.0, 0.1]), solver="euler", adaptive=False, dt0=1.01 * limit
        )
    # Upwind advection with Heun: the CFL number |v| dt / h must stay below 1.
    advection = AdvectionDiffusion(diffusivity=0.0, velocity=jnp.array([2.0, 0.0]), grid=grid)
    assert advection.max_stable_step(dfx.Heun(), y0) == pytest.approx((1 / 16) / 2.0, rel=1e-6)
    # Waves (imaginary eigenvalues) are unstable with forward Euler at any step.
    wave = Wave(wave_speed=1.0, grid=grid)
    with pytest.raises(simlab.SimulationError, match="no fixed step is stable for Wave with Euler"):
        simlab.simulate(
            wave, jnp.zeros((2, 16, 16)), jnp.array([0.0, 1.0]), solver="euler", adaptive=False
        )
    assert model.max_stable_step(dfx.Kvaerno5(), y0) is None  # implicit: no limit


def test_dt0_none_picks_a_stable_step_and_implicit_solver_takes_large_steps():
    grid = _line(32, boundary="neumann", extent=1.0)
    (x,) = grid.coordinates()
    model = Heat(diffusivity=1.0, grid=grid)
    y0 = jnp.cos(np.pi * x)
    ts = jnp.array([0.0, 0.1])
    h = grid.spacing[0]
    exact = np.exp(-(2 - 2 * np.cos(np.pi * h)) / h**2 * 0.1) * np.cos(np.pi * x)
    explicit = simlab.simulate(model, y0, ts, solver="heun", adaptive=False)
    assert int(explicit.stats["num_steps"]) >= 0.1 / model.max_stable_step(dfx.Heun(), y0)
    np.testing.assert_allclose(explicit.ys[-1], exact, atol=1e-4)
    # Ten times the explicit limit, with matrix-free Newton-GMRES: stable, and as accurate
    # as implicit Euler's first-order error, t lambda^2 dt / 2 exp(-lambda t) ~ 9e-3, allows.
    solver = simlab.models.implicit_solver("implicit_euler", rtol=1e-8, atol=1e-10)
    implicit = simlab.simulate(model, y0, ts, solver=solver, adaptive=False, dt0=0.005)
    assert 0.005 > 10 * model.max_stable_step(dfx.Heun(), y0)
    np.testing.assert_allclose(implicit.ys[-1], exact, atol=1.2e-2)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda g: Heat(diffusivity=-1.0, grid=g), "'diffusivity' must be finite and lie in"),
        (lambda g: Heat(diffusivity=jnp.ones(3), grid=g), r"diffusivity must have shape \(\)"),
        (lambda g: Heat(diffusivity=1.0, grid=g, order=3), r"order must be one of \(2, 4\)"),
        (lambda g: Heat(diffusivity=jnp.ones((8, 6)), grid=g, order=4), "order=4 needs a scalar"),
        (lambda g: Heat(diffusivity=1.0, grid=g, impl="cuda"), "impl must be one of"),
        (lambda g: Heat(diffusivity=float("nan"), grid=g), "must be finite"),
        (
            lambda g: AdvectionDiffusion(diffusivity=0.1, velocity=jnp.ones(3), grid=g),
            r"velocity must have shape \(2,\) or \(2, 8, 6\)",
        ),
        (
            lambda g: AdvectionDiffusion(
                diffusivity=0.1, velocity=jnp.ones(2), grid=g, scheme="weno"
            ),
            "scheme must be one of",
        ),
        (lambda g: Wave(wave_speed=-1.0, grid=g), "'wave_speed' must be finite and lie in"),
        (lambda g: Burgers(viscosity=jnp.ones((8, 6)), grid=g), r"viscosity must have shape"),
        (
            lambda g: GrayScott(
                feed_rate=-0.1, kill_rate=0.06, diffusivity_u=0.2, diffusivity_v=0.1, grid=g
            ),
            "'feed_rate' must be finite",
        ),
    ],
)
def test_models_reject_bad_parameters(build, message):
    with pytest.raises(ValueError, match=message):
        build(simlab.Grid((8, 6)))


def test_models_reject_a_non_grid_and_wrong_state_shapes():
    with pytest.raises(TypeError, match="grid must be a simlab.Grid"), without_type_checks():
        Heat(diffusivity=1.0, grid=(8, 8))
    grid = simlab.Grid((8, 6))
    model = GrayScott(
        feed_rate=0.03, kill_rate=0.06, diffusivity_u=0.2, diffusivity_v=0.1, grid=grid
    )
    assert model.state_shape == (2, 8, 6)
    assert Burgers(viscosity=0.1, grid=grid).state_shape == (2, 8, 6)
    with pytest.raises(ValueError, match=r"y0 has shape \(8, 6\), but GrayScott has state shape"):
        simlab.simulate(model, jnp.ones((8, 6)), jnp.array([0.0, 1.0]))
