"""Experiments: every shipped file validates; a reduced version of each runs end to end and
its numbers make physical sense; results folders appear whole or not at all."""

import json
import math
import pathlib
import tomllib

import jax
import numpy as np
import pytest

import simlab.experiment as experiments
from simlab.experiment import ExperimentError, _figures
from simlab.experiment._folder import StoredRun, to_toml
from simlab.experiment._run import Outcome

SHIPPED = (
    "boehm_petab",
    "decaying_turbulence",
    "fput_recurrence",
    "gray_scott_patterns",
    "heat_inverse",
    "kolmogorov_flow",
    "kramers_escape",
    "kuramoto_sivashinsky",
    "lid_driven_cavity",
    "lynx_hare",
    "outer_solar_system",
    "pendulum_sweep",
    "rlc_overshoot",
    "sir_sensitivity",
    "taylor_green_decay",
)


def _figure_files(folder: pathlib.Path) -> set[str]:
    return {path.name for path in (folder / "figures").iterdir()}


def _check_folder(folder: pathlib.Path, experiment) -> experiments.StoredRun:
    """The files every run writes, and nothing half-written next to it."""
    assert {"config.toml", "metrics.json", "provenance.json", "arrays.npz", "figures"} <= {
        path.name for path in folder.iterdir()
    }
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]
    stored = experiments._folder.read_run(folder)
    assert stored.config == experiment.config
    origin = stored.provenance
    assert origin["jax_version"] == jax.__version__ and origin["simlab_version"]
    assert origin["quick"] is True and origin["devices"]
    expected = set()
    for figure in experiment.figures:
        suffixes = ("gif",) if figure.kind == "animation" else ("png", "svg")
        expected |= {f"{figure.name}.{suffix}" for suffix in suffixes}
    assert _figure_files(folder) == expected
    return stored


def test_shipped_experiments_are_found():
    assert tuple(experiments.shipped()) == SHIPPED
    assert experiments.find("lynx_hare") == experiments.shipped()["lynx_hare"]


@pytest.mark.parametrize("quick", [False, True])
@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_experiment_validates(name, quick):
    experiment = experiments.load(experiments.find(name), quick=quick)
    assert experiment.name == name and experiment.description and experiment.figures
    assert experiment.y0.shape == experiment.model.state_shape
    # The resolved config survives its own TOML writer unchanged.
    assert tomllib.loads(to_toml(experiment.config)) == experiment.config


def test_lynx_hare_fit_sweep_and_figures(tmp_path, monkeypatch):
    experiment = experiments.load(experiments.find("lynx_hare"), quick=True)
    folder = experiments.run(experiment, out=tmp_path / "run", quiet=True)
    stored = _check_folder(folder, experiment)
    fit = stored.metrics["fit"]
    assert fit["converged"]
    for name in ("alpha", "beta", "gamma", "delta"):
        value, stderr = fit["parameters"][name]["value"], fit["parameters"][name]["stderr"]
        assert 0 < stderr < value  # identified, and positive as the model requires
    # The loss recorded per step never rises above the starting loss.
    history = stored.arrays["fit_loss_history"]
    assert history[-1] <= history[0] and math.isclose(history[-1], fit["loss"], rel_tol=1e-6)
    # The sweep is centred on the fit: the middle alpha, at the fitted gamma's nearest value,
    # repeats the fitted simulation, so its peak equals the simulation's peak.
    sweep = experiments.load_sweep(stored)
    alpha = sweep.parameter("alpha")
    centre = np.isclose(alpha, fit["parameters"]["alpha"]["value"])
    assert centre.sum() == 2 and sweep.num_failed == 0
    assert np.isclose(np.median(alpha), fit["parameters"]["alpha"]["value"])
    # The prediction's band is the delta-method standard error: positive everywhere.
    assert np.all(stored.arrays["fit_prediction_stderr"] > 0)
    text = experiments.show(folder)
    assert "alpha" in text and "±" in text and "converged" in text and "sweep" in text

    # Redrawing reads the stored arrays only: computing anything would fail here.
    monkeypatch.setattr(experiments, "compute", _no_compute)
    for path in (folder / "figures").iterdir():
        path.unlink()
    written = experiments.redraw(folder)
    assert {path.name for path in written} == _figure_files(folder)


def _no_compute(*args, **kwargs):
    raise AssertionError("redraw must not recompute")


def test_pendulum_sweep_phase_diagram(tmp_path):
    experiment = experiments.load(experiments.find("pendulum_sweep"), quick=True)
    devices = jax.devices()[:2]
    folder = experiments.run(experiment, out=tmp_path / "run", devices=devices, quiet=True)
    stored = _check_folder(folder, experiment)
    assert len(stored.provenance["devices"]) == len(devices)
    sweep = experiments.load_sweep(stored)
    kick = sweep.parameter("angular_velocity")
    final_angle = sweep.observables["final_angle"]
    assert sweep.num_failed == 0
    # Energy: a kick below 2 sqrt(g / L) cannot carry the pendulum over the top.
    below = kick < 2 * math.sqrt(9.81 / 1.0)
    assert np.all(np.abs(final_angle[below]) < math.pi)
    # A strong kick with light damping goes over the top at least once.
    assert final_angle[np.argmax(kick)] > 2 * math.pi


def test_gray_scott_patterns_gallery_and_animation(tmp_path):
    experiment = experiments.load(experiments.find("gray_scott_patterns"), quick=True)
    folder = experiments.run(experiment, out=tmp_path / "run", quiet=True)
    stored = _check_folder(folder, experiment)
    sweep = experiments.load_sweep(stored)
    fields = sweep.observables["final_field"]
    assert fields.shape == (4, 2, 16, 16) and np.all(np.isfinite(fields))
    # Concentrations stay non-negative (the reaction terms vanish at u = 0 and at v = 0).
    assert fields.min() > -1e-3
    assert stored.arrays["simulation_ys"].shape == (5, 2, 16, 16)


def test_heat_inverse_recovers_the_true_diffusivity(tmp_path):
    experiment = experiments.load(experiments.find("heat_inverse"), quick=True)
    folder = experiments.run(experiment, out=tmp_path / "run", quiet=True)
    stored = _check_folder(folder, experiment)
    truth = stored.metrics["true_parameters"]["diffusivity"]
    fitted = stored.metrics["fit"]["parameters"]["diffusivity"]
    assert truth != experiment.model.diffusivity  # the fit starts away from the truth
    assert abs(fitted["value"] - truth) < 3 * fitted["stderr"]
    assert fitted["stderr"] < 0.1 * truth
    assert "(true 0.01)" in experiments.show(folder)


# -- results folders -------------------------------------------------------------------------

SMALL = {
    "description": "a small test experiment",
    "model": {"name": "LotkaVolterra",
              "parameters": {"alpha": 0.5, "beta": 0.02, "gamma": 0.8, "delta": 0.02}},
    "initial_state": {"prey": 30.0, "predator": 4.0},
    "time": {"stop": 1.0, "num_points": 3},
}  # fmt: skip


def _small_outcome(*args, **kwargs):
    ts = np.linspace(0.0, 1.0, 3)
    return Outcome(
        arrays={"simulation_ts": ts, "simulation_ys": np.ones((3, 2))},
        metrics={"experiment": "small", "wall_seconds": {}},
    )


def _fail(*args, **kwargs):
    raise RuntimeError("the solver broke")


def test_a_failed_run_leaves_no_folder(tmp_path, monkeypatch):
    experiment = experiments.parse(SMALL, tmp_path / "small.toml")
    monkeypatch.setattr(experiments, "compute", _fail)
    with pytest.raises(RuntimeError, match="the solver broke"):
        experiments.run(experiment, out=tmp_path / "out" / "run", quiet=True)
    assert list((tmp_path / "out").iterdir()) == []


def test_default_folders_never_clobber(tmp_path, monkeypatch):
    experiment = experiments.parse(SMALL, tmp_path / "small.toml")
    monkeypatch.setattr(experiments, "compute", _small_outcome)
    first = experiments.run(experiment, results_root=tmp_path, quiet=True)
    second = experiments.run(experiment, results_root=tmp_path, quiet=True)
    assert first != second and first.parent == second.parent == tmp_path / "small"
    assert json.loads((second / "metrics.json").read_text())["wall_seconds"]["total"] >= 0


def test_out_holding_a_run_needs_overwrite(tmp_path, monkeypatch):
    experiment = experiments.parse(SMALL, tmp_path / "small.toml")
    monkeypatch.setattr(experiments, "compute", _small_outcome)
    target = experiments.run(experiment, out=tmp_path / "run", quiet=True)
    (target / "old-note.txt").write_text("from the first run")
    monkeypatch.setattr(experiments, "compute", _fail)  # refused before any work
    with pytest.raises(ExperimentError, match=r"already holds another run; pass --overwrite"):
        experiments.run(experiment, out=target, quiet=True)
    monkeypatch.setattr(experiments, "compute", _small_outcome)
    experiments.run(experiment, out=target, overwrite=True, quiet=True)
    assert not (target / "old-note.txt").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_folder_that_is_not_a_run_is_never_replaced(tmp_path):
    experiment = experiments.parse(SMALL, tmp_path / "small.toml")
    (tmp_path / "thesis").mkdir()
    (tmp_path / "thesis" / "chapter1.tex").write_text("precious")
    with pytest.raises(ExperimentError, match="is not a simlab run, so it is never replaced"):
        experiments.run(experiment, out=tmp_path / "thesis", overwrite=True, quiet=True)
    with pytest.raises(ExperimentError, match="not a finished simlab run"):
        experiments.show(tmp_path / "thesis")


# -- validation: every message names the file, the key and the fix ---------------------------


def _with(**changes):
    config = json.loads(json.dumps(SMALL))
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        table = config
        for key in parents:
            table = table.setdefault(key, {})
        if value is None:
            del table[last]
        else:
            table[last] = value
    return config


BAD_CONFIGS = [
    (_with(model__name="Wolf"), r"\[model.name\] unknown model 'Wolf'; use one of"),
    (_with(model__parameters__omega=1.0), r"\[model.parameters.omega\] LotkaVolterra has no "
     r"parameter 'omega'; its parameters are \['alpha'"),
    (_with(model__parameters__alpha=None), r"\[model.parameters.alpha\] is missing"),
    (_with(model__parameters__alpha="fast"), r"\[model.parameters.alpha\] must be a number"),
    (_with(model__parameters__beta=-1.0), r"\[model.parameters.beta\] is -1.0, outside its "
     r"valid range \[0, inf\)"),
    (_with(initial_state__prey=None), r"\[initial_state.prey\] is missing"),
    (_with(initial_state__wolves=3.0), r"\[initial_state.wolves\] is not a known key"),
    (_with(time__stop=-1.0), r"\[time.stop\] must be greater than time.start"),
    (_with(time__num_points=1.5), r"\[time.num_points\] must be an integer >= 2"),
    (_with(time=None), r"\[time\] is missing; add a \[time\] table"),
    (_with(solver__name="rk45"), r"\[solver.name\] is 'rk45'; use one of"),
    (_with(colour="blue"), r"\[colour\] is not a known key"),
    (_with(fit__parameters=["alpha"]), r"\[fit\] needs data to fit; add a \[data\] table"),
    (_with(data__dataset="lynx_hare", fit__parameters=["omega"]),
     r"\[fit.parameters\] names 'omega'"),
    (_with(data__dataset="mauna_loa"), r"\[data.dataset\] is 'mauna_loa'; use one of"),
    (_with(data__dataset="lynx_hare", data__csv="x.csv"), r"\[data\] needs exactly one of"),
    (_with(data__csv="missing.csv"), r"\[data.csv\] no such file"),
    (_with(sweep__parameters={"omega": {"start": 0.1, "stop": 1.0, "num": 3}}),
     r"\[sweep.parameters.omega\] cannot be varied"),
    (_with(sweep__parameters={"alpha": {"start": -1.0, "stop": 1.0, "num": 3}}),
     r"\[sweep.parameters.alpha\] reaches outside alpha's valid range"),
    (_with(sweep__parameters={"alpha": {"relative_span": 0.2, "num": 3}}, sweep__around_fit=True),
     r"\[sweep.around_fit\] needs a \[fit\] table"),
    (_with(sweep__parameters={"alpha": {"values": [0.1]}}, sweep__observable="period"),
     r"\[sweep.observable\] is 'period'; use one of"),
    (_with(figures=[{"kind": "sweep_heatmap", "variable": "prey_peak"}]),
     r"\[figures\[0\].kind\] 'sweep_heatmap' needs a \[sweep\] table"),
    (_with(figures=[{"kind": "field"}]), r"\[figures\[0\].kind\] 'field' is a figure for grid"),
    (_with(figures=[{"kind": "histogram"}]), r"\[figures\[0\].kind\] is 'histogram'"),
    (_with(sweep__parameters={"alpha": {"values": [0.1, 0.2]}},
           figures=[{"kind": "sweep_lines", "variable": "prey_peak"}]),
     r"\[figures\[0\].variable\] is 'prey_peak'; use one of \['final_prey', 'final_predator'\]"),
    (_with(model__grid={"shape": [8], "extent": 1.0}), r"\[model.grid\] LotkaVolterra is not "
     r"a grid model"),
    (_with(figures=[{"kind": "phase_portrait", "label": "prey"}]),
     r"\[figures\[0\].label\] is not a known key; the keys allowed here are \['kind', 'name', "
     r"'title', 'xlabel', 'ylabel'\]"),
    (_with(figures=[{"kind": "loss", "channel": 0}]), r"\[figures\[0\].channel\] is not a known"),
    (_with(figures=[{"kind": "phase_portrait", "xlabel": 3}]),
     r"\[figures\[0\].xlabel\] must be a string; got 3"),
    (_with(figures=[{"name": "a"}]), r"\[figures\[0\].kind\] is missing"),
    (_with(figures={"kind": "fit"}), r"\[figures\] must be an array of tables"),
    (_with(figures=[{"kind": "phase_portrait"}, {"kind": "phase_portrait"}]),
     r"\[figures\[1\].name\] 'phase_portrait' is used twice"),
]  # fmt: skip

UNSAFE_NAMES = ["/tmp/escape", "../../escape", "figures/escape", "a\\b", ".hidden", "", "C:x",
                "two words", "ünïcode", "x\n"]  # fmt: skip


@pytest.mark.parametrize(("config", "message"), BAD_CONFIGS)
def test_bad_experiments_are_refused_with_key_and_fix(tmp_path, config, message):
    path = tmp_path / "bad.toml"
    with pytest.raises(ExperimentError, match=message) as caught:
        experiments.parse(config, path)
    assert str(caught.value).startswith(f"{path}: [")


@pytest.mark.parametrize("name", UNSAFE_NAMES)
def test_figure_names_are_plain_file_stems(tmp_path, name):
    """A name becomes a file in figures/: one that could leave the folder is refused."""
    config = _with(figures=[{"kind": "phase_portrait", "name": name}])
    with pytest.raises(ExperimentError, match=r"\[figures\[0\].name\] is .*; a name becomes"):
        experiments.parse(config, tmp_path / "names.toml")


def test_safe_figure_names_are_kept(tmp_path):
    names = ["portrait", "Portrait_2", "fig-3.v1", "_draft"]
    config = _with(figures=[{"kind": "phase_portrait", "name": name} for name in names])
    experiment = experiments.parse(config, tmp_path / "names.toml")
    assert [figure.name for figure in experiment.figures] == names


def test_plot_checks_an_edited_config(tmp_path, monkeypatch):
    """`redraw` reads config.toml again: a name that escapes, an unknown kind or an option
    the kind does not take is refused before anything is drawn."""
    experiment = experiments.parse(
        _with(figures=[{"kind": "phase_portrait", "name": "portrait"}]), tmp_path / "small.toml"
    )
    monkeypatch.setattr(experiments, "compute", _small_outcome)
    folder = experiments.run(experiment, out=tmp_path / "run", quiet=True)
    assert _figure_files(folder) == {"portrait.png", "portrait.svg"}
    edits = [
        ({"name": str(tmp_path / "escape")}, r"\[figures\[0\].name\] is '/.*escape'"),
        ({"name": "../../escape"}, r"\[figures\[0\].name\] is '../../escape'; a name becomes"),
        ({"kind": "histogram"}, r"\[figures\[0\].kind\] is 'histogram'; use one of \['fit', "),
        ({"ylabel": "predators", "label": "x"}, r"\[figures\[0\].label\] is not a known key"),
    ]
    for edit, message in edits:
        config = {**experiment.config, "figures": [{"kind": "phase_portrait", **edit}]}
        (folder / "config.toml").write_text(to_toml(config))
        with pytest.raises(ExperimentError, match=message) as caught:
            experiments.redraw(folder)
        assert str(caught.value).startswith(f"{folder / 'config.toml'}: [figures[0].")
    assert sorted(p.name for p in tmp_path.rglob("*escape*")) == []
    assert _figure_files(folder) == {"portrait.png", "portrait.svg"}


def _stored(tmp_path, **arrays) -> StoredRun:
    rates = {"alpha": 0.5, "beta": 0.02, "gamma": 0.8, "delta": 0.02}
    config = {"model": {"name": "LotkaVolterra", "parameters": rates}}
    return StoredRun(tmp_path, config, metrics={}, provenance={}, arrays=arrays)


def test_phase_portrait_and_loss_take_their_axis_labels(tmp_path):
    ts = np.linspace(0.0, 1.0, 5)
    run = _stored(tmp_path, simulation_ts=ts, simulation_ys=np.stack([ts, ts**2], axis=1),
                  fit_loss_history=np.array([4.0, 1.0, 0.25]))  # fmt: skip
    labels = {"xlabel": "hares (thousands)", "ylabel": "lynx (thousands)"}
    portrait = ("prey (population)", "predator (population)")  # the model's state_units
    for drawer, default in ((_figures._phase_portrait, portrait),
                            (_figures._loss, ("optimiser step", "loss"))):  # fmt: skip
        (ax,) = drawer(run, labels).axes
        assert (ax.get_xlabel(), ax.get_ylabel()) == tuple(labels.values())
        (ax,) = drawer(run, {}).axes
        assert (ax.get_xlabel(), ax.get_ylabel()) == default


def test_every_option_a_figure_kind_takes_has_its_type_checked():
    typed = {"kind", "name", *_figures.STRING_OPTIONS, *_figures.INTEGER_OPTIONS}
    for name, kind in _figures.FIGURE_KINDS.items():
        assert kind.name == name and set(kind.options) <= typed


def test_grid_model_settings_are_checked(tmp_path):
    config = {
        "model": {"name": "Heat", "parameters": {"diffusivity": 0.01},
                  "grid": {"shape": [2], "extent": 1.0}},
        "initial_state": {"field": "gaussian"},
        "time": {"stop": 1.0, "num_points": 2},
    }  # fmt: skip
    with pytest.raises(ExperimentError, match=r"\[model.grid.shape\] must be a list of 1-3"):
        experiments.parse(config, tmp_path / "heat.toml")
    config["model"]["grid"]["shape"] = [8]
    config["initial_state"]["field"] = "gray_scott_seed"
    with pytest.raises(ExperimentError, match="'gray_scott_seed' does not suit Heat"):
        experiments.parse(config, tmp_path / "heat.toml")
    # Two channels are not enough: the seed is Gray–Scott's own.
    wave = {**config, "model": {**config["model"], "name": "Wave",
                                "parameters": {"wave_speed": 1.0}}}  # fmt: skip
    with pytest.raises(ExperimentError, match="'gray_scott_seed' does not suit Wave"):
        experiments.parse(wave, tmp_path / "wave.toml")
    config["initial_state"] = {"field": "sine", "amplitude": 2.0}
    experiment = experiments.parse(config, tmp_path / "heat.toml")
    # The slowest Dirichlet mode, sampled at the cell centres.
    xs = (np.arange(8) + 0.5) / 8
    np.testing.assert_allclose(experiment.y0, 2.0 * np.sin(np.pi * xs))


def test_files_that_are_not_experiments(tmp_path):
    with pytest.raises(ExperimentError, match="no such experiment file"):
        experiments.load(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[model\nname = 'LotkaVolterra'\n")
    with pytest.raises(ExperimentError, match=r"broken.toml: not valid TOML \(.*line 1"):
        experiments.load(broken)
    with pytest.raises(ExperimentError, match="the shipped ones are"):
        experiments.find("not_an_experiment")


def test_csv_data_are_parsed_not_executed(tmp_path):
    (tmp_path / "counts.csv").write_text(
        "# field counts\nt,prey,predator\n0,30,4\n1,47.2,6.1\n2,70.2,9.8\n"
    )
    config = _with(data__csv="counts.csv")
    experiment = experiments.parse(config, tmp_path / "counts.toml")
    np.testing.assert_allclose(experiment.data.ts, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(experiment.data.observations[:, 0], [30.0, 47.2, 70.2])
    (tmp_path / "counts.csv").write_text("t,prey,predator\n0,30,4\n1,__import__('os'),6\n")
    with pytest.raises(ExperimentError, match=r"\[data.csv\] .* holds a value that is not a"):
        experiments.parse(config, tmp_path / "counts.toml")
    config = _with(data__csv="counts.csv", data__columns=["prey"], data__time_column="year")
    with pytest.raises(ExperimentError, match=r"\[data.columns\] .* has no column 'year'"):
        experiments.parse(config, tmp_path / "counts.toml")
