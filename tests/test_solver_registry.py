"""Every solver family is reachable from `simulate` by name, and records what ran."""

import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab.integrate import ETDRK4


def test_etdrk4_by_name_equals_the_solver_called_directly():
    grid = simlab.Grid((32,), extent=32 * jnp.pi)
    (x,) = grid.coordinates()
    model = simlab.models.KuramotoSivashinsky(grid=grid)
    ts, y0 = jnp.linspace(0.0, 2.0, 3), jnp.cos(x / 16)
    trajectory = simlab.simulate(model, y0, ts, solver="etdrk4", adaptive=False, dt0=0.25)
    direct, _, _ = ETDRK4().solve(model, ts, y0, None, dt0=0.25, max_steps=100)
    assert (trajectory.solver, trajectory.integrator) == ("etdrk4", "exponential")
    np.testing.assert_array_equal(trajectory.ys, direct)


def test_kencarp_by_name_is_imex_and_decays_a_mode_at_the_discrete_rate():
    grid = simlab.Grid((32,), extent=1.0, boundary="periodic")
    (x,) = grid.coordinates()
    diffusivity, h = 0.01, 1.0 / 32
    model = simlab.models.Heat(diffusivity=diffusivity, grid=grid)
    trajectory = simlab.simulate(
        model,
        jnp.sin(2 * jnp.pi * x),
        jnp.array([0.0, 1.0]),
        solver="kencarp4",
        rtol=1e-9,
        atol=1e-12,
    )
    # The 3-point Laplacian's eigenvalue for this mode: -(2 - 2 cos(2 pi h)) / h^2.
    rate = diffusivity * (2 - 2 * np.cos(2 * np.pi * h)) / h**2
    exact = np.exp(-rate) * np.sin(2 * np.pi * np.asarray(x))
    assert (trajectory.solver, trajectory.integrator) == ("kencarp4", "imex")
    np.testing.assert_allclose(trajectory.ys[-1], exact, atol=1e-7)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(solver="rodas5p", integrator="lean"), "runs on simlab's stiff integrator"),
        (dict(solver="etdrk4"), "no error estimate for adaptive steps"),
    ],
)
def test_solvers_refuse_integrators_and_modes_they_cannot_run(settings, message):
    model = simlab.models.Robertson()
    with pytest.raises(ValueError, match=message):
        simlab.simulate(model, jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 1.0]), **settings)
