"""Wall values as parameters: time-dependent Dirichlet by a manufactured solution, equality
with static conditions, gradients with respect to wall values, refusals."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab.models import BoundaryDriven, Heat


def test_time_dependent_dirichlet_matches_a_manufactured_solution_at_second_order():
    # u = 1 + t + (x² - x) / (2D) solves u_t = D u_xx with u(0, t) = u(1, t) = 1 + t.
    diffusivity, end = 0.5, 0.5
    errors, sizes = [], (16, 32)
    for size in sizes:
        grid = simlab.Grid((size,), extent=1.0, boundary="dirichlet")
        (x,) = grid.coordinates()
        wall = jnp.array([1.0, 1.0 + end])  # linear in t: interpolation is exact
        model = BoundaryDriven(
            Heat(diffusivity=diffusivity, grid=grid),
            values=jnp.stack([wall, wall]),
            sides=((0, "low"), (0, "high")),
            times=(0.0, end),
        )
        exact = lambda t, x=x: 1 + t + (x**2 - x) / (2 * diffusivity)  # noqa: E731
        trajectory = simlab.simulate(
            model, exact(0.0), jnp.array([0.0, end]), solver="rk4", adaptive=False, dt0=1e-4,
            max_steps=10_000,
        )  # fmt: skip
        errors.append(float(jnp.max(jnp.abs(trajectory.ys[-1] - exact(end)))))
    slope, _ = np.polyfit(np.log(sizes), np.log(errors), 1)
    assert errors[-1] < 1e-3 and abs(-slope - 2) < 0.3


@pytest.mark.parametrize(
    ("driven", "fixed"),
    [
        (simlab.Dirichlet(0.0), simlab.Dirichlet(0.7)),
        (simlab.Neumann(0.0), simlab.Neumann(0.7)),
        (simlab.Robin(1.0, 0.5), simlab.Robin(1.0, 0.5, 0.7)),
    ],
)
def test_constant_driven_values_equal_the_static_conditions(driven, fixed):
    line = lambda low: simlab.Grid((24, 8), extent=1.0, boundary=[(low, "neumann"), "periodic"])  # noqa: E731
    y = jnp.asarray(np.random.default_rng(0).standard_normal((24, 8)))
    model = BoundaryDriven(
        Heat(diffusivity=0.3, grid=line(driven)), values=jnp.array([0.7]), sides=((0, "low"),)
    )
    reference = Heat(diffusivity=0.3, grid=line(fixed))
    np.testing.assert_allclose(model(0.0, y, None), reference(0.0, y, None), atol=1e-12)


def test_gradient_with_respect_to_wall_values_matches_finite_differences():
    grid = simlab.Grid((16,), extent=1.0, boundary=("dirichlet", simlab.Robin(1.0, 1.0)))
    ts = jnp.array([0.0, 0.2])

    def loss(values):
        model = BoundaryDriven(
            Heat(diffusivity=0.2, grid=grid), values=values, sides=((0, "low"), (0, "high")),
            times=(0.0, 0.2),
        )  # fmt: skip
        trajectory = simlab.simulate(
            model, jnp.zeros(16), ts, solver="rk4", adaptive=False, dt0=5e-3
        )
        return jnp.sum(trajectory.ys[-1] ** 2)

    values = jnp.array([[0.2, 1.0], [0.5, -0.3]])
    gradient = jax.grad(loss)(values)
    step = 1e-6
    for index in np.ndindex(values.shape):
        bump = jnp.zeros_like(values).at[index].set(step)
        central = (loss(values + bump) - loss(values - bump)) / (2 * step)
        np.testing.assert_allclose(gradient[index], central, rtol=1e-6, atol=1e-10)


def test_bad_driven_boundaries_are_refused():
    walls = simlab.Grid((8,), extent=1.0, boundary="dirichlet")
    heat = Heat(diffusivity=1.0, grid=walls)
    with pytest.raises(ValueError, match="Periodic side has no value to drive"):
        BoundaryDriven(
            Heat(diffusivity=1.0, grid=simlab.Grid((8,))), values=jnp.zeros(1), sides=((0, "low"),)
        )
    with pytest.raises((TypeError, ValueError), match="AbstractGridModel"):
        lorenz = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)
        BoundaryDriven(lorenz, values=jnp.zeros(1), sides=((0, "low"),))
    with pytest.raises(ValueError, match=r"values must have shape \(1, 3\)"):
        BoundaryDriven(heat, values=jnp.zeros(1), sides=((0, "low"),), times=(0.0, 1.0, 2.0))
    with pytest.raises(ValueError, match="strictly increasing"):
        BoundaryDriven(heat, values=jnp.zeros((1, 2)), sides=((0, "low"),), times=(1.0, 0.0))
    with pytest.raises(ValueError, match="axis, 'low' | 'high'"):
        BoundaryDriven(heat, values=jnp.zeros(1), sides=((1, "low"),))


def test_fit_recovers_a_wall_temperature_history_from_interior_sensors():
    grid = simlab.Grid((16,), extent=1.0, boundary=("dirichlet", "neumann"))
    knots, sensors, noise = (0.0, 0.5, 1.0), np.array([2, 7]), 2e-3
    ts = jnp.linspace(0.0, 1.0, 21)
    options = dict(solver="rk4", adaptive=False, dt0=0.01)

    def rod(wall):
        heat = Heat(diffusivity=0.2, grid=grid)
        return BoundaryDriven(
            heat, values=jnp.asarray(wall)[None], sides=((0, "low"),), times=knots
        )

    def observe(y):
        return y[sensors]

    truth = np.array([0.2, 1.0, 0.5])
    clean = jax.vmap(observe)(simlab.simulate(rod(truth), jnp.zeros(16), ts, **options).ys)
    data = clean + noise * np.random.default_rng(1).standard_normal(clean.shape)
    result = simlab.fit(
        rod(np.full(3, 0.5)), ts, data, y0=jnp.zeros(16), params=["values"], observe=observe,
        noise_scale=noise, simulate_options=options,
    )  # fmt: skip
    fitted, stderr = result.params["values"][0], result.stderr["values"][0]
    assert bool(result.converged)
    assert np.all(np.abs(fitted - truth) < 4 * stderr)
    assert np.all(stderr < 0.05)


def test_static_wall_values_are_array_leaves_that_gradients_reach():
    # Every value of a Dirichlet, Neumann and Robin side is a leaf of the model: the
    # gradient of a solution with respect to it matches central differences in float64.
    def grid_with(values):
        low, flux, robin = values
        return simlab.Grid(
            (10, 6),
            extent=1.0,
            boundary=[
                (simlab.Dirichlet(low), simlab.Robin(1.0, 0.5, robin)),
                (simlab.Neumann(flux), "neumann"),
            ],
        )

    ts = jnp.array([0.0, 0.05])
    y0 = jnp.asarray(np.random.default_rng(2).uniform(0.0, 1.0, (10, 6)))

    def loss(model):
        trajectory = simlab.simulate(model, y0, ts, solver="rk4", adaptive=False, dt0=2.5e-3)
        return jnp.sum(trajectory.ys[-1] ** 2)

    values = np.array([0.7, -0.4, 0.3])
    model = Heat(diffusivity=0.2, grid=grid_with(values))
    leaves = jax.tree_util.tree_leaves(eqx.filter(model.grid, eqx.is_inexact_array))
    assert len(leaves) == 4  # low, robin, flux and the zero flux of the last side
    gradient = eqx.filter_grad(loss)(model).grid.boundaries
    analytic = [gradient[0][0].value, gradient[1][0].normal_derivative, gradient[0][1].value]
    step = 1e-6
    for index, derivative in enumerate(analytic):
        bump = np.zeros(3)
        bump[index] = step
        plus = loss(Heat(diffusivity=0.2, grid=grid_with(values + bump)))
        minus = loss(Heat(diffusivity=0.2, grid=grid_with(values - bump)))
        np.testing.assert_allclose(derivative, (plus - minus) / (2 * step), rtol=1e-6)


@pytest.mark.slow
def test_fit_recovers_both_wall_temperatures_of_a_rod_from_interior_sensors():
    truth, noise = np.array([0.3, 1.2]), 2e-3
    ts = jnp.linspace(0.0, 0.5, 11)
    options = dict(solver="rk4", adaptive=False, dt0=0.01)
    sensors = np.array([1, 4, 8, 11, 14])

    def rod(walls):
        boundary = (simlab.Dirichlet(walls[0]), simlab.Dirichlet(walls[1]))
        return Heat(diffusivity=0.2, grid=simlab.Grid((16,), extent=1.0, boundary=boundary))

    def observe(y):
        return y[sensors]

    clean = jax.vmap(observe)(simlab.simulate(rod(truth), jnp.zeros(16), ts, **options).ys)
    data = clean + noise * np.random.default_rng(3).standard_normal(clean.shape)
    result = simlab.fit(
        rod(np.array([0.5, 0.5])), ts, data, y0=jnp.zeros(16), params=["grid"],
        observe=observe, noise_scale=noise, simulate_options=options,
    )  # fmt: skip
    low, high = result.params["grid"].boundaries[0]
    assert bool(result.converged)
    np.testing.assert_allclose([low.value, high.value], truth, atol=1e-2)
