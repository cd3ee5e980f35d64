"""Makes the likelihood figures of the fitting tutorial (docs/figures/fit_waterfall.png,
fit_profiles.png, fit_corner.png) and prints the numbers quoted next to them.

Run from the repository root: `python docs/scripts/likelihood_figures.py`.
"""

import pathlib

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import jax.random as jr  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import simlab  # noqa: E402
import simlab.plot  # noqa: E402

FIGURES = pathlib.Path(__file__).resolve().parents[1] / "figures"
PARAMS = ["alpha", "beta", "gamma", "delta"]
BOUNDS = {"alpha": (0.1, 2.0), "beta": (0.005, 0.1), "gamma": (0.1, 2.0), "delta": (0.005, 0.1)}


def main() -> None:
    data = simlab.datasets.lynx_hare()
    start = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02)
    common = dict(y0=data.observations[0], params=PARAMS, fit_y0=True)
    for noise in ("gaussian", "lognormal"):
        result = simlab.fit(start, data.ts, data.observations, noise=noise, **common)
        print(
            noise,
            {k: round(float(v), 4) for k, v in result.params.items()},
            f"logL {float(result.log_likelihood):.2f} AIC {float(result.aic):.2f}",
        )

    multi = simlab.fit(
        start,
        data.ts,
        data.observations,
        noise="lognormal",
        starts=200,
        bounds=BOUNDS,
        key=jr.key(0),
        throw=False,
        **common,
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

    fast = simlab.fit(
        start,
        data.ts,
        data.observations,
        noise="lognormal",
        bounds=BOUNDS,
        simulate_options=dict(solver="rk4", adaptive=False, dt0=0.05),
        **common,
    )
    posterior = simlab.sample(fast, num_samples=500, num_warmup=300, num_chains=4, key=jr.key(1))
    print(posterior.summary())
    figure = simlab.plot.corner(posterior, names=PARAMS)
    figure.savefig(FIGURES / "fit_corner.png")
    plt.close(figure)


if __name__ == "__main__":
    main()
