"""Hamiltonian experiments: a library preset or a normal mode as the initial state, integer
model settings, the figure kinds of Hamiltonian runs and the shipped files that use them."""

import pathlib

import jax.numpy as jnp
import numpy as np
import pytest

import simlab
import simlab.experiment as experiments
from simlab import cli
from simlab.experiment import ExperimentError, _figures

CHAIN = {
    "model": {"name": "FPUTChain", "num_masses": 8, "parameters": {"alpha": 0.25}},
    "initial_state": {"mode": 2, "amplitude": 1.5},
    "time": {"start": 0.0, "stop": 10.0, "num_points": 11},
    "solver": {"name": "verlet", "adaptive": False, "dt0": 0.1},
    "figures": [{"kind": "mode_energies", "modes": 3}],
}
PLANETS = {
    "model": {"name": "NBody", "preset": "outer_solar_system"},
    "time": {"start": 0.0, "stop": 1000.0, "num_points": 11},
    "solver": {"name": "verlet", "adaptive": False, "dt0": 100.0},
    "figures": [{"kind": "orbits"}, {"kind": "energy_error"}],
}


def _changed(config: dict, table: str, **changes) -> dict:
    """`config` with keys of one table changed (`None` removes one)."""
    changed = {
        key: dict(value) if isinstance(value, dict) else value for key, value in config.items()
    }
    target = changed.setdefault(table, {})
    for key, value in changes.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return changed


def _run(name: str, out: pathlib.Path) -> experiments.StoredRun:
    assert cli.main(["run", name, "--quick", "--quiet", "--out", str(out)]) == 0
    return experiments._folder.read_run(out)


def test_a_preset_gives_the_model_and_its_initial_state(tmp_path):
    experiment = experiments.parse(PLANETS, tmp_path / "planets.toml")
    model, y0 = simlab.models.NBody.outer_solar_system()
    np.testing.assert_array_equal(experiment.y0, y0)
    np.testing.assert_array_equal(experiment.model.masses, model.masses)
    assert experiment.model.names == model.names
    heavier = _changed(PLANETS, "model", parameters={"G": 3e-4})
    assert float(experiments.parse(heavier, tmp_path / "g.toml").model.G) == 3e-4


def test_a_chain_starts_at_rest_in_the_chosen_normal_mode(tmp_path):
    experiment = experiments.parse(CHAIN, tmp_path / "chain.toml")
    chain = experiment.model
    assert chain.num_masses == 8
    energies = np.asarray(chain.mode_energies(jnp.asarray(experiment.y0)))
    expected = np.zeros(8)
    expected[1] = 0.5 * (1.5 * float(chain.mode_frequencies()[1])) ** 2
    np.testing.assert_allclose(energies, expected, atol=1e-12)


BAD = [
    (_changed(PLANETS, "model", preset="inner_solar_system"),
     r"\[model.preset\] is 'inner_solar_system'; use one of \['outer_solar_system'\]"),
    (_changed(PLANETS, "model", name="Kepler"), r"\[model.preset\] Kepler has no presets"),
    (_changed(PLANETS, "initial_state", x=1.0),
     r"\[initial_state\] model.preset gives the initial state; remove \[initial_state\]"),
    (_changed(PLANETS, "model", dimension=2), r"\[model.dimension\] is not a known key"),
    (_changed(PLANETS, "model", parameters={"G": -1.0}),
     r"\[model.parameters.G\] is -1.0, outside its valid range"),
    (_changed(CHAIN, "model", num_masses=None), r"\[model.num_masses\] is missing"),
    (_changed(CHAIN, "model", num_masses=0), r"\[model.num_masses\] must be an integer >= 1"),
    (_changed(CHAIN, "initial_state", mode=9), r"\[initial_state.mode\] is 9; FPUTChain has 8"),
    (_changed(CHAIN, "initial_state", amplitude=None), r"\[initial_state.amplitude\] is missing"),
    ({**CHAIN, "figures": [{"kind": "mode_energies", "modes": 9}]},
     r"\[figures\[0\].modes\] is 9; the chain has 8 modes"),
    ({**CHAIN, "figures": [{"kind": "poincare_section"}]},
     r"\[figures\[0\].kind\] a Poincaré section needs two degrees of freedom"),
    ({**PLANETS, "figures": [{"kind": "mode_energies"}]},
     r"\[figures\[0\].kind\] NBody has no normal modes"),
    ({**CHAIN, "figures": [{"kind": "orbits"}]},
     r"\[figures\[0\].kind\] orbits draws bodies in the plane or in space"),
    ({**_changed(CHAIN, "model", name="LotkaVolterra", num_masses=None,
                 parameters={"alpha": 1.0, "beta": 0.1, "gamma": 1.0, "delta": 0.1}),
      "initial_state": {"prey": 1.0, "predator": 1.0}, "figures": [{"kind": "energy_error"}]},
     r"\[figures\[0\].kind\] 'energy_error' is a figure for Hamiltonian models, not LotkaVolterra"),
]  # fmt: skip


@pytest.mark.parametrize(("config", "message"), BAD)
def test_bad_hamiltonian_experiments_are_refused_with_key_and_fix(tmp_path, config, message):
    with pytest.raises(ExperimentError, match=message):
        experiments.parse(config, tmp_path / "bad.toml")


def test_outer_solar_system_runs_and_plots_its_energy_error(tmp_path):
    stored = _run("outer_solar_system", tmp_path / "run")
    assert {path.name for path in (tmp_path / "run" / "figures").iterdir()} == {
        f"{name}.{suffix}" for name in ("orbits", "energy_error") for suffix in ("png", "svg")
    }
    model, y0 = simlab.models.NBody.outer_solar_system()
    ys = stored.arrays["simulation_ys"]
    np.testing.assert_array_equal(ys[0], y0)
    energy = np.asarray(model.energy(jnp.asarray(ys)))
    error = np.abs(energy - energy[0]) / abs(energy[0])
    assert error.max() < 1e-6  # fourth order, 100-day steps
    figure = _figures._energy_error(stored, {})
    line = figure.axes[0].lines[0]
    assert line.get_label() == "mclachlan4, dt = 100"
    np.testing.assert_allclose(line.get_ydata(), error, rtol=1e-12)


def test_fput_recurrence_runs_and_plots_the_mode_energies(tmp_path):
    stored = _run("fput_recurrence", tmp_path / "run")
    assert {path.name for path in (tmp_path / "run" / "figures").iterdir()} == {
        f"{name}.{suffix}"
        for name in ("mode_energies", "energy_error")
        for suffix in ("png", "svg")
    }
    chain = simlab.models.FPUTChain(num_masses=32, alpha=0.25)
    energies = np.asarray(chain.mode_energies(jnp.asarray(stored.arrays["simulation_ys"])))
    assert energies[0, 0] == pytest.approx(energies[0].sum())  # all in mode 1 at the start
    draw = _figures._model_and_path("mode_energies", "modes")
    figure = draw(stored, stored.config["figures"][0])
    lines = figure.axes[0].lines
    assert len(lines) == 4
    for k, line in enumerate(lines):
        np.testing.assert_allclose(line.get_ydata(), energies[:, k], rtol=1e-12)
