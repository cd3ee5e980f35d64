"""The Taylor–Green experiment: run by the `simlab` command, its stored vorticity decays at
the exact rate; the flow's initial field and figure kinds are refused where they do not fit."""

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
