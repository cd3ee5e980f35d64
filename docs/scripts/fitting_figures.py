"""Makes the figures of the fitting tutorial (docs/figures/fit_*.png) and prints its table.

Run from the repository root: `python docs/scripts/fitting_figures.py`.
"""

import pathlib

import jax

jax.config.update("jax_enable_x64", True)

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import optax  # noqa: E402

import simlab  # noqa: E402
import simlab.plot  # noqa: E402

FIGURES = pathlib.Path(__file__).resolve().parents[1] / "figures"
PARAMS = ["alpha", "beta", "gamma", "delta"]


def main() -> None:
    data = simlab.datasets.lynx_hare()
    start = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02)
    common = dict(y0=data.observations[0], params=PARAMS, fit_y0=True)
    least_squares = simlab.fit(start, data.ts, data.observations, **common)
    gradient = simlab.fit(
        start,
        data.ts,
        data.observations,
        method="gradient",
        optimiser=optax.adam(0.02),
        max_steps=3000,
        throw=False,
        **common,
    )

    ax = simlab.plot.fit_curves(
        least_squares,
        data.ts,
        data.observations,
        time_label="years since 1900",
        value_label="pelts (thousands)",
    )
    ax.set_title("Lotka–Volterra fitted to the Hudson's Bay Company records (95% band)")
    ax.figure.savefig(FIGURES / "fit_lynx_hare.png", bbox_inches="tight")
    plt.close(ax.figure)

    figure, ax = simlab.plot.new_axes(figsize=(5.5, 3.4))
    simlab.plot.loss_curve(gradient, ax=ax)
    simlab.plot.loss_curve(least_squares, ax=ax)
    ax.lines[0].set_label(f"Adam ({int(gradient.num_steps)} steps)")
    ax.lines[1].set_color(simlab.plot.COLOURS[1])
    ax.lines[1].set_label(f"Levenberg–Marquardt ({int(least_squares.num_steps)} steps)")
    ax.set_xscale("log")
    ax.legend(frameon=False)
    ax.set_title("Lynx–hare fit: loss per optimiser step")
    figure.savefig(FIGURES / "fit_loss.png", bbox_inches="tight")
    plt.close(figure)

    print("| parameter | estimate | standard error |")
    print("|---|---|---|")
    for name in PARAMS:
        print(
            f"| `{name}` | {float(least_squares.params[name]):.4g} | "
            f"{float(least_squares.stderr[name]):.2g} |"
        )
    for name, value, error in zip(
        ("prey", "predator"), least_squares.y0, least_squares.y0_stderr, strict=True
    ):
        print(f"| `y0.{name}` | {float(value):.4g} | {float(error):.2g} |")
    print(f"loss {float(least_squares.loss):.6g} (LM), {float(gradient.loss):.6g} (Adam)")


if __name__ == "__main__":
    main()
