"""Experiment files whose model is a PEtab problem: `simlab run` reads the problem, fits it
from several starts, profiles a parameter and writes a fit experiment's results folder with
the figure of the data and the fitted curves; the tables and keys a PEtab problem gives
itself are refused at --check with the reason."""

import json
import math
import pathlib

import jax
import numpy as np
import pytest

pytest.importorskip("petab.v1")
pytest.importorskip("libsbml")

from petab_turnover import K_IN, K_OUT, STIMULI, TIMES, turnover_state, write_turnover  # noqa: E402

import simlab.experiment as experiments  # noqa: E402
from simlab import cli  # noqa: E402
from simlab.experiment import ExperimentError  # noqa: E402

pytestmark = pytest.mark.skipif(not jax.config.jax_enable_x64, reason="PEtab solves in float64")

EXPERIMENT = """\
description = "A species made and degraded, fitted to its exact trajectories"

[model]
petab = "turnover/problem.yaml"

[solver]
rtol = 1e-12
atol = 1e-14

[fit]
starts = 2
seed = 0
rtol = 1e-10
atol = 1e-10

[fit.profiles]
parameters = ["k_out"]
num_points = 3
"""
BOEHM = pathlib.Path(__file__).parent / "data/petab/Boehm_JProteomeRes2014"


def _write(folder: pathlib.Path, text: str = EXPERIMENT) -> pathlib.Path:
    """The turnover problem with noise-free data in `folder/turnover`, and the experiment
    file `folder/turnover.toml` that names it."""
    (folder / "turnover").mkdir(exist_ok=True)
    exact = {c: tuple(turnover_state(c, t) for t in TIMES) for c in STIMULI}
    write_turnover(folder / "turnover", exact)
    path = folder / "turnover.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """`simlab run turnover.toml --out run`, in the folder that holds both, as from a shell."""
    folder = tmp_path_factory.mktemp("petab_experiment")
    path = _write(folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv(cli.CACHE_ENVIRONMENT, str(folder / "cache"))
        assert cli.main(["run", str(path.name), "--out", "run", "--quiet"]) == 0
    return folder / "run"


@pytest.mark.slow  # the run takes about a minute, mostly compiling
def test_the_run_recovers_the_rates_of_exact_data(run_folder):
    """Every start reaches the truth, log10(1.3) and log10(0.7), on the parameters' log10
    scales; the estimates are written as a fit experiment's, with their scale."""
    metrics = json.loads((run_folder / "metrics.json").read_text(encoding="utf-8"))
    fit = metrics["fit"]
    assert fit["converged"] and fit["noise"] == "petab"
    assert list(fit["parameters"]) == ["k_in", "k_out"]
    for name, truth in (("k_in", K_IN), ("k_out", K_OUT)):
        entry = fit["parameters"][name]
        assert entry["value"] == pytest.approx(math.log10(truth), abs=1e-6)
        assert entry["scale"] == "log10" and entry["stderr"] > 0
    assert fit["starts"]["num_starts"] == 2
    # The profile of k_out has its minimum at the estimate, its interval around the truth.
    profile = fit["profiles"]["k_out"]
    assert profile["lower"] < math.log10(K_OUT) < profile["upper"]
    # The log-likelihood of residuals that vanish: the Gaussian normalisation alone.
    record = metrics["petab"]
    normalisation = -6 * 0.5 * math.log(2 * math.pi * 0.1**2)
    assert record["log_likelihood"] == pytest.approx(normalisation, abs=1e-6)
    assert record["problem"] == "turnover/problem.yaml" and record["at"] == "estimates"
    assert record["conditions"] == ["control", "stimulated"] and record["num_measurements"] == 6


@pytest.mark.slow  # the run takes about a minute, mostly compiling
def test_the_curves_and_the_data_are_stored(run_folder):
    """The fitted curves of both series follow the closed form, and the simulated values at
    the measurements equal the exact data they were fitted to."""
    stored = experiments._folder.read_run(run_folder)
    arrays, series = stored.arrays, stored.metrics["petab"]["series"]
    assert [(s["observable"], s["label"]) for s in series] == [
        ("obs_A", "control → control"),
        ("obs_A", "control → stimulated"),
    ]
    ts = arrays["petab_curve_ts"]
    assert ts.shape == (200,) and ts[0] == 0 and ts[-1] == max(TIMES)
    for number, item in enumerate(series):
        exact = [turnover_state(item["condition"], t) for t in ts]
        np.testing.assert_allclose(arrays["petab_curves"][number], exact, rtol=1e-6)
    np.testing.assert_allclose(arrays["petab_data_simulated"], arrays["petab_data_values"],
                               rtol=1e-6)  # fmt: skip
    np.testing.assert_array_equal(arrays["petab_data_series"], [0, 0, 0, 1, 1, 1])


@pytest.mark.slow  # the run takes about a minute, mostly compiling
def test_the_figures_are_written_and_redrawn(run_folder, capsys):
    """Without [[figures]], the data with the fitted curves, the waterfall of the starts and
    the profiles; `simlab plot` redraws them from the folder, `simlab show` names the fit."""
    names = ("petab_fit", "waterfall", "profiles")
    expected = {f"{name}.{suffix}" for name in names for suffix in ("png", "svg")}
    figures = run_folder / "figures"
    assert {path.name for path in figures.iterdir()} == expected
    png = (figures / "petab_fit.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert cli.main(["plot", str(run_folder)]) == 0
    assert (figures / "petab_fit.png").stat().st_size > 10_000
    assert cli.main(["show", str(run_folder)]) == 0
    shown = capsys.readouterr().out
    assert "PEtab problem turnover/problem.yaml: 6 measurements in 2 condition(s)" in shown
    assert "k_out = -0.154902 ±" in shown and "(log10 scale)" in shown


@pytest.mark.parametrize(
    ("addition", "key", "reason"),
    [
        ("[initial_state]\nA = 1.0\n", "initial_state", "the initial state comes from"),
        ('[data]\ndataset = "lynx_hare"\n', "data", "the data are the problem's measurement"),
        ("[time]\nstop = 5.0\nnum_points = 3\n", "time", "the times are the measurement"),
        ("[sweep]\nparameters.k_in = { values = [1.0] }\n", "sweep", "sweeps of a PEtab"),
    ],
)
def test_tables_a_petab_problem_gives_itself_are_refused(tmp_path, addition, key, reason):
    path = _write(tmp_path, EXPERIMENT + addition)
    with pytest.raises(ExperimentError) as caught:
        experiments.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: [{key}] does not go with a PEtab problem (model.petab): ")
    assert reason in message and message.endswith("; remove it.")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("starts = 2", 'parameters = ["k_in"]',
         r"\[fit.parameters\] does not go with a PEtab problem .* rows with estimate = 1"),
        ("starts = 2", "bounds = { k_in = [0.0, 1.0] }",
         r"\[fit.bounds\] does not go with .* lowerBound and upperBound"),
        ("starts = 2", "stars = 2",
         r"\[fit.stars\] is not a known key; the keys allowed here are \['starts', 'seed'"),
        ('parameters = ["k_out"]', 'parameters = ["k_deg"]',
         r"\[fit.profiles.parameters\] names 'k_deg'; the choices are \['k_in', 'k_out'\]"),
        ("rtol = 1e-12", 'name = "tsit5"', r"\[solver.name\] .* solved by rodas5p"),
        ('petab = "turnover/problem.yaml"', 'petab = "turnover/missing.yaml"',
         r"\[model.petab\] no such file .*missing.yaml'; give the problem's YAML file"),
        ('petab = "turnover/problem.yaml"', 'petab = "turnover/model.xml"',
         r"\[model.petab\] .*model.xml' cannot be read as a PEtab problem"),
        ('petab = "turnover/problem.yaml"', 'petab = "/etc/hosts"',
         r"\[model.petab\] '/etc/hosts' lies outside the experiment's folder"),
    ],
)  # fmt: skip
def test_keys_are_checked_with_the_key_and_the_fix(tmp_path, old, new, message):
    assert old in EXPERIMENT
    path = _write(tmp_path, EXPERIMENT.replace(old, new, 1))
    with pytest.raises(ExperimentError, match=message):
        experiments.load(path)


def test_figures_are_checked_against_what_a_petab_run_has(tmp_path):
    single = EXPERIMENT.replace("starts = 2\n", "")
    path = _write(tmp_path, single + '[[figures]]\nkind = "waterfall"\n')
    with pytest.raises(ExperimentError, match=r"'waterfall' needs a multi-start fit: fit.starts"):
        experiments.load(path)
    path = _write(tmp_path, EXPERIMENT + '[[figures]]\nkind = "phase_portrait"\n')
    with pytest.raises(ExperimentError, match="'phase_portrait' is not drawn for a PEtab"):
        experiments.load(path)
    # The figure of a PEtab problem is refused for a model class.
    config = {
        "model": {
            "name": "LotkaVolterra",
            "parameters": {"alpha": 0.5, "beta": 0.02, "gamma": 0.8, "delta": 0.02},
        },
        "initial_state": {"prey": 30.0, "predator": 4.0},
        "time": {"stop": 1.0, "num_points": 3},
        "figures": [{"kind": "petab_fit"}],
    }
    with pytest.raises(ExperimentError, match=r"'petab_fit' needs a PEtab problem: \[model\]"):
        experiments.parse(config, tmp_path / "lotka_volterra.toml")


def test_without_a_fit_the_defaults_are_the_nominal_curves(tmp_path):
    """No [fit]: the curves at the nominal values alone; --data has nothing to replace."""
    path = _write(tmp_path, EXPERIMENT.split("[fit]")[0])
    experiment = experiments.load(path)
    assert experiment.fit is None and [f.kind for f in experiment.figures] == ["petab_fit"]
    assert experiment.model.state_names == ("A",) and experiment.y0.shape == (1,)
    with pytest.raises(ExperimentError, match=r"\[model.petab\] takes its measurements from"):
        experiments.load(path, data=tmp_path / "counts.csv")


def test_the_shipped_boehm_experiment_validates():
    """The shipped example names the Boehm problem relative to itself; its reduced version
    keeps every figure."""
    for quick in (False, True):
        experiment = experiments.load(experiments.find("boehm_petab"), quick=quick)
        assert experiment.petab.problem.parameter_ids[5] == "k_phos"
        assert experiment.fit.profiles.parameters == ("k_phos",)
        assert [f.kind for f in experiment.figures] == ["petab_fit", "waterfall", "profiles"]
        assert experiment.time.stop == 240.0
    assert experiment.fit.starts == 2


@pytest.mark.slow
def test_the_shipped_boehm_experiment_runs(tmp_path, monkeypatch):
    """`simlab run boehm_petab --quick` from the project's folder (which holds the problem):
    two starts, a three-point profile of k_phos, and the three observables with their
    fitted curves."""
    monkeypatch.chdir(BOEHM.parents[3])
    monkeypatch.setenv(cli.CACHE_ENVIRONMENT, str(tmp_path / "cache"))
    out = tmp_path / "boehm"
    assert cli.main(["run", "boehm_petab", "--quick", "--out", str(out), "--quiet"]) == 0
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert len(metrics["petab"]["series"]) == 3 and metrics["petab"]["num_measurements"] == 48
    assert metrics["fit"]["starts"]["num_starts"] == 2
    assert metrics["petab"]["log_likelihood"] > -1000  # a fit, not a failed solve
    assert (out / "figures" / "petab_fit.png").stat().st_size > 10_000
