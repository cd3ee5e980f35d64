"""IMEX KenCarp solves of split models: orders 3/4/5, the declared splits of the grid models,
walls, gradients, and refusals."""

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab._results import RESULTS
from simlab.integrate import imex_solve
from simlab.integrate._split import check_linear_part, check_linear_symbol
from simlab.models import (
    AbstractSplitGridModel,
    AdvectionDiffusion,
    Burgers,
    GrayScott,
    Heat,
    KuramotoSivashinsky,
)


def _burgers():
    grid = simlab.Grid((32,), extent=2 * np.pi)
    (x,) = grid.coordinates()
    return Burgers(viscosity=0.1, grid=grid, scheme="central"), jnp.sin(x) + 0.5


@pytest.mark.parametrize(("method", "order"), [("kencarp3", 3), ("kencarp4", 4), ("kencarp5", 5)])
def test_kencarp_converges_at_its_order_on_viscous_burgers(method, order):
    model, y0 = _burgers()
    ts = jnp.array([0.0, 1.0])
    reference = simlab.simulate(model, y0, ts, solver="dopri8", rtol=1e-13, atol=1e-13).ys[-1]
    steps = np.array([0.1, 0.05, 0.025])
    errors = []
    for dt0 in steps:
        ys, result, _ = imex_solve(
            model, ts, y0, None, solver=method, rtol=1e-12, atol=1e-12, dt0=dt0,
            max_steps=100, adaptive=False,
        )  # fmt: skip
        assert result == RESULTS.successful
        errors.append(float(jnp.max(jnp.abs(ys[-1] - reference))))
    slope, _ = np.polyfit(np.log(steps), np.log(errors), 1)
    assert abs(slope - order) < 0.3


def _split_models():
    line, plane = simlab.Grid((16,), extent=1.0), simlab.Grid((12, 10), extent=(1.0, 2.0))
    walls = simlab.Grid(
        (12, 10), extent=1.0, boundary=[simlab.Neumann(0.3), (simlab.Dirichlet(1.0), "dirichlet")]
    )
    field = jnp.linspace(0.5, 1.5, 16)
    return [
        (Heat(diffusivity=0.2, grid=plane), (12, 10)),
        (Heat(diffusivity=0.2, grid=line, order=4), (16,)),
        (Heat(diffusivity=field, grid=line), (16,)),
        (AdvectionDiffusion(diffusivity=0.1, velocity=jnp.array([0.3, -0.2]), grid=walls), None),
        (Burgers(viscosity=0.05, grid=line), (16,)),
        (Burgers(viscosity=0.05, grid=plane, scheme="central"), (2, 12, 10)),
        (
            GrayScott(
                feed_rate=0.03, kill_rate=0.06, diffusivity_u=0.2, diffusivity_v=0.1, grid=plane
            ),
            (2, 12, 10),
        ),
    ]


@pytest.mark.parametrize(("model", "_"), _split_models())
def test_declared_splits_add_up_to_the_vector_field(model, _):
    assert isinstance(model, AbstractSplitGridModel)
    y = jnp.asarray(np.random.default_rng(0).uniform(0.1, 1.0, model.state_shape))
    check_linear_part(model, 0.0, y, None)  # linear even with nonzero wall values
    np.testing.assert_allclose(
        model.linear(0.0, y, None) + model.nonlinear(0.0, y, None), model(0.0, y, None), atol=1e-12
    )


def test_symbols_of_the_stencils_are_their_fourier_multipliers():
    for model, shape in _split_models():
        periodic = all(model.grid.is_periodic)
        if not periodic or jnp.ndim(getattr(model, "diffusivity", 0.0)) != 0:
            continue
        check_linear_symbol(model, 0.0, jnp.zeros(shape), None)  # raises on a mismatch
    # The 5-point Laplacian's symbol at mode (1, 2) of a 12 x 10 grid, worked out by hand.
    heat = _split_models()[0][0]
    (hx, hy), symbol = heat.grid.spacing, heat.linear_symbol()
    expected = 0.2 * (
        (2 * np.cos(2 * np.pi / 12) - 2) / hx**2 + (2 * np.cos(4 * np.pi / 10) - 2) / hy**2
    )
    np.testing.assert_allclose(symbol[1, 2], expected, rtol=1e-12)


def test_imex_gray_scott_between_walls_matches_the_explicit_solution():
    grid = simlab.Grid((20, 20), spacing=1.0, boundary="neumann")
    model = GrayScott(
        feed_rate=0.035, kill_rate=0.065, diffusivity_u=0.2, diffusivity_v=0.1, grid=grid
    )
    y0 = jnp.stack([jnp.ones(grid.shape), jnp.zeros(grid.shape)])
    y0 = y0.at[:, 3:9, 5:11].set(jnp.array([0.5, 0.25])[:, None, None])
    ts = jnp.array([0.0, 50.0, 100.0])
    reference = simlab.simulate(model, y0, ts, solver="tsit5", rtol=1e-10, atol=1e-12).ys
    ys, result, stats = imex_solve(
        model, ts, y0, None, solver="kencarp4", rtol=1e-7, atol=1e-9, max_steps=1000
    )
    assert result == RESULTS.successful
    assert int(stats["num_accepted_steps"]) < 200
    np.testing.assert_allclose(ys, reference, atol=1e-5)


def test_imex_heat_relaxes_to_the_exact_line_between_dirichlet_and_robin_walls():
    # u'' = 0, u(0) = 1, u(1) + 2 u'(1) = 0.5: u = 1 - x / 6. The wall values make the
    # stencil affine; its constant joins the explicit part.
    walls = (simlab.Dirichlet(1.0), simlab.Robin(1.0, 2.0, 0.5))
    grid = simlab.Grid((32,), extent=1.0, boundary=walls)
    (x,) = grid.coordinates()
    model = Heat(diffusivity=1.0, grid=grid)
    ys, result, stats = imex_solve(
        model, jnp.array([0.0, 1.0, 10.0]), jnp.zeros(32), None, solver="kencarp4", rtol=1e-7,
        atol=1e-9, max_steps=1000,
    )  # fmt: skip
    assert result == RESULTS.successful
    assert int(stats["num_accepted_steps"]) < 300  # forward Euler would need 2 x 10^4
    np.testing.assert_allclose(ys[-1], 1 - x / 6, atol=1e-7)


def test_gradient_through_imex_matches_finite_differences():
    model, y0 = _burgers()
    ts = jnp.array([0.0, 0.5])

    def loss(viscosity):
        burgers = Burgers(viscosity=viscosity, grid=model.grid, scheme="central")
        ys, _, _ = imex_solve(
            burgers, ts, y0, None, solver="kencarp3", rtol=1e-11, atol=1e-11, dt0=0.05,
            max_steps=20, adaptive=False,
        )  # fmt: skip
        return jnp.sum(ys[-1] ** 2)

    value = jnp.asarray(0.1)
    step = 1e-5
    central = (loss(value + step) - loss(value - step)) / (2 * step)
    np.testing.assert_allclose(jax.grad(loss)(value), central, rtol=1e-5)


def test_imex_refuses_other_solvers_and_unsplit_models():
    model = KuramotoSivashinsky(grid=simlab.Grid((16,), extent=10.0))
    ts, y0 = jnp.array([0.0, 1.0]), jnp.zeros(16)
    with pytest.raises(ValueError, match="IMEX method must be one of"):
        imex_solve(model, ts, y0, None, solver="kencarp9", rtol=1e-6, atol=1e-8, max_steps=10)
    with pytest.raises(ValueError, match="runs Diffrax's KenCarp3/4/5"):
        imex_solve(model, ts, y0, None, solver=dfx.Tsit5(), rtol=1e-6, atol=1e-8, max_steps=10)
    with pytest.raises(ValueError, match="needs a step: pass dt0"):
        imex_solve(model, ts, y0, None, rtol=1e-6, atol=1e-8, max_steps=10, adaptive=False)
    wave = simlab.models.Wave(wave_speed=1.0, grid=simlab.Grid((16,)))
    assert not isinstance(wave, AbstractSplitGridModel)
    with pytest.raises(ValueError, match="Wave declares no split"):
        imex_solve(wave, ts, jnp.zeros((2, 16)), None, rtol=1e-6, atol=1e-8, max_steps=10)
