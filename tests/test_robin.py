"""Robin boundaries a u + b du/dn = g: an analytic steady state, an analytic decaying mode,
and refusal of ill-posed coefficients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import brentq

import simlab
from simlab.models import Heat


def test_steady_state_between_dirichlet_and_robin_is_the_exact_line():
    # u'' = 0 on [0, 1], u(0) = 1, u(1) + 2 u'(1) = 0.5: u = 1 - x / 6.
    grid = simlab.Grid(
        (40,), extent=1.0, boundary=(simlab.Dirichlet(1.0), simlab.Robin(1.0, 2.0, 0.5))
    )
    model = Heat(diffusivity=1.0, grid=grid)

    def vector_field(u):
        return model(0.0, u, None)

    zero = jnp.zeros(grid.shape)
    jacobian = jax.jacfwd(vector_field)(zero)  # the vector field is affine in u
    steady = jnp.linalg.solve(jacobian, -vector_field(zero))
    (x,) = grid.coordinates()
    np.testing.assert_allclose(steady, 1 - x / 6, atol=1e-12)


def _cooling_mode(length, a, b):
    """The slowest mode cos(kx) of u_t = u_xx with u_x(0) = 0 and a u + b u_x = 0 at x = L:
    a cos(kL) = b k sin(kL), so tan(kL) = a / (b k)."""
    return brentq(
        lambda k: a * np.cos(k * length) - b * k * np.sin(k * length), 1e-9, np.pi / (2 * length)
    )


def test_robin_cooling_mode_decays_at_the_exact_rate_with_second_order_error():
    length, a, b, diffusivity, end = 1.0, 2.0, 1.0, 0.5, 0.4
    k = _cooling_mode(length, a, b)
    errors = []
    sizes = (16, 32)
    for size in sizes:
        grid = simlab.Grid(
            (size,), extent=length, boundary=(simlab.Neumann(0.0), simlab.Robin(a, b))
        )
        (x,) = grid.coordinates()
        model = Heat(diffusivity=diffusivity, grid=grid)
        trajectory = simlab.simulate(
            model, jnp.cos(k * x), jnp.array([0.0, end]), solver="rk4", adaptive=False, dt0=1e-4,
            max_steps=10_000,
        )  # fmt: skip
        exact = np.exp(-diffusivity * k**2 * end) * np.cos(k * x)
        errors.append(float(jnp.max(jnp.abs(trajectory.ys[-1] - exact))))
    slope, _ = np.polyfit(np.log(sizes), np.log(errors), 1)
    assert abs(-slope - 2) < 0.2


def test_robin_reduces_to_dirichlet_and_neumann():
    grid_of = lambda low, high: simlab.Grid((12,), extent=1.0, boundary=(low, high))  # noqa: E731
    u = jnp.asarray(np.random.default_rng(0).standard_normal(12))
    for robin, classic in (
        (simlab.Robin(2.0, 0.0, 3.0), simlab.Dirichlet(1.5)),
        (simlab.Robin(0.0, 4.0, -2.0), simlab.Neumann(-0.5)),
    ):
        for width in (1, 2):
            np.testing.assert_allclose(
                simlab.grid.pad(u, grid_of(robin, robin), width),
                simlab.grid.pad(u, grid_of(classic, classic), width),
                atol=1e-13,
            )


def test_ill_posed_robin_coefficients_are_refused():
    with pytest.raises(ValueError, match="a = b = 0 constrains nothing"):
        simlab.Robin(0.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="must be a finite float"):
        simlab.Robin(1.0, float("nan"))
    # a/2 + b/h = 0 for h = 0.25, a = 1, b = -0.125: the ghost cell is undetermined.
    grid = simlab.Grid((4,), extent=1.0, boundary=simlab.Robin(1.0, -0.125))
    with pytest.raises(ValueError, match="singular on this grid"):
        simlab.grid.laplacian(jnp.ones(4), grid)
