"""Makes the figures of docs/sweeps.md: the damped pendulum's settling time over a grid.

Run from the repository root: `python docs/scripts/sweep_figures.py`.
"""

import pathlib

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import simlab  # noqa: E402
import simlab.plot  # noqa: E402

FIGURES = pathlib.Path(__file__).parents[1] / "figures"
GRAVITY = 9.81
TOLERANCE = 0.02  # radians: "settled" once the swing stays below about one degree


def settling_time(trajectory):
    """The first save time after which |angle| stays below TOLERANCE (NaN if never)."""
    unsettled = jnp.abs(trajectory.component("angle")) > TOLERANCE
    last_unsettled = jnp.max(jnp.where(unsettled, jnp.arange(unsettled.size), -1))
    settled_in_time = last_unsettled < unsettled.size - 1
    return {
        "settling_time": jnp.where(
            settled_in_time,
            trajectory.ts[jnp.minimum(last_unsettled + 1, unsettled.size - 1)],
            jnp.nan,
        )
    }


def run(lengths, dampings):
    model = simlab.models.DampedPendulum(length=1.0, damping=0.5)
    return simlab.sweep(
        model,
        {"length": lengths, "damping": dampings},
        jnp.array([1.0, 0.0]),  # released from rest at 1 rad (57 degrees)
        jnp.linspace(0.0, 40.0, 801),
        observable=settling_time,
        rtol=1e-8,
        atol=1e-10,
    )


def critical_damping(lengths):
    return 2 * np.sqrt(GRAVITY / lengths)


def heatmap():
    lengths = np.linspace(0.1, 3.0, 80)
    result = run(lengths, np.geomspace(0.25, 32.0, 80))
    print(result.summary(), result.stats)
    with simlab.plot.style():
        ax = simlab.plot.sweep_heatmap(
            result,
            "settling_time",
            x="length",
            y="damping",
            log_colour=True,
            colour_label="settling time [s]",
        )
        ax.set_yscale("log")
        ax.plot(
            lengths,
            critical_damping(lengths),
            color="white",
            linestyle="--",
            label=r"critical damping $c = 2\sqrt{g/L}$",
        )
        ax.set_ylim(0.25, 32.0)
        ax.legend(loc="lower right")
        ax.set_title("Damped pendulum released at 1 rad: time to settle within 0.02 rad")
        ax.figure.savefig(FIGURES / "sweep_pendulum_heatmap.png")


def lines():
    lengths = np.array([0.25, 1.0, 4.0])
    result = run(lengths, np.geomspace(0.25, 16.0, 60))
    with simlab.plot.style():
        ax = simlab.plot.sweep_lines(result, "settling_time", x="damping", hue="length")
        for colour, value in zip(simlab.plot.COLOURS, critical_damping(lengths), strict=False):
            ax.axvline(value, color=colour, linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_ylabel("settling time [s]")
        ax.set_title("Fastest settling just below critical damping (dotted)")
        ax.figure.savefig(FIGURES / "sweep_pendulum_lines.png")


if __name__ == "__main__":
    FIGURES.mkdir(exist_ok=True)
    heatmap()
    lines()
