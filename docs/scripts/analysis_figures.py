"""Makes the figures of docs/analysis.md: Sobol' indices of an epidemic, and the
bifurcation diagram of the Brusselator.

Run from the repository root: `python docs/scripts/analysis_figures.py`.
"""

import pathlib

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import simlab  # noqa: E402
import simlab.plot  # noqa: E402

FIGURES = pathlib.Path(__file__).resolve().parents[1] / "figures"
RANGES = {"beta": [0.25, 0.5], "gamma": [0.05, 0.15], "I": [1e-4, 1e-2]}
MODEL = simlab.models.SIR(beta=0.3, gamma=0.1, population=1.0)
Y0 = jnp.array([0.99, 0.01, 0.0])
FAST = dict(solver="tsit5", integrator="lean", progress=False)


def peak(trajectory):
    infected = trajectory.component("I")
    top = jnp.argmax(infected)
    return {"peak_time": trajectory.ts[top], "peak_size": infected[top]}


def infected(trajectory):
    return {"infected": trajectory.component("I")}


def peak_indices():
    indices = simlab.sensitivity(
        MODEL,
        RANGES,
        Y0,
        jnp.linspace(0.0, 300.0, 1501),
        observable=peak,
        num_samples=2**10,
        key=jax.random.key(0),
        **FAST,
    )
    print(indices[["peak_time_S1", "peak_time_ST", "peak_size_S1", "peak_size_ST"]])
    with simlab.plot.style():
        figure, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
        simlab.plot.sensitivity(indices, "peak_time", ax=axes[0])
        simlab.plot.sensitivity(indices, "peak_size", ax=axes[1])
        axes[0].set_title("time of the peak")
        axes[1].set_title("size of the peak")
        axes[1].set_ylabel("")
        figure.savefig(FIGURES / "analysis_sir_peak.png")


def infected_indices():
    indices = simlab.sensitivity(
        MODEL,
        RANGES,
        Y0,
        jnp.linspace(0.0, 150.0, 76),
        observable=infected,
        num_samples=2**10,
        key=jax.random.key(1),
        time_outputs=("infected",),
        **FAST,
    )
    with simlab.plot.style():
        ax = simlab.plot.sensitivity(indices, "infected")
        ax.set_title("fraction infected, I(t)")
        ax.set_xlabel("time (days)")
        ax.figure.set_size_inches(7.5, 3.5)
        ax.figure.savefig(FIGURES / "analysis_sir_infected.png")


def bifurcation_diagram():
    model = simlab.models.Brusselator(a=1.0, b=1.0)
    branch = simlab.continuation(model, "b", jnp.linspace(1.0, 3.5, 101), jnp.array([1.0, 1.0]))
    hopf = branch.bifurcations[0]
    print(f"Hopf point at b = {hopf.value:.10f} (1 + a^2 = 2): error {abs(hopf.value - 2):.1e}")
    with simlab.plot.style():
        ax = simlab.plot.bifurcation(branch, "x")
        ax.set_title("Brusselator, a = 1")
        ax.figure.savefig(FIGURES / "analysis_brusselator_bifurcation.png")


def main() -> None:
    FIGURES.mkdir(exist_ok=True)
    peak_indices()
    infected_indices()
    bifurcation_diagram()


if __name__ == "__main__":
    main()
