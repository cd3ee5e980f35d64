"""The Kuramoto–Sivashinsky experiment: its file runs by ETDRK4 at fixed steps, agrees with a
four-times finer solve, keeps the mean of u, and draws a space-time figure; bad solver and
figure settings are refused."""

import tomllib

import jax.numpy as jnp
import numpy as np
import pytest

import simlab
import simlab.experiment as experiments
from simlab.experiment import ExperimentError
from simlab.integrate import ETDRK4


def test_kuramoto_sivashinsky_runs_by_etdrk4_and_draws_a_space_time_figure(tmp_path):
    experiment = experiments.load(experiments.find("kuramoto_sivashinsky"), quick=True)
    assert experiment.solver == {
        "solver": "etdrk4", "adaptive": False, "dt0": 0.25, "max_steps": 100000
    }  # fmt: skip
    grid = experiment.model.grid
    x = np.asarray(grid.coordinates()[0])
    np.testing.assert_allclose(experiment.y0, np.cos(x / 16) * (1 + np.sin(x / 16)), atol=1e-12)
    folder = experiments.run(experiment, out=tmp_path / "run", quiet=True)
    stored = experiments._folder.read_run(folder)
    ts, ys = stored.arrays["simulation_ts"], stored.arrays["simulation_ys"]
    assert ys.shape == (41, 64) and np.all(np.isfinite(ys))
    # The nonlinearity subtracts its mean, so the mean of u (zero here) never moves.
    np.testing.assert_allclose(ys.mean(axis=1), 0.0, atol=1e-10)
    # Fourth order: a solve with steps four times smaller agrees to well below the field's size.
    fine, _, _ = ETDRK4().solve(
        experiment.model, jnp.asarray(ts), jnp.asarray(experiment.y0), None, dt0=0.0625,
        max_steps=1000,
    )  # fmt: skip
    assert float(np.max(np.abs(ys - np.asarray(fine)))) < 1e-3 * float(np.max(np.abs(ys)))
    assert float(np.max(np.abs(ys[-1]))) > 1.0  # grown out of the start into chaos
    figures = {path.name for path in (folder / "figures").iterdir()}
    assert figures == {"space_time.png", "space_time.svg"}


def _config(**overrides):
    with experiments.find("kuramoto_sivashinsky").open("rb") as handle:
        config = tomllib.load(handle)
    config.pop("quick")
    config.update(overrides)
    return config


def test_fixed_steps_need_a_step_and_space_time_needs_a_line(tmp_path):
    path = tmp_path / "ks.toml"
    no_step = _config(solver={"name": "etdrk4", "adaptive": False})
    with pytest.raises(ExperimentError, match="solver.dt0.*adaptive = false takes fixed steps"):
        experiments.parse(no_step, path)
    with pytest.raises(ExperimentError, match="solver.dt0"):
        experiments.parse(_config(solver={"name": "etdrk4", "dt0": -1.0}), path)
    plane = _config(
        model={
            "name": "Heat",
            "parameters": {"diffusivity": 0.1},
            "grid": {"shape": [8, 8], "extent": 1.0},
        },
        initial_state={"field": "gaussian"},
        solver={},
    )
    with pytest.raises(ExperimentError, match="'space_time' draws 1-D fields"):
        experiments.parse(plane, path)


def test_space_time_plot_puts_cells_across_and_times_up():
    grid = simlab.Grid((12,), extent=3.0)
    ts = np.linspace(0.0, 1.0, 5)
    ys = np.exp(-ts[:, None]) * np.sin(2 * np.pi * np.asarray(grid.coordinates()[0]) / 3)[None]
    trajectory = simlab.Trajectory(ts=ts, ys=ys, result=simlab.RESULTS.successful, stats={})
    ax = simlab.plot.space_time(trajectory, grid, label="u")
    image = ax.collections[0]
    np.testing.assert_allclose(np.asarray(image.get_array()).reshape(ys.shape), ys)
    np.testing.assert_allclose(ax.get_xlim(), (0.0, 3.0))  # cell faces, in grid coordinates
    np.testing.assert_allclose(ax.get_ylim(), (-0.125, 1.125))
    with pytest.raises(ValueError, match="grid of shape"):
        simlab.plot.space_time(trajectory, simlab.Grid((10,)))
    with pytest.raises(ValueError, match="not both"):
        simlab.plot.space_time(trajectory, grid, coordinates=np.arange(12.0))
