"""Fit the Lotka–Volterra model to the Hudson's Bay Company lynx–hare records, 1900–1920.

Run: `python examples/lynx_hare_fit.py` (writes lynx_hare_fit.png next to where it runs).
"""

import jax

jax.config.update("jax_enable_x64", True)

import simlab  # noqa: E402
import simlab.plot  # noqa: E402


def main() -> None:
    data = simlab.datasets.lynx_hare()
    start = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02)
    result = simlab.fit(
        start,
        data.ts,
        data.observations,
        y0=data.observations[0],
        params=["alpha", "beta", "gamma", "delta"],
        fit_y0=True,  # the first year's counts are noisy too
    )
    print(f"converged in {int(result.num_steps)} steps, loss {float(result.loss):.4g}")
    for name, value in result.params.items():
        print(f"{name:>6} = {float(value):.4f} ± {float(result.stderr[name]):.4f}")
    print(f"    y0 = {result.y0} ± {result.y0_stderr}")
    ax = simlab.plot.fit_curves(
        result,
        data.ts,
        data.observations,
        time_label="years since 1900",
        value_label="pelts (thousands)",
    )
    ax.figure.savefig("lynx_hare_fit.png")


if __name__ == "__main__":
    main()
