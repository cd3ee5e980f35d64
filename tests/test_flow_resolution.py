"""Grids too coarse for the flow: the spectral model's dissipation wavenumber against its
exact value for the Taylor-Green vortex and the warning exactly where k_max falls below it;
the walled model's cell Reynolds number and its warning; walls refused by the spectral
model, naming the walled one."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab.integrate import ETDRK4, SOLVERS
from simlab.models import NavierStokes2D, WalledNavierStokes2D

GRID = simlab.Grid((16, 16), extent=2 * np.pi)  # 2/3 dealiasing keeps |k| <= 5
VORTEX = simlab.models.taylor_green_vorticity(GRID)  # 2 sin x sin y: palinstrophy 1


def _simulate(model, y0):
    return simlab.simulate(
        model, y0, jnp.array([0.0, 0.2]), solver="etdrk4", adaptive=False, dt0=0.1
    )


def test_dissipation_wavenumber_of_taylor_green_is_exact():
    # P = <|grad w|^2>/2 = 1 for w = 2 sin x sin y, so k_eta = (2 P / nu^2)^(1/6).
    for viscosity in (0.005, 0.02, 0.3):
        model = NavierStokes2D(grid=GRID, viscosity=viscosity)
        expected = (2 / viscosity**2) ** (1 / 6)
        assert float(model.dissipation_wavenumber(VORTEX)) == pytest.approx(expected, rel=1e-13)
    assert float(NavierStokes2D(grid=GRID, viscosity=0.0).dissipation_wavenumber(VORTEX)) == (
        np.inf
    )


def test_spectral_grid_too_coarse_warns_with_the_estimate():
    # k_eta = (2 / 0.005^2)^(1/6) = 6.56 > k_max = 5: under-resolved, by 0.76.
    coarse = NavierStokes2D(grid=GRID, viscosity=0.005)
    with pytest.warns(
        UserWarning, match=r"k_max = 5 is below .* = 6.56 .* k_max·eta = 0.76"
    ) as caught:
        trajectory = _simulate(coarse, VORTEX)
    assert bool(trajectory.succeeded)  # a warning: the run goes on
    assert caught[0].filename == __file__  # it points at the call, not into simlab
    # k_eta = 4.13 < 5, and an inviscid flow has no dissipation scale: no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _simulate(NavierStokes2D(grid=GRID, viscosity=0.02), VORTEX)
        _simulate(NavierStokes2D(grid=GRID, viscosity=0.0), VORTEX)
        # Traced (jit): nothing to check at trace time, and nothing breaks.
        jax.jit(lambda w: coarse.max_stable_step(ETDRK4(), w))(VORTEX)


def test_cell_reynolds_number_of_the_cavity_and_its_warning():
    rk4 = SOLVERS["rk4"].build()
    for cells, reynolds in ((16, 100.0), (64, 100.0), (16, 10.0)):
        model, y0 = WalledNavierStokes2D.lid_driven_cavity(cells, reynolds)
        # The lid moves at 1 with nu = 1/Re: U h / nu = Re / n.
        expected = reynolds / cells
        assert float(model.cell_reynolds_number(y0)) == pytest.approx(expected, rel=1e-13)
    model, y0 = WalledNavierStokes2D.lid_driven_cavity(16, 100.0)
    with pytest.warns(UserWarning, match=r"is 6.25, above 2.*about \(50, 16\) cells"):
        model.max_stable_step(rk4, y0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model, y0 = WalledNavierStokes2D.lid_driven_cavity(64, 100.0)
        model.max_stable_step(rk4, y0)
        # A channel at rest has no speed yet: cell Reynolds number 0.
        channel, at_rest = WalledNavierStokes2D.channel()
        assert float(channel.cell_reynolds_number(at_rest)) == 0.0
        channel.max_stable_step(rk4, at_rest)


@pytest.mark.parametrize("boundary", ["dirichlet", ["periodic", "dirichlet"]])
def test_walls_are_refused_by_the_spectral_model(boundary):
    grid = simlab.Grid((16, 16), extent=1.0, boundary=boundary)
    with pytest.raises(ValueError, match="periodic grid on both axes.*WalledNavierStokes2D"):
        NavierStokes2D(grid=grid)
