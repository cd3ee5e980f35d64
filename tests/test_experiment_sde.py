"""Experiments of stochastic models: the Kramers escape experiment, run by the `simlab`
command, against mean first-passage times by SciPy quadrature; first passages read off a
saved path; and the tables a stochastic model needs, checked before anything runs."""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

import simlab
import simlab.experiment as experiments
from simlab import cli
from simlab.experiment import ExperimentError
from simlab.experiment._fields import StateEvent
from simlab.models import DoubleWell

ESCAPE = {
    "model": {"name": "DoubleWell", "parameters": {"D": 0.2}},
    "initial_state": {"x": -1.0},
    "time": {"start": 0.0, "stop": 10.0, "num_points": 101},
    "solver": {"name": "euler_maruyama", "adaptive": False, "dt0": 0.1},
    "ensemble": {"paths": 4, "seed": 0},
    "event": {"state": "x", "threshold": 1.0, "direction": "rising"},
    "sweep": {"observable": "event", "parameters": {"D": {"values": [0.2, 0.3]}}},
    "figures": [{"kind": "escape_rate"}],
}


def potential(x):
    return x**4 / 4 - x**2 / 2


def exact_mean_passage_time(D: float, start: float, end: float) -> float:
    """$T = \\frac1D \\int_a^b e^{U(y)/D} \\int_{-\\infty}^y e^{-U(z)/D} dz\\, dy$ (reflecting
    at $-\\infty$), by adaptive quadrature, shifted by $U(-1)$ against overflow."""

    def inner(y):
        weight = lambda z: np.exp(-(potential(z) - potential(-1.0)) / D)  # noqa: E731
        return integrate.quad(weight, -np.inf, y)[0]

    def outer(y):
        return np.exp((potential(y) - potential(-1.0)) / D) * inner(y)

    return integrate.quad(outer, start, end, limit=200)[0] / D


def _with(table: str, **changes) -> dict:
    """`ESCAPE` with keys of one table changed (`None` removes one, or the whole table)."""
    config = copy.deepcopy(ESCAPE)
    if not changes:
        config.pop(table)
        return config
    target = config.setdefault(table, {})
    for key, value in changes.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return config


def test_kramers_experiment_matches_the_exact_mean_first_passage_time(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["run", "kramers_escape", "--quick", "--quiet", "--out", str(out)]) == 0
    stored = experiments._folder.read_run(out)
    ensemble = stored.metrics["sweep"]["ensemble"]
    times = ensemble["statistics"]["event_time"]
    start, end = stored.config["initial_state"]["x"], stored.config["event"]["threshold"]
    # Every path arrived before the horizon, so the means are not censored.
    assert times["count"] == [ensemble["paths"]] * len(ensemble["points"]["D"])
    for D, mean, error in zip(
        ensemble["points"]["D"], times["mean"], times["standard_error"], strict=True
    ):
        exact = exact_mean_passage_time(D, start, end)
        # Fixed seed; the mean of 128 nearly exponential times: 4 standard errors is a
        # 99.99% band (the Euler–Maruyama bias at dt = 0.02 is a few percent, below one).
        assert abs(mean - exact) < 4 * error, (D, mean, error, exact)
        assert error < 0.12 * exact  # the band is narrow enough to mean something
    # The stored per-path times are what the statistics summarise.
    sweep = experiments.load_sweep(stored)
    per_path = sweep.observables["event_time"].reshape(-1, ensemble["paths"])
    np.testing.assert_allclose(per_path.mean(axis=1), times["mean"], rtol=1e-12)
    assert np.all(stored.arrays["simulation_ys"][0] == start)
    figures = {path.name for path in (out / "figures").iterdir()}
    assert figures == {"kramers_escape.png", "kramers_escape.svg"}
    # `simlab show` prints the ensemble: its paths and seed, each point's mean ± error.
    capsys.readouterr()
    assert cli.main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert f"ensemble: {ensemble['paths']} paths per point, seed 0" in shown
    for D, mean, error in zip(
        ensemble["points"]["D"], times["mean"], times["standard_error"], strict=True
    ):
        paths = ensemble["paths"]
        assert f"D = {D:.4g}: {mean:.4g} ± {error:.3g} ({paths} of {paths} paths)" in shown


@pytest.mark.parametrize("D", [0.05, 0.15, 0.3, 1.0])
def test_double_well_mean_passage_time_matches_scipy_quadrature(D):
    model = DoubleWell(D=D)
    for start, end in ((-1.0, 1.0), (-0.5, 0.3)):
        np.testing.assert_allclose(
            model.mean_first_passage_time(start, end),
            exact_mean_passage_time(D, start, end),
            rtol=1e-6,
        )


def test_kramers_rate_is_the_small_noise_limit_of_the_exact_rate():
    # Curvatures by central differences: U''(-1) = 2 in the well, U''(0) = -1 at the top.
    h = 1e-4
    curvature = [(potential(x + h) - 2 * potential(x) + potential(x - h)) / h**2 for x in (-1, 0)]
    ratios = []
    for D in (0.2, 0.1, 0.05, 0.025):
        kramers = np.sqrt(curvature[0] * -curvature[1]) / (2 * np.pi) * np.exp(-0.25 / D)
        np.testing.assert_allclose(DoubleWell(D=D).kramers_rate(), kramers, rtol=1e-7)
        ratios.append(exact_mean_passage_time(D, -1.0, 1.0) * kramers)
    # T r -> 1 as D -> 0, the gap shrinking about linearly in D (23% at D = 0.2).
    assert all(a > b > 1 for a, b in zip(ratios, ratios[1:], strict=False))
    assert ratios[0] > 1.2 and ratios[-1] < 1.05


def test_first_passage_is_read_off_the_saved_path_by_linear_interpolation():
    ts = jnp.linspace(0.0, 2 * np.pi, 2001)
    path = simlab.Trajectory(
        ts=ts, ys=jnp.sin(ts)[:, None], result=simlab.RESULTS.successful, stats={}
    )
    spacing = float(ts[1] - ts[0])
    # sin rises through 0.5 at pi/6 and falls through it at 5 pi/6; linear interpolation
    # errs by at most spacing^2 max|sin''| / (8 |sin'|) there.
    bound = spacing**2 / (8 * np.cos(np.pi / 6))
    for direction, expected in ((1, np.pi / 6), (-1, 5 * np.pi / 6), (0, np.pi / 6)):
        time, state = StateEvent(0, 0.5, direction).first_passage(path)
        assert abs(float(time) - expected) < bound
        np.testing.assert_allclose(np.asarray(state), [0.5], atol=1e-12)
    time, state = StateEvent(0, 1.5, 1).first_passage(path)
    assert np.isnan(float(time)) and np.all(np.isnan(np.asarray(state)))


def test_a_small_escape_experiment_parses_with_its_ensemble(tmp_path):
    experiment = experiments.parse(ESCAPE, tmp_path / "escape.toml")
    assert (experiment.ensemble.paths, experiment.ensemble.seed) == (4, 0)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (_with("ensemble"), r"\[ensemble\] is missing; DoubleWell is stochastic"),
        (
            _with("solver", adaptive=True),
            r"\[solver\] DoubleWell is stochastic and EulerMaruyama takes fixed",
        ),
        (_with("solver", name="tsit5"), r"\[solver\] DoubleWell is stochastic; Tsit5 solves"),
        (_with("ensemble", paths=0), r"\[ensemble.paths\] must be an integer >= 1"),
        (_with("ensemble", runs=3), r"\[ensemble.runs\] is not a known key"),
        (
            _with("event", threshold=None, direction=None, extremum="maximum"),
            r"\[event.extremum\] DoubleWell is stochastic: its paths are rough",
        ),
        (_with("time", num_points=11), r"\[time.num_points\] saves every 1.*num_points = 101"),
        (_with("event", threshold=-1.5), r"\[event\] 'escape_rate' times the first rise"),
        (_with("sweep", observable="final_state"), r"'escape_rate' needs first-passage times"),
        (_with("fit", parameters=["D"]), r"\[fit\] is for deterministic models here"),
        (_with("solver", max_steps=50), r"\[solver.max_steps\] is 50, but 100 steps"),
    ],
)
def test_stochastic_experiments_are_checked_before_they_run(tmp_path, config, message):
    with pytest.raises(ExperimentError, match=message):
        experiments.parse(config, tmp_path / "escape.toml")


def test_an_ensemble_is_refused_for_a_deterministic_model(tmp_path):
    config = {
        "model": {"name": "Lorenz", "parameters": {"sigma": 10.0, "rho": 28.0, "beta": 2.5}},
        "initial_state": {"x": 1.0, "y": 1.0, "z": 1.0},
        "time": {"start": 0.0, "stop": 1.0, "num_points": 11},
        "ensemble": {"paths": 4},
    }
    with pytest.raises(ExperimentError, match=r"\[ensemble\] is for stochastic models; Lorenz"):
        experiments.parse(config, tmp_path / "lorenz.toml")


@pytest.mark.slow
def test_an_experiment_sweeps_a_stochastic_model_with_adaptive_steps(tmp_path):
    """`solver = "spark"` takes adaptive steps on each path's Brownian tree: the sweep runs,
    and its per-point means are those of `simlab.sweep` with the same settings and key.
    An `[event]` (timed at the save times, so every step must be one) is refused."""
    config = _with("solver", name="spark", adaptive=None, dt0=None, rtol=1e-3, atol=1e-5)
    config.pop("event")
    config.pop("figures")
    config["time"] = {"start": 0.0, "stop": 1.0, "num_points": 3}
    config["sweep"] = {"observable": "final_state", "parameters": {"D": {"values": [0.2, 0.3]}}}
    folder = experiments.run(
        experiments.parse(config, tmp_path / "spark.toml"), out=tmp_path / "run", quiet=True
    )
    stored = experiments._folder.read_run(folder)
    means = stored.metrics["sweep"]["ensemble"]["statistics"]["final_x"]["mean"]
    direct = simlab.sweep(
        DoubleWell(D=0.2),
        {"D": np.array([0.2, 0.3])},
        jnp.array([-1.0]),
        jnp.linspace(0.0, 1.0, 3),
        observable=lambda path: {"final_x": path.ys[-1, 0]},
        paths=4,
        key=jax.random.key(0),
        solver="spark",
        rtol=1e-3,
        atol=1e-5,
        progress=False,
    )
    np.testing.assert_allclose(means, direct.observables["final_x_mean"], rtol=1e-12)
    with_event = _with("solver", name="spark", adaptive=None, dt0=None, rtol=1e-3, atol=1e-5)
    with pytest.raises(ExperimentError, match=r"\[event\] times a stochastic path .* 'spark'"):
        experiments.parse(with_event, tmp_path / "spark_event.toml")
