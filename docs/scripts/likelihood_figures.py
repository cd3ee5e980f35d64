"""Makes the likelihood figures of the fitting tutorial and prints the numbers quoted next to
them: docs/figures/fit_missing_t0.png, fit_noise_models.png, fit_waterfall.png,
fit_profiles.png, fit_corner.png, fit_posterior_band.png, and (part `experiment`)
fit_experiment_corner.png and fit_experiment_posterior.png.

Run from the repository root: `python docs/scripts/likelihood_figures.py [PART ...]`, PART
one of `missing`, `noise`, `multistart` (waterfall and profiles), `posterior` (the lynx-hare
NUTS posterior: fit_corner.png, fit_posterior_band.png) and `experiment` (a small synthetic
experiment file with [fit.sampling], run by `simlab run`); all of them by default.
"""

import pathlib
import shutil
import sys
import tempfile
import time

import arviz
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import jax.random as jr  # noqa: E402
import matplotlib  # noqa: E402
import numpy as np  # noqa: E402

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import simlab  # noqa: E402
import simlab.plot  # noqa: E402

FIGURES = pathlib.Path(__file__).resolve().parents[1] / "figures"
PARAMS = ["alpha", "beta", "gamma", "delta"]
BOUNDS = {"alpha": (0.1, 2.0), "beta": (0.005, 0.1), "gamma": (0.1, 2.0), "delta": (0.005, 0.1)}
DATA = simlab.datasets.lynx_hare()
START = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02)
COMMON = dict(y0=DATA.observations[0], params=PARAMS, fit_y0=True)
YEARS = f"time ({DATA.time_unit})"


def missing() -> None:
    """An epidemic seeded on day 0 and first counted on day 4, with gaps in the counts."""
    truth = simlab.models.SIR(beta=0.5, gamma=0.2, population=1000.0)
    y0 = jnp.array([990.0, 10.0, 0.0])
    ts = jnp.arange(4.0, 41.0, 2.0)
    clean = simlab.simulate(truth, y0, jnp.concatenate([jnp.zeros(1), ts])).ys[1:, 1:]
    rng = np.random.default_rng(0)
    observed = np.asarray(clean) + 15.0 * rng.standard_normal(clean.shape)
    observed[1::2, 1] = np.nan  # recoveries counted every other time only
    observed[rng.choice(ts.size, 4, replace=False), 0] = np.nan  # four missed days
    start = simlab.models.SIR(beta=0.3, gamma=0.1, population=1000.0)
    result = simlab.fit(
        start, ts, observed, y0=y0, t0=0.0, params=["beta", "gamma"], observe=["I", "R"]
    )
    print(
        "missing/t0:",
        {k: f"{float(v):.4f} ± {float(result.stderr[k]):.2g}" for k, v in result.params.items()},
        f"N = {int(result.num_observed)} of {observed.size}",
    )
    ax = simlab.plot.fit_curves(
        result, ts, observed, time_label="time (days)", value_label="people"
    )
    ax.figure.savefig(FIGURES / "fit_missing_t0.png")
    plt.close(ax.figure)


def noise() -> None:
    """Additive and multiplicative noise fitted to the pelt records, side by side."""
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained", sharey=True)
    for ax, name in zip(axes, ("gaussian", "lognormal"), strict=True):
        result = simlab.fit(START, DATA.ts, DATA.observations, noise=name, **COMMON)
        print(
            name,
            {k: round(float(v), 4) for k, v in result.params.items()},
            f"logL {float(result.log_likelihood):.2f} AIC {float(result.aic):.2f}",
        )
        simlab.plot.fit_curves(
            result, DATA.ts, DATA.observations, time_label=YEARS, value_label="thousands", ax=ax
        )
        ax.get_legend().set_title(f'noise="{name}": AIC {float(result.aic):.1f}')
    figure.savefig(FIGURES / "fit_noise_models.png")
    plt.close(figure)


def multistart() -> None:
    multi = simlab.fit(
        START,
        DATA.ts,
        DATA.observations,
        noise="lognormal",
        starts=200,
        bounds=BOUNDS,
        key=jr.key(0),
        throw=False,
        **COMMON,
    )
    losses = jnp.sort(multi.starts.loss)
    print(
        "multi-start best",
        float(losses[0]),
        "found by",
        int(jnp.sum(losses <= losses[0] * (1 + 1e-4))),
        "of 200",
    )
    ax = simlab.plot.waterfall(multi)
    ax.set_title("lynx–hare, log-normal noise: 200 starts")
    ax.figure.savefig(FIGURES / "fit_waterfall.png")
    plt.close(ax.figure)

    profiles = multi.profile(PARAMS, num_points=21)
    for name, profile in profiles.items():
        print(
            f"{name}: {float(profile.estimate):.4g} [{float(profile.lower):.4g}, "
            f"{float(profile.upper):.4g}]; Wald ± {1.96 * float(multi.stderr[name]):.3g}"
        )
    axes = simlab.plot.profiles(profiles)
    axes[0].figure.savefig(FIGURES / "fit_profiles.png")
    plt.close(axes[0].figure)


def posterior() -> None:
    fast = simlab.fit(
        START,
        DATA.ts,
        DATA.observations,
        noise="lognormal",
        bounds=BOUNDS,
        simulate_options=dict(solver="rk4", adaptive=False, dt0=0.05),
        **COMMON,
    )
    start = time.perf_counter()
    draws = simlab.sample(fast, num_samples=500, num_warmup=300, num_chains=4, key=jr.key(1))
    jax.block_until_ready(draws.samples)
    print(f"sampling (compilation included): {time.perf_counter() - start:.1f} s")
    print(draws.summary().to_string())
    print("divergent:", int(jnp.sum(draws.divergent)))
    rhat = arviz.rhat(draws.to_arviz())
    print("max R-hat:", max(float(rhat[name]) for name in draws.samples))
    pooled = draws.flat_samples()
    print("posterior:", {k: f"{v.mean():.4g} ± {v.std():.2g}" for k, v in pooled.items()})
    fitted = {k: f"{float(v):.4g} ± {float(fast.stderr[k]):.2g}" for k, v in fast.params.items()}
    print("fit:", fitted)
    figure = simlab.plot.corner(draws, names=PARAMS)
    figure.savefig(FIGURES / "fit_corner.png")
    plt.close(figure)
    ax = simlab.plot.fit_curves(
        fast,
        DATA.ts,
        DATA.observations,
        posterior=draws,
        prediction_band=False,
        time_label=YEARS,
        value_label="thousands of pelts",
    )
    ax.figure.savefig(FIGURES / "fit_posterior_band.png")
    plt.close(ax.figure)


EXPERIMENT = """
description = "Lotka-Volterra fitted to its own noisy snapshots; NUTS posterior"

[model]
name = "LotkaVolterra"
parameters = { alpha = 0.5, beta = 0.025, gamma = 0.9, delta = 0.025 }

[initial_state]
prey = 30.0
predator = 4.0

[time]
stop = 15.0
num_points = 16

[solver]
name = "tsit5"
rtol = 1e-6
atol = 1e-6

[data]
synthetic = true
true_parameters = { alpha = 0.55, gamma = 0.85 }
noise = 3.0
seed = 1

[fit]
parameters = ["alpha", "gamma"]
bounds = { alpha = [0.2, 1.5], gamma = [0.2, 2.0] }

[fit.sampling]
num_samples = 300
num_warmup = 200
num_chains = 4
num_predictive = 200

[[figures]]
kind = "corner"

[[figures]]
kind = "posterior_predictive"
xlabel = "time"
ylabel = "population"
"""


def experiment() -> None:
    """The posterior figures of an experiment file, drawn by `simlab run` itself."""
    import simlab.experiment as experiments
    from simlab import cli
    from simlab.experiment._folder import read_run

    with tempfile.TemporaryDirectory() as scratch:
        path = pathlib.Path(scratch) / "posterior.toml"
        path.write_text(EXPERIMENT, encoding="utf-8")
        if cli.main(["run", str(path), "--out", str(pathlib.Path(scratch) / "run")]) != 0:
            raise SystemExit("the experiment failed")
        run = read_run(pathlib.Path(scratch) / "run")
        print(cli.printable(experiments.show(run.folder)))
        for name, entry in run.metrics["sampling"]["summary"].items():
            print(name, {k: entry[k] for k in ("mean", "sd", "r_hat", "ess_bulk")})
        for source, target in (("corner", "corner"), ("posterior_predictive", "posterior")):
            shutil.copyfile(
                run.figures_folder / f"{source}.png", FIGURES / f"fit_experiment_{target}.png"
            )


PARTS = {
    "missing": missing,
    "noise": noise,
    "multistart": multistart,
    "posterior": posterior,
    "experiment": experiment,
}


def main(parts: list[str]) -> None:
    for part in parts or PARTS:
        PARTS[part]()


if __name__ == "__main__":
    main(sys.argv[1:])
