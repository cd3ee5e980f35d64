"""The Taylor–Green experiment: run by the `simlab` command, its stored vorticity decays at
the exact rate; the flow's initial field and figure kinds are refused where they do not fit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
import simlab.experiment as experiments
from simlab import cli
from simlab.experiment import ExperimentError
from simlab.grid import kinetic_energy

HEAT = {
    "model": {
        "name": "Heat",
        "parameters": {"diffusivity": 0.1},
        "grid": {"shape": [8, 8], "extent": 1.0},
    },
    "initial_state": {"field": "gaussian"},
    "time": {"start": 0.0, "stop": 1.0, "num_points": 3},
}


def test_taylor_green_experiment_decays_at_the_exact_rate(tmp_path):
    out = tmp_path / "run"
    assert cli.main(["run", "taylor_green_decay", "--quick", "--quiet", "--out", str(out)]) == 0
    stored = experiments._folder.read_run(out)
    ts, ys = stored.arrays["simulation_ts"], stored.arrays["simulation_ys"]
    viscosity = stored.config["model"]["parameters"]["viscosity"]
    grid = simlab.Grid(tuple(ys.shape[1:]), extent=2 * np.pi)
    # Peak speed 1 on the 2π square: E(0) = 1/4, and E(t) = E(0) exp(-2ν|k|²t), |k|² = 2.
    energies = np.asarray(kinetic_energy(ys, grid))
    np.testing.assert_allclose(energies, 0.25 * np.exp(-4 * viscosity * ts), rtol=1e-12)
    assert energies[-1] < 0.7 * energies[0]  # it did decay
    exact = [simlab.models.taylor_green_vorticity(grid, time=t, viscosity=viscosity) for t in ts]
    np.testing.assert_allclose(ys, np.asarray(exact), atol=1e-13)
    figures = {path.name for path in (out / "figures").iterdir()}
    assert figures == {
        f"{name}.{suffix}"
        for name in ("flow_snapshots", "energy_enstrophy")
        for suffix in ("png", "svg")
    }


def test_flow_fields_and_figures_are_refused_for_other_models(tmp_path):
    path = tmp_path / "heat.toml"
    vortex = {**HEAT, "initial_state": {"field": "taylor_green"}}
    with pytest.raises(ExperimentError, match="'taylor_green' is a vorticity field for Navier"):
        experiments.parse(vortex, path)
    for kind in ("flow_snapshots", "energy_enstrophy"):
        drawn = {**HEAT, "figures": [{"kind": kind}]}
        with pytest.raises(ExperimentError, match=f"'{kind}' is a figure for two-dimensional"):
            experiments.parse(drawn, path)


def _quick_run(name, tmp_path):
    experiment = experiments.load(experiments.find(name), quick=True)
    folder = experiments.run(experiment, out=tmp_path / "run", quiet=True)
    figures = {path.name for path in (folder / "figures").iterdir()}
    assert figures == {
        f"{f.name}.{suffix}"
        for f in experiment.figures
        for suffix in (("gif",) if f.kind == "animation" else ("png", "svg"))
    }
    return experiment, experiments._folder.read_run(folder)


def _budget_residual(ts, energies, losses):
    """E(t) - E(0) + ∫ losses dt (Simpson's rule), relative to E(0)."""
    from scipy.integrate import cumulative_simpson

    integrated = cumulative_simpson(losses, x=ts, initial=0.0)
    return np.max(np.abs(energies - energies[0] + integrated)) / energies[0]


@pytest.mark.slow
def test_decaying_turbulence_experiment_keeps_the_energy_budget(tmp_path):
    experiment, stored = _quick_run("decaying_turbulence", tmp_path)
    ts, ys = stored.arrays["simulation_ts"], stored.arrays["simulation_ys"]
    grid, viscosity = experiment.model.grid, float(experiment.model.viscosity)
    energies = np.asarray(kinetic_energy(ys, grid))
    enstrophies = np.asarray(simlab.grid.enstrophy(ys, grid))
    # The random start has the energy asked for; unforced, dE/dt = -2 nu Z, and Z never
    # grows in two dimensions (dZ/dt = -2 nu P).
    assert energies[0] == pytest.approx(0.5, rel=1e-12)
    assert _budget_residual(ts, energies, 2 * viscosity * enstrophies) < 1e-5
    assert np.all(np.diff(enstrophies) < 0) and energies[-1] < 0.9 * energies[0]


def test_kolmogorov_flow_experiment_keeps_the_forced_energy_budget(tmp_path):
    experiment, stored = _quick_run("kolmogorov_flow", tmp_path)
    model = experiment.model
    ts, ys = stored.arrays["simulation_ts"], stored.arrays["simulation_ys"]
    grid = model.grid
    laminar = np.asarray(simlab.models.kolmogorov_laminar_vorticity(model))
    disturbance = ys[0] - laminar
    assert float(kinetic_energy(disturbance, grid)) == pytest.approx(0.01, rel=1e-12)
    # dE/dt = <u . F> - 2 nu Z - 2 alpha E with F = chi sin(n y) x-hat.
    _, y = grid.mesh()
    u = np.asarray(jax.vmap(lambda w: simlab.grid.velocity(w, grid))(jnp.asarray(ys)))[:, 0]
    work = float(model.forcing_amplitude) * np.mean(
        u * np.sin(model.forcing_wavenumber * np.asarray(y)), axis=(1, 2)
    )
    energies = np.asarray(kinetic_energy(ys, grid))
    losses = 2 * float(model.viscosity) * np.asarray(simlab.grid.enstrophy(ys, grid))
    losses = losses + 2 * float(model.drag) * energies - work
    assert _budget_residual(ts, energies, losses) < 1e-5
    # At this Reynolds number the disturbance decays back to the laminar state.
    assert np.max(np.abs(ys[-1] - laminar)) < np.max(np.abs(disturbance))


def test_lid_driven_cavity_experiment_matches_ghia(tmp_path):
    with pytest.warns(UserWarning, match=r"cell Reynolds number .* is 3.12, above 2"):
        experiment, stored = _quick_run("lid_driven_cavity", tmp_path)
    model, ys = experiment.model, stored.arrays["simulation_ys"]
    assert model.grid.shape == (32, 32) and float(model.viscosity) == pytest.approx(0.01)
    divergence = np.max(np.abs(np.asarray(jax.vmap(model.divergence)(ys))))
    assert divergence < 1e-12 * np.max(np.abs(ys)) * 32
    # Steady by t = 20 on 32² cells: within 5e-3 of Ghia et al.'s Table I (their accuracy).
    y, u = model.centreline_profile(jnp.asarray(ys[-1]))
    ghia_y, ghia_u = simlab.datasets.ghia_cavity_centreline(100)
    assert np.max(np.abs(np.interp(ghia_y, np.asarray(y), np.asarray(u)) - ghia_u)) < 5e-3


def test_preset_settings_and_walled_figures_are_checked(tmp_path):
    path = tmp_path / "cavity.toml"
    cavity = {
        "model": {"name": "WalledNavierStokes2D", "preset": "lid_driven_cavity", "num_cells": 8},
        "time": {"start": 0.0, "stop": 1.0, "num_points": 2},
        "figures": [{"kind": "centreline"}, {"kind": "walled_flow_field"}],
    }
    assert experiments.parse(cavity, path).y0.shape == (2, 8, 8)
    misspelt = {**cavity, "model": {**cavity["model"], "num_cell": 8}}
    with pytest.raises(ExperimentError, match=r"\[model.num_cell\] is not a known key.*reynolds"):
        experiments.parse(misspelt, path)
    too_few = {**cavity, "model": {**cavity["model"], "num_cells": 2}}
    with pytest.raises(ExperimentError, match="lid_driven_cavity refused.*at least 4"):
        experiments.parse(too_few, path)
    for kind in ("centreline", "walled_flow_field"):
        drawn = {**HEAT, "figures": [{"kind": kind}]}
        with pytest.raises(ExperimentError, match=f"'{kind}' is a figure for flows with walls"):
            experiments.parse(drawn, path)


def test_random_vorticity_fields_are_refused_where_they_do_not_fit(tmp_path):
    path = tmp_path / "bad.toml"
    with pytest.raises(ExperimentError, match="'random_vorticity' is a vorticity field"):
        experiments.parse({**HEAT, "initial_state": {"field": "random_vorticity"}}, path)
    peaked = {**HEAT, "initial_state": {"field": "gaussian", "peak_wavenumber": 3.0}}
    with pytest.raises(ExperimentError, match="peak_wavenumber.*'random_vorticity'"):
        experiments.parse(peaked, path)
