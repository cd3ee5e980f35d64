"""Figures of Hamiltonian trajectories: the plotted data are the computed quantities, the
Poincaré crossings lie on the section and the energy surface, bad options are refused."""

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pytest

import simlab
import simlab.plot
from simlab.plot._hamiltonian import section_crossings

RNG = np.random.default_rng(0)


def _trajectory(ys, ts=None):
    ys = np.asarray(ys)
    ts = np.linspace(0.0, 1.0, len(ys)) if ts is None else ts
    return simlab.Trajectory(ts=ts, ys=ys, result=simlab.RESULTS.successful, stats={})


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_orbits_draw_each_body_in_the_chosen_plane_from_its_start(tmp_path):
    model = simlab.models.NBody(
        masses=jnp.array([1.0, 1e-3, 1e-4]), dimension=3, names=("star", "inner", "outer")
    )
    ys = RNG.normal(size=(5, 18))
    ax = simlab.plot.orbits(model, _trajectory(ys), plane=(0, 2), length_unit="AU")
    paths, starts = ax.lines[0::2], ax.lines[1::2]
    assert [line.get_label() for line in paths] == ["star", "inner", "outer"]
    outer = ys[:, 6:9]  # the third body's (x, y, z)
    np.testing.assert_array_equal(paths[2].get_xdata(), outer[:, 0])
    np.testing.assert_array_equal(paths[2].get_ydata(), outer[:, 2])
    np.testing.assert_array_equal(starts[2].get_xydata(), outer[:1, [0, 2]])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("x (AU)", "z (AU)")
    ax.figure.savefig(tmp_path / "orbits.png")
    assert (tmp_path / "orbits.png").stat().st_size > 10_000


def test_orbits_of_a_single_point_take_the_models_name():
    ys = RNG.normal(size=(4, 4))
    ax = simlab.plot.orbits(simlab.models.Kepler(), _trajectory(ys))
    assert ax.lines[0].get_label() == "Kepler"
    np.testing.assert_array_equal(ax.lines[0].get_xydata(), ys[:, :2])


@pytest.mark.parametrize(
    ("model", "options", "message"),
    [
        (simlab.models.FPUTChain(num_masses=8), {}, "8 position coordinates"),
        (simlab.models.Kepler(), {"plane": (0, 2)}, "two different axes of"),
        (simlab.models.Kepler(), {"plane": (1, 1)}, "two different axes of"),
    ],
)
def test_orbits_refuse_what_is_not_a_body_in_a_plane(model, options, message):
    ys = np.zeros((3, len(model.state_names)))
    with pytest.raises(ValueError, match=message):
        simlab.plot.orbits(model, _trajectory(ys), **options)


def test_energy_error_lines_are_the_relative_energy_error_of_each_run():
    model = simlab.models.Kepler()
    runs = {
        "near": _trajectory(np.array([[0.5, 0.0, 0.0, 1.0]] * 4) + 1e-3 * RNG.normal(size=(4, 4))),
        "far": _trajectory(np.array([[0.5, 0.0, 0.0, 1.0]] * 4) + 1e-1 * RNG.normal(size=(4, 4))),
    }
    ax = simlab.plot.energy_error(model, runs, xscale="linear", time_label="time (years)")
    for line, (label, run) in zip(ax.lines, runs.items(), strict=True):
        energy = np.asarray(model.energy(jnp.asarray(run.ys)))
        assert line.get_label() == label
        np.testing.assert_allclose(line.get_ydata(), np.abs(energy / energy[0] - 1), rtol=1e-12)
    assert (ax.get_xscale(), ax.get_yscale(), ax.get_xlabel()) == ("linear", "log", "time (years)")


def test_the_energy_error_envelope_is_the_largest_error_so_far():
    model = simlab.models.Pendulum(length=1.0)
    run = _trajectory(np.stack([np.array([1.0, 0.0]) + 0.1 * np.sin(k) for k in range(6)]))
    line = simlab.plot.energy_error(model, run, envelope=True).lines[0]
    error = simlab.plot._hamiltonian.relative_energy_error(model, run)
    np.testing.assert_array_equal(line.get_ydata(), np.maximum.accumulate(error))
    assert np.any(np.diff(error) < 0) and np.all(np.diff(line.get_ydata()) >= 0)


def test_energy_error_refuses_a_zero_start_energy_and_an_unknown_scale():
    model = simlab.models.Kepler()
    with pytest.raises(ValueError, match="xscale must be one of"):
        simlab.plot.energy_error(model, _trajectory(np.ones((2, 4))), xscale="loglog")
    zero = _trajectory(np.array([[2.0, 0.0, 0.0, 1.0]] * 2))  # H = 1/2 - 1/2 = 0
    with pytest.raises(ValueError, match="zero energy"):
        simlab.plot.energy_error(model, zero)


def test_poincare_crossings_lie_on_the_section_and_the_energy_surface(tmp_path):
    model = simlab.models.HenonHeiles()
    starts = jnp.array([[0.0, 0.1, 0.45, 0.0], [0.0, -0.2, 0.4, 0.05]])
    ts = jnp.arange(0.0, 80.0, 0.1)
    batch = jax.vmap(
        lambda y0: simlab.simulate(model, y0, ts, solver="forest_ruth", adaptive=False, dt0=0.02)
    )(starts)
    orbits = [_trajectory(ys, ts) for ys in batch.ys]
    ax = simlab.plot.poincare_section(model, batch)
    for orbit, points in zip(orbits, ax.lines, strict=True):
        crossings = section_crossings(model, orbit.ts, orbit.ys)
        assert len(crossings) >= 8
        np.testing.assert_allclose(crossings[:, 0], 0.0, atol=1e-12)
        assert np.all(crossings[:, 2] > 0)
        energy = np.asarray(model.energy(jnp.asarray(crossings)))
        np.testing.assert_allclose(
            energy, float(model.energy(jnp.asarray(orbit.ys[0]))), rtol=0, atol=1e-6
        )
        np.testing.assert_array_equal(points.get_xydata(), crossings[:, [1, 3]])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("y", "py")
    ax.figure.savefig(tmp_path / "section.png")
    assert (tmp_path / "section.png").stat().st_size > 10_000


def test_poincare_section_needs_two_degrees_of_freedom():
    model = simlab.models.Pendulum(length=1.0)
    with pytest.raises(ValueError, match="two degrees of freedom"):
        simlab.plot.poincare_section(model, _trajectory(np.zeros((3, 2))))


def test_mode_energy_lines_are_the_chains_mode_energies():
    chain = simlab.models.FPUTChain(num_masses=6, alpha=0.25)
    run = _trajectory(RNG.normal(size=(5, 12)))
    ax = simlab.plot.mode_energies(chain, run, modes=3, yscale="log")
    energies = np.asarray(chain.mode_energies(jnp.asarray(run.ys)))
    assert len(ax.lines) == 3
    for k, line in enumerate(ax.lines):
        np.testing.assert_allclose(line.get_ydata(), energies[:, k], rtol=1e-12)
    assert ax.get_yscale() == "log"


@pytest.mark.parametrize(
    ("model", "options", "message"),
    [
        (simlab.models.FPUTChain(num_masses=6), {"modes": 7}, "between 1 and 6"),
        (simlab.models.FPUTChain(num_masses=6), {"yscale": "symlog"}, "yscale must be one of"),
        (simlab.models.Kepler(), {}, "Kepler has none"),
    ],
)
def test_mode_energies_refuse_bad_options(model, options, message):
    run = _trajectory(np.zeros((3, len(model.state_names))))
    with pytest.raises(ValueError, match=message):
        simlab.plot.mode_energies(model, run, **options)
