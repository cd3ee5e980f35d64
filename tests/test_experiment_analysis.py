"""Events, sensitivity analysis and continuation from experiment files: checked at --check,
run end to end, stored so that `simlab plot` redraws them, and equal to the library calls."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
import simlab.experiment as experiments
from simlab import cli
from simlab.experiment import ExperimentError
from simlab.experiment._fields import OBSERVABLE_FUNCTIONS, StateEvent

SIR = {
    "description": "a small SIR experiment",
    "model": {"name": "SIR", "parameters": {"beta": 0.3, "gamma": 0.1, "population": 1.0}},
    "initial_state": {"S": 0.99, "I": 0.01, "R": 0.0},
    "time": {"stop": 30.0, "num_points": 4},
    "solver": {"name": "tsit5", "rtol": 1e-10, "atol": 1e-12},
}


def _with(base: dict, **tables) -> dict:
    return json.loads(json.dumps({**base, **tables}))


def _peak_invariant(beta, gamma, s0, i0):
    """The SIR peak from the invariant I + S - (gamma / beta) ln S (N = 1): at the peak
    S = gamma / beta, so I = I0 + S0 - gamma / beta + (gamma / beta) ln(gamma / (beta S0))."""
    threshold = gamma / beta
    return threshold, i0 + s0 - threshold + threshold * np.log(threshold / s0)


# -- the shipped sir_sensitivity experiment ---------------------------------------------------


@pytest.fixture(scope="module")
def sir_run(tmp_path_factory):
    experiment = experiments.load(experiments.find("sir_sensitivity"), quick=True)
    folder = experiments.run(experiment, out=tmp_path_factory.mktemp("sir") / "run", quiet=True)
    return experiment, folder


def test_sir_peaks_follow_the_sir_invariant(sir_run):
    experiment, folder = sir_run
    stored = experiments._folder.read_run(folder)
    sweep = experiments.load_sweep(stored)
    assert sweep.num_failed == 0
    beta, gamma = sweep.parameter("beta"), sweep.parameter("gamma")
    s_peak, i_peak = _peak_invariant(beta, gamma, 0.99, 0.01)
    np.testing.assert_allclose(sweep.observables["event_S"], s_peak, rtol=1e-7)
    np.testing.assert_allclose(sweep.observables["event_I"], i_peak, rtol=1e-7)
    # A faster spread (larger beta at the same gamma) peaks earlier.
    times = sweep.observables["event_time"].reshape(3, 2)
    assert np.all(np.diff(times, axis=0) < 0)
    # The simulation's own event, at beta = 0.3, gamma = 0.1.
    event = stored.metrics["simulation"]["event"]
    s_peak, i_peak = _peak_invariant(0.3, 0.1, 0.99, 0.01)
    assert math.isclose(event["state"]["S"], s_peak, rel_tol=1e-7)
    assert math.isclose(event["state"]["I"], i_peak, rel_tol=1e-7)
    text = experiments.show(folder)
    assert f"event at t = {event['time']:.6g}" in text and "sensitivity (sobol" in text


def test_sensitivity_from_the_file_equals_the_library_call(sir_run):
    experiment, folder = sir_run
    stored = experiments.load_sensitivity(experiments._folder.read_run(folder))
    direct = simlab.sensitivity(
        simlab.models.SIR(beta=0.3, gamma=0.1, population=1.0),
        {"beta": [0.25, 0.5], "gamma": [0.05, 0.15], "I": [1e-4, 1e-2]},
        jnp.array([0.99, 0.01, 0.0]),
        jnp.linspace(0.0, 365.0, 37),
        observable=OBSERVABLE_FUNCTIONS["event"],  # the same functions: one compiled solve
        num_samples=32,
        second_order=False,
        num_resamples=20,
        key=jax.random.key(0),
        event=StateEvent(index=1, threshold=None, direction=-1),  # dI/dt crosses 0 downward
        solver="tsit5",
        rtol=1e-9,
        atol=1e-12,
        progress=False,
    )
    assert stored.attrs["sample_seed"] == direct.attrs["sample_seed"]
    np.testing.assert_array_equal(stored["samples"].values, direct["samples"].values)
    for name in ("event_time", "event_I"):
        for measure in ("S1", "ST", "S1_conf", "ST_conf"):
            np.testing.assert_allclose(
                stored[f"{name}_{measure}"].values, direct[f"{name}_{measure}"].values, rtol=1e-8
            )
    # The peak size depends on R0 = beta / gamma alone (the invariant above, with I(0)
    # small): I(0) hardly matters, while the peak time grows with ln(1 / I(0)).
    assert float(direct["event_I_ST"].sel(parameter="I")) < 0.05
    assert float(direct["event_time_ST"].sel(parameter="I")) > 0.1


def test_sir_figures_are_redrawn_from_the_folder(sir_run, monkeypatch, capsys):
    experiment, folder = sir_run
    names = {path.name for path in (folder / "figures").iterdir()}
    assert names == {f"{f.name}.{s}" for f in experiment.figures for s in ("png", "svg")}
    assert {f.kind for f in experiment.figures} == {"sensitivity", "sweep_heatmap"}

    def no_compute(*args, **kwargs):
        raise AssertionError("plot must not recompute")

    monkeypatch.setattr(experiments, "compute", no_compute)
    monkeypatch.setattr(simlab, "sensitivity", no_compute)
    for path in (folder / "figures").iterdir():
        path.unlink()
    assert cli.main(["plot", str(folder)]) == 0
    assert "redrew 8 file(s)" in capsys.readouterr().out
    assert {path.name for path in (folder / "figures").iterdir()} == names


# -- events from a file: a threshold crossing -------------------------------------------------


def test_threshold_event_sweep_reports_nan_where_it_never_happens(tmp_path):
    """The time the infected fraction falls below half its start. With beta = 0 it decays
    as I0 exp(-gamma t), so t = ln 2 / gamma; with R0 = 6 it is still rising at t = 30."""
    config = _with(
        SIR,
        event={"state": "I", "threshold": 0.005, "direction": "falling"},
        sweep={
            "observable": "event",
            "parameters": {"beta": {"values": [0.0, 0.6]}, "gamma": {"values": [0.1, 0.2]}},
        },
        figures=[{"kind": "sweep_lines", "variable": "event_time"}],
    )
    experiment = experiments.parse(config, tmp_path / "threshold.toml")
    folder = experiments.run(experiment, out=tmp_path / "run", quiet=True)
    sweep = experiments.load_sweep(experiments._folder.read_run(folder))
    times = sweep.observables["event_time"].reshape(2, 2)
    np.testing.assert_allclose(times[0], np.log(2.0) / np.array([0.1, 0.2]), rtol=1e-8)
    np.testing.assert_allclose(sweep.observables["event_I"].reshape(2, 2)[0], 0.005, rtol=1e-8)
    assert np.isnan(times[1, 0])  # R0 = 6: no fall below 0.005 within 30 days
    assert np.all(sweep.status == 0) and sweep.num_failed == 0  # not a failure
    assert (folder / "figures" / "sweep_lines.png").is_file()


# -- continuation ----------------------------------------------------------------------------

BRUSSELATOR = {
    "description": "Hopf point of the Brusselator",
    "model": {"name": "Brusselator", "parameters": {"a": 1.0, "b": 1.5}},
    "initial_state": {"x": 1.0, "y": 1.5},
    "time": {"stop": 1.0, "num_points": 2},
    "continuation": {"parameter": "b", "values": {"start": 1.5, "stop": 2.5, "num": 11},
                     "oscillations": False},
    "figures": [{"kind": "bifurcation", "variable": "y", "title": "Brusselator"}],
}  # fmt: skip


def test_continuation_finds_the_brusselator_hopf_point(tmp_path, monkeypatch):
    """The fixed point (a, b / a) loses stability at b = 1 + a^2 (a Hopf point)."""
    experiment = experiments.parse(BRUSSELATOR, tmp_path / "brusselator.toml")
    folder = experiments.run(experiment, out=tmp_path / "run", quiet=True)
    stored = experiments._folder.read_run(folder)
    branch = experiments.load_branch(stored)
    (hopf,) = branch.bifurcations
    assert hopf.kind == "hopf" and math.isclose(hopf.value, 2.0, rel_tol=1e-6)
    np.testing.assert_allclose(branch.states, np.stack([np.ones(11), branch.values], axis=1))
    assert np.all(branch.is_stable == (branch.values < 2.0))
    assert "hopf at 2" in experiments.show(folder)
    monkeypatch.setattr(experiments, "compute", None)  # redrawing never computes
    (folder / "figures" / "bifurcation.png").unlink()
    assert (folder / "figures" / "bifurcation.png") in experiments.redraw(folder)
    # A folder whose arrays lost part of the branch is refused, naming what is missing.
    kept = {k: v for k, v in stored.arrays.items() if k != "continuation_states"}
    np.savez(folder / "arrays.npz", **kept)
    with pytest.raises(ExperimentError, match=r"arrays.npz: damaged \(no 'continuation_states'"):
        experiments.redraw(folder)


# -- --check: every mistake names the key and the fix -----------------------------------------

SENSITIVITY = {"observable": "final_state", "num_samples": 8,
               "ranges": {"beta": [0.2, 0.4], "gamma": [0.05, 0.15]}}  # fmt: skip
FIGURE = [{"kind": "sensitivity", "variable": "final_I"}]

BAD = [
    (_with(SIR, sensitivity={**SENSITIVITY, "ranges": {"beta": [0.4, 0.2]}}),
     r"\[sensitivity.ranges.beta\] is \[0.4, 0.2\]: lower must be below upper; swap them"),
    (_with(SIR, sensitivity={**SENSITIVITY, "ranges": {"omega": [0.1, 0.2]}}),
     r"\[sensitivity.ranges.omega\] cannot be varied; the choices are \['beta', 'gamma', "
     r"'population', 'S', 'I', 'R'\]"),
    (_with(SIR, sensitivity={**SENSITIVITY, "ranges": {"beta": [-0.1, 0.2]}}),
     r"\[sensitivity.ranges.beta\] reaches outside beta's valid range"),
    (_with(SIR, sensitivity={**SENSITIVITY, "ranges": {"beta": [0.1]}}),
     r"\[sensitivity.ranges.beta\] must be two finite numbers \[lower, upper\]"),
    (_with(SIR, sensitivity={**SENSITIVITY, "ranges": {}}), r"\[sensitivity.ranges\] is empty"),
    (_with(SIR, sensitivity={**SENSITIVITY, "num_samples": 100}),
     r"\[sensitivity\] Sobol' designs need a power of two .* Use 64 or 128"),
    (_with(SIR, sensitivity={**SENSITIVITY, "num_samples": 1}),
     r"\[sensitivity.num_samples\] must be an integer >= 2"),
    (_with(SIR, sensitivity={**SENSITIVITY, "method": "morris", "num_levels": 3}),
     r"\[sensitivity\] Morris designs need an even number of levels"),
    (_with(SIR, sensitivity={**SENSITIVITY, "method": "fast"}),
     r"\[sensitivity.method\] is 'fast'; use one of \['sobol', 'morris'\]"),
    (_with(SIR, sensitivity={**SENSITIVITY, "conf_level": 1.5}),
     r"\[sensitivity\] conf_level must lie strictly between 0 and 1"),
    (_with(SIR, sensitivity={**SENSITIVITY, "observable": "event"}),
     r"\[sensitivity.observable\] is 'event', which needs an \[event\] table"),
    (_with(SIR, sensitivity={**SENSITIVITY, "samples": 8}),
     r"\[sensitivity.samples\] is not a known key"),
    (_with(SIR, figures=FIGURE), r"\[figures\[0\].kind\] 'sensitivity' needs a \[sensitivity\]"),
    (_with(SIR, sensitivity=SENSITIVITY, figures=[{"kind": "sensitivity", "variable": "I_peak"}]),
     r"\[figures\[0\].variable\] is 'I_peak'; use one of \['final_S', 'final_I', 'final_R'\]"),
    (_with(SIR, event={"state": "E", "threshold": 0.1}), r"\[event.state\] is 'E'; use one of"),
    (_with(SIR, event={"state": "I"}), r"\[event\] needs exactly one of threshold = NUMBER"),
    (_with(SIR, event={"state": "I", "threshold": 0.1, "extremum": "maximum"}),
     r"\[event\] needs exactly one of"),
    (_with(SIR, event={"state": "I", "extremum": "peak"}),
     r"\[event.extremum\] is 'peak'; use one of \['maximum', 'minimum'\]"),
    (_with(SIR, event={"state": "I", "extremum": "maximum", "direction": "rising"}),
     r"\[event.direction\] goes with threshold"),
    (_with(SIR, event={"state": "I", "threshold": 0.1, "direction": "down"}),
     r"\[event.direction\] is 'down'; use one of \['rising', 'falling', 'either'\]"),
    (_with(SIR, event={"state": "I", "threshold": 0.1}, solver={"name": "etdrk4"}),
     r"\[event\] .*does not locate events.*solver.name = 'rodas5p'"),
    (_with(SIR, sweep={"observable": "event", "parameters": {"beta": {"values": [0.2]}}}),
     r"\[sweep.observable\] is 'event', which needs an \[event\] table"),
    (_with(BRUSSELATOR, continuation={"parameter": "c", "values": {"start": 1, "stop": 2,
                                                                   "num": 3}}),
     r"\[continuation.parameter\] is 'c'; use one of \['a', 'b'\]"),
    (_with(BRUSSELATOR, continuation={"parameter": "b", "values": {"start": -1, "stop": 2,
                                                                   "num": 3}}),
     r"\[continuation.values\] reaches outside b's valid range"),
    (_with(BRUSSELATOR, continuation={"parameter": "b", "values": {"start": 2, "stop": 2,
                                                                   "num": 3}}),
     r"\[continuation.values.stop\] must differ from start"),
    (_with(BRUSSELATOR, continuation={"parameter": "b", "values": {"start": 1, "stop": 2,
                                                                   "num": 1}}),
     r"\[continuation.values.num\] must be an integer >= 2"),
    (_with(BRUSSELATOR, continuation={"parameter": "b", "values": {"start": 1, "stop": 2,
                                                                   "num": 3},
                                      "initial_guess": {"x": 1.0}}),
     r"\[continuation.initial_guess.y\] is missing"),
    (_with(BRUSSELATOR, figures=[{"kind": "bifurcation", "variable": "z"}]),
     r"\[figures\[0\].variable\] is 'z'; use one of \['x', 'y'\]"),
    (_with(BRUSSELATOR, continuation=None, figures=[{"kind": "bifurcation"}]),
     r"\[figures\[0\].kind\] 'bifurcation' needs a \[continuation\] table"),
]  # fmt: skip


@pytest.mark.parametrize(("config", "message"), BAD)
def test_bad_analysis_tables_are_refused_with_key_and_fix(tmp_path, config, message):
    config = {key: value for key, value in config.items() if value is not None}
    path = tmp_path / "bad.toml"
    with pytest.raises(ExperimentError, match=message) as caught:
        experiments.parse(config, path)
    assert str(caught.value).startswith(f"{path}: [")


def test_check_exits_2_on_a_bad_sensitivity_table(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text(
        '[model]\nname = "SIR"\nparameters = { beta = 0.3, gamma = 0.1, population = 1.0 }\n'
        "[initial_state]\nS = 0.99\nI = 0.01\nR = 0.0\n[time]\nstop = 10.0\nnum_points = 3\n"
        '[sensitivity]\nobservable = "peak"\nnum_samples = 12\nranges.beta = [0.2, 0.4]\n'
    )
    assert cli.main(["run", str(path), "--check"]) == 2
    error = capsys.readouterr().err
    assert "[sensitivity] Sobol' designs need a power of two" in error and "Use 8 or 16" in error
    path.write_text(path.read_text().replace("num_samples = 12", "num_samples = 16"))
    assert cli.main(["run", str(path), "--check"]) == 0


def test_morris_and_minimum_tables_parse(tmp_path):
    config = _with(
        SIR,
        event={"state": "S", "extremum": "minimum"},
        sensitivity={**SENSITIVITY, "method": "morris", "num_samples": 10, "num_levels": 6},
    )
    experiment = experiments.parse(config, tmp_path / "morris.toml")
    assert experiment.sensitivity.method == "morris" and experiment.sensitivity.num_levels == 6
    assert experiment.event.direction == 1 and experiment.event.threshold is None
    assert experiment.event.index == 0
