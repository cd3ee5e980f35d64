"""Experiment files that fit with the likelihood features of `simlab.fit`: t0, noise
models, multi-start, profiles and NUTS posteriors; every [fit] key checked at --check with
the key and the fix; the run stores what it computed and `simlab plot` redraws it. And the
posterior band of `plot.fit_curves` against the exact band of a model linear in its
parameter."""

import copy
import json
import math
import pathlib

import jax.numpy as jnp
import jax.random as jr
import matplotlib.collections
import numpy as np
import pytest
from test_sample import FAST, SIGMA, TS, Drift

import simlab
import simlab.experiment as experiments
import simlab.plot
from simlab import cli
from simlab.experiment import ExperimentError
from simlab.experiment._folder import to_toml

TRUTH = {"alpha": 0.55, "gamma": 0.85}
BASE = {
    "description": "Lotka-Volterra fitted to its own noisy snapshots, started before them",
    "model": {
        "name": "LotkaVolterra",
        "parameters": {"alpha": 0.5, "beta": 0.025, "gamma": 0.9, "delta": 0.025},
    },
    "initial_state": {"prey": 30.0, "predator": 4.0},
    "time": {"start": 0.0, "stop": 10.0, "num_points": 11},
    "solver": {"name": "tsit5", "rtol": 1e-6, "atol": 1e-6},
    "data": {"synthetic": True, "true_parameters": TRUTH, "noise": 0.5, "seed": 1},
    "fit": {
        "parameters": ["alpha", "gamma"],
        "t0": -1.0,
        "noise": "lognormal",
        "starts": 4,
        "bounds": {"alpha": [0.2, 1.5], "gamma": [0.2, 2.0]},
        "seed": 3,
        "profiles": {"parameters": ["alpha"], "num_points": 5},
        "sampling": {"num_samples": 100, "num_warmup": 150, "num_chains": 2, "num_predictive": 20},
    },
    "figures": [
        {"kind": "fit"},
        {"kind": "waterfall"},
        {"kind": "profiles"},
        {"kind": "corner"},
        {"kind": "posterior_predictive", "xlabel": "time (years)"},
    ],
}


def _write(folder: pathlib.Path, config: dict, name: str = "fit_features") -> pathlib.Path:
    path = folder / f"{name}.toml"
    path.write_text(to_toml(config), encoding="utf-8")
    return path


def _changed(**changes) -> dict:
    """BASE with `changes` ("fit.noise" = value; None deletes the key)."""
    config = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        table = config
        for parent in parents:
            table = table.setdefault(parent, {})
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return config


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fit_features")
    experiment = experiments.load(_write(folder, BASE))
    run_folder = experiments.run(experiment, out=folder / "run", quiet=True)
    return experiments._folder.read_run(run_folder)


def test_the_fit_recovers_the_truth_from_t0(stored):
    """The data were simulated from t0 = -1 with the true rates; the fit, started at t0 as
    well, recovers them within a few standard errors (a fit from the first observation
    would see a different initial state)."""
    fit = stored.metrics["fit"]
    assert fit["converged"] and fit["noise"] == "lognormal"
    for name, value in TRUTH.items():
        entry = fit["parameters"][name]
        assert abs(entry["value"] - value) < 4 * entry["stderr"]
    # The log-normal residual scale is estimated: the additive noise of 0.5 on counts of
    # 5-80 is a few per cent in the log.
    assert 0.005 < math.sqrt(fit["noise_variance"]) < 0.1


def test_multi_start_is_stored(stored):
    record, arrays = stored.metrics["fit"]["starts"], stored.arrays
    assert record["names"] == ["alpha", "gamma"] and record["num_starts"] == 4
    assert arrays["fit_starts_loss"].shape == (4,)
    assert arrays["fit_starts_initial"].shape == arrays["fit_starts_params"].shape == (4, 2)
    # Lotka-Volterra simulates anywhere in the bounds: no start is drawn again.
    np.testing.assert_array_equal(arrays["fit_starts_draws"], np.ones(4))
    assert record["num_redrawn"] == 0
    # The starts lie in the bounds; the reported fit is the best start.
    low, high = np.array([[0.2, 0.2]]), np.array([[1.5, 2.0]])
    assert np.all((arrays["fit_starts_initial"] > low) & (arrays["fit_starts_initial"] < high))
    assert math.isclose(record["best_loss"], stored.metrics["fit"]["loss"], rel_tol=1e-9)
    assert record["best_loss"] == pytest.approx(arrays["fit_starts_loss"].min(), rel=1e-9)
    best = arrays["fit_starts_params"][record["best"]]
    assert best[0] == pytest.approx(stored.metrics["fit"]["parameters"]["alpha"]["value"])


def test_profile_interval_is_stored_and_close_to_wald(stored):
    """With little noise the likelihood is nearly Gaussian: the profile interval is close
    to the Wald interval, estimate ± 1.96 standard errors."""
    profile = stored.metrics["fit"]["profiles"]["alpha"]
    values, nll = stored.arrays["profile_alpha_values"], stored.arrays["profile_alpha_nll"]
    assert values.shape == nll.shape == (5,) and np.all(np.diff(values) > 0)
    assert nll[2] == 0 and np.all(nll >= -1e-8) and np.all(stored.arrays["profile_alpha_converged"])
    assert profile["threshold"] == pytest.approx(0.5 * 1.959964**2, rel=1e-5)
    assert not profile["lower_open"] and not profile["upper_open"]
    estimate, stderr = profile["estimate"], stored.metrics["fit"]["parameters"]["alpha"]["stderr"]
    assert profile["lower"] < estimate < profile["upper"]
    for end, sign in ((profile["lower"], -1), (profile["upper"], 1)):
        assert sign * (end - estimate) == pytest.approx(1.96 * stderr, rel=0.15)


def test_posterior_is_stored_and_agrees_with_the_fit(stored):
    sampling, arrays = stored.metrics["sampling"], stored.arrays
    assert sampling["names"] == ["alpha", "gamma", "noise.scale"]
    assert arrays["posterior_samples"].shape == (2, 100, 3)
    assert arrays["posterior_divergent"].shape == (2, 100)
    fit = stored.metrics["fit"]["parameters"]
    for name in TRUTH:
        summary = sampling["summary"][name]
        # A flat prior over the bounds and a nearly Gaussian likelihood: the posterior
        # mean is the estimate, its spread the standard error (within Monte Carlo error).
        assert abs(summary["mean"] - fit[name]["value"]) < 0.5 * fit[name]["stderr"]
        assert summary["sd"] == pytest.approx(fit[name]["stderr"], rel=0.35)
        assert summary["r_hat"] < 1.1
    # The predictive curves: 20 draws at the experiment's 11 times, 2 observed states;
    # the fitted curve lies inside their 95% band at almost every time.
    curves = arrays["posterior_predictive"]
    assert curves.shape == (20, 11, 2)
    lower, upper = np.quantile(curves, [0.025, 0.975], axis=0)
    fitted = arrays["fit_prediction"]
    inside = (lower - 1e-6 * np.abs(fitted) <= fitted) & (fitted <= upper + 1e-6 * np.abs(fitted))
    assert inside.mean() >= 0.9


def test_figures_are_drawn_and_redrawn_from_the_folder(stored, capsys):
    figures = stored.figures_folder
    names = {"fit", "waterfall", "profiles", "corner", "posterior_predictive"}
    assert {p.name for p in figures.iterdir()} == {
        f"{n}.{s}" for n in names for s in ("png", "svg")
    }
    for path in figures.iterdir():
        path.unlink()
    assert cli.main(["plot", str(stored.folder)]) == 0
    assert "redrew 10 file(s)" in capsys.readouterr().out
    assert all((figures / f"{n}.png").stat().st_size > 10_000 for n in names)
    text = experiments.show(stored.folder)
    assert "alpha" in text and "sampling" in json.loads(
        (stored.folder / "metrics.json").read_text()
    )


LOTKA_CSV = "t,prey,predator\n0,30,4\n1,0,6\n2,20,9\n"


@pytest.mark.parametrize(
    ("changes", "key", "fix"),
    [
        ({"fit__noise": "cauchy"}, "[fit.noise]", "use one of"),
        ({"fit__noise": "poisson", "fit__method": "least_squares"}, "[fit.method]", "quasi_newton"),
        ({"fit__noise": "poisson", "fit__noise_scale": 0.1}, "[fit.noise_scale]", "remove it"),
        ({"fit__noise_scale": [0.1, 0.2, 0.3]}, "[fit.noise_scale]", "one per observed"),
        ({"fit__noise_scale": -1.0}, "[fit.noise_scale]", "positive"),
        ({"fit__fit_noise": "yes"}, "[fit.fit_noise]", "true or false"),
        ({"fit__t0": 0.5}, "[fit.t0]", "before time.start"),
        ({"fit__starts": 1}, "[fit.starts]", "integer >= 2"),
        ({"fit__bounds": {"alpha": [0.2, 1.5]}}, "[fit.starts]", "fit.bounds.gamma"),
        (
            {"fit__bounds": {"alpha": [0.2, 1.5], "beta": [0.01, 0.1]}},
            "[fit.bounds.beta]",
            "not a fitted",
        ),
        (
            {"fit__bounds": {"alpha": [1.5, 0.2], "gamma": [0.2, 2.0]}},
            "[fit.bounds.alpha]",
            "lower end",
        ),
        (
            {"fit__bounds": {"alpha": [0.6, 1.5], "gamma": [0.2, 2.0]}},
            "[fit.bounds.alpha]",
            "starting value",
        ),
        (
            {"fit__bounds": {"alpha": [-1.0, 1.5], "gamma": [0.2, 2.0]}},
            "[fit.bounds.alpha]",
            "valid range",
        ),
        (
            {"fit__bounds": {"alpha": 1.0, "gamma": [0.2, 2.0]}},
            "[fit.bounds.alpha]",
            "pair [lower, upper]",
        ),
        ({"fit__seed": -1}, "[fit.seed]", "integer >= 0"),
        ({"fit__profiles": {"parameters": ["beta"]}}, "[fit.profiles.parameters]", "choices"),
        ({"fit__profiles": {"level": 1.5}}, "[fit.profiles.level]", "between 0 and 1"),
        ({"fit__profiles": {"num_points": 2}}, "[fit.profiles.num_points]", ">= 3"),
        ({"fit__profiles": {"grid": 3}}, "[fit.profiles.grid]", "not a known key"),
        ({"fit__sampling": {"num_chains": 0}}, "[fit.sampling.num_chains]", ">= 1"),
        ({"fit__sampling": {"thin": 2}}, "[fit.sampling.thin]", "not a known key"),
        (
            {"fit__sampling": {"priors": {"beta": [0.0, 1.0]}}},
            "[fit.sampling.priors.beta]",
            "not a fitted",
        ),
        (
            {"fit__starts": None, "fit__bounds": None, "figures": [{"kind": "corner"}]},
            "[fit.sampling.priors]",
            "fit.sampling.priors.alpha = [lower, upper]",
        ),
        (
            {"fit__starts": None, "figures": [{"kind": "waterfall"}]},
            "[figures[0].kind]",
            "fit.starts = N",
        ),
        (
            {"fit__profiles": None, "figures": [{"kind": "profiles"}]},
            "[figures[0].kind]",
            "[fit.profiles]",
        ),
        (
            {"fit__sampling": None, "figures": [{"kind": "corner"}]},
            "[figures[0].kind]",
            "[fit.sampling]",
        ),
        (
            {"figures": [{"kind": "corner", "xlabel": "x"}]},
            "[figures[0].xlabel]",
            "not a known key",
        ),
    ],
)
def test_every_fit_key_is_checked(tmp_path, changes, key, fix):
    path = _write(tmp_path, _changed(**changes))
    with pytest.raises(ExperimentError) as error:
        experiments.load(path)
    assert key in str(error.value) and fix in str(error.value)


def test_check_refuses_noise_the_data_cannot_have(tmp_path, capsys):
    """Log-normal noise needs positive data: the CSV's zero is refused at --check, exit 2."""
    (tmp_path / "counts.csv").write_text(LOTKA_CSV, encoding="utf-8")
    config = _changed(data={"csv": "counts.csv"}, fit__t0=None)
    config["time"]["start"] = 0.0
    path = _write(tmp_path, config)
    assert cli.main(["run", str(path), "--check"]) == 2
    message = capsys.readouterr().err
    assert "[fit.noise]" in message and "positive" in message
    # The same data suit Poisson counts; t0 must precede the first observation.
    poisson = _changed(data={"csv": "counts.csv"}, fit__t0=None, fit__noise="poisson")
    poisson["fit"].pop("sampling")
    poisson["figures"] = [{"kind": "waterfall"}, {"kind": "profiles"}]
    assert experiments.load(_write(tmp_path, poisson)).fit.noise == "poisson"
    poisson["fit"]["t0"], poisson["time"]["start"] = 0.0, 0.5
    with pytest.raises(ExperimentError, match=r"\[fit\.t0\].*first observation"):
        experiments.load(_write(tmp_path, poisson))


def test_fit_curves_posterior_band_is_the_exact_band_of_a_linear_model():
    """x(t) = 1 + slope t with Gaussian noise of known scale and a flat prior: the posterior
    of the slope is exactly normal, mean the estimate and sd its standard error, so the
    band of the curves at time t is 1 + estimate t ± 1.96 se t (also the delta-method
    band). Drawn from exact posterior draws (NUTS itself is tested in test_sample.py),
    the band matches it within Monte Carlo error and holds the fitted curve."""
    observations = 1.0 + 0.7 * TS + SIGMA * jr.normal(jr.key(0), TS.shape)
    result = simlab.fit(
        Drift(slope=0.1),
        TS,
        observations[:, None],
        y0=jnp.array([1.0]),
        params=["slope"],
        noise_scale=SIGMA,
        simulate_options=FAST,
    )
    estimate, stderr = float(result.params["slope"]), float(result.stderr["slope"])
    slopes = estimate + stderr * jr.normal(jr.key(2), (2, 2000))
    posterior = simlab.Posterior(
        samples={"slope": slopes},
        log_density=jnp.zeros(slopes.shape),
        divergent=jnp.zeros(slopes.shape, bool),
        acceptance_rate=jnp.ones(slopes.shape),
    )
    ts = np.linspace(0.0, 2.0, 9)
    curves = simlab.plot.posterior_curves(result, posterior, ts, num_draws=4000)
    assert curves.shape == (4000, 9, 1)
    lower, median, upper = np.quantile(curves[:, :, 0], [0.025, 0.5, 0.975], axis=0)
    # The 2.5% quantile of 4000 normal draws has a Monte Carlo sd of about 0.03 sd.
    assert np.allclose(0.5 * (upper - lower)[1:], 1.96 * stderr * ts[1:], rtol=0.05)
    assert np.allclose(median, 1.0 + estimate * ts, atol=0.05 * stderr * ts.max())
    assert lower[0] == upper[0] == 1.0  # the initial state is known, not sampled
    ax = simlab.plot.fit_curves(
        result, TS, observations[:, None], posterior=posterior, num_draws=100, num_points=20
    )
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert "95% posterior band" in legend and "95% delta-method band" in legend
    bands = [c for c in ax.collections if isinstance(c, matplotlib.collections.PolyCollection)]
    assert len(bands) == 2  # the prediction band and the posterior band
    # A posterior of other names is refused, naming what is missing.
    foreign = simlab.Posterior(
        samples={"rate": slopes},
        log_density=posterior.log_density,
        divergent=posterior.divergent,
        acceptance_rate=posterior.acceptance_rate,
    )
    with pytest.raises(ValueError, match=r"no draws of \['slope'\]"):
        simlab.plot.posterior_curves(result, foreign, TS)


def test_empty_csv_cells_are_missing_observations(tmp_path):
    """An empty cell (or nan) is not observed: NaN in the data the fit is given, which
    leaves it out of the likelihood; a column with no value at all is refused."""
    (tmp_path / "counts.csv").write_text(
        "t,prey,predator\n0,30,4\n1,,6\n2,20,nan\n3,25,8\n", encoding="utf-8"
    )
    config = _changed(data={"csv": "counts.csv"}, fit__t0=None)
    experiment = experiments.load(_write(tmp_path, config))
    observations = experiment.data.observations
    assert np.isnan(observations[1, 0]) and np.isnan(observations[2, 1])
    assert np.isfinite(observations).sum() == 6
    (tmp_path / "counts.csv").write_text("t,prey,predator\n0,30,\n1,20,\n", encoding="utf-8")
    with pytest.raises(ExperimentError, match=r"\[data.columns\] .* no value in column 'predator'"):
        experiments.load(_write(tmp_path, config))
    (tmp_path / "counts.csv").write_text("t,prey,predator\n0,30,inf\n1,20,3\n", encoding="utf-8")
    with pytest.raises(ExperimentError, match=r"\[data.csv\] .* finite values"):
        experiments.load(_write(tmp_path, config))
