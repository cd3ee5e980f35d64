"""Makes the figures of docs/pde.md: Gray–Scott spots, the heat-equation convergence plot,
and the layered-diffusivity inverse problem.

Run from the repository root: `python docs/scripts/pde_figures.py`.
"""

import pathlib
import sys

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import simlab  # noqa: E402
import simlab.plot  # noqa: E402

ROOT = pathlib.Path(__file__).parents[2]
FIGURES = ROOT / "docs" / "figures"
sys.path.insert(0, str(ROOT / "examples"))

import heat_inverse  # noqa: E402


def gray_scott_figure():
    grid = simlab.Grid((128, 128), spacing=1.0)
    model = simlab.models.GrayScott(
        feed_rate=0.035, kill_rate=0.065, diffusivity_u=0.2, diffusivity_v=0.1, grid=grid
    )
    u, v = np.ones(grid.shape), np.zeros(grid.shape)
    u[60:68, 60:68], v[60:68, 60:68] = 0.5, 0.25
    v[60:68, 60:68] += 0.01 * np.random.default_rng(0).uniform(size=(8, 8))
    ts = jnp.array([0.0, 2000.0, 5000.0, 10000.0])
    trajectory = simlab.simulate(
        model,
        jnp.asarray(np.stack([u, v])),
        ts,
        solver="euler",
        adaptive=False,
        max_steps=20_000,
    )  # dt0=None: the largest stable Euler step, with a safety margin
    figure = simlab.plot.field_snapshots(trajectory, grid, channel=1, label="v")
    figure.suptitle("Gray–Scott, F = 0.035, k = 0.065: a seed splits into spots")
    figure.savefig(FIGURES / "pde_gray_scott.png")


def convergence_figure():
    sizes = np.array([8, 16, 32, 64, 128])
    diffusivity, wavenumber, end = 0.1, 2, 1.0
    figure, ax = simlab.plot.new_axes(figsize=(5.0, 3.8))
    for order, colour in ((2, simlab.plot.COLOURS[0]), (4, simlab.plot.COLOURS[1])):
        errors = []
        for size in sizes:
            grid = simlab.Grid((int(size),), extent=2 * np.pi)
            (x,) = grid.coordinates()
            model = simlab.models.Heat(diffusivity=diffusivity, grid=grid, order=order)
            trajectory = simlab.simulate(
                model,
                jnp.sin(wavenumber * x),
                jnp.array([0.0, end]),
                solver="rk4",
                adaptive=False,
                dt0=0.002,
                max_steps=1000,
            )
            exact = np.exp(-diffusivity * wavenumber**2 * end) * np.sin(wavenumber * x)
            errors.append(float(jnp.max(jnp.abs(trajectory.ys[-1] - exact))))
        slope = -np.polyfit(np.log(sizes[-3:]), np.log(errors[-3:]), 1)[0]
        ax.loglog(sizes, errors, "o-", color=colour, label=f"order {order}: slope {slope:.2f}")
        ax.loglog(sizes, errors[-1] * (sizes[-1] / sizes) ** order, ":", color=colour)
    ax.set_xlabel("cells N")
    ax.set_ylabel(r"max error at t = 1")
    ax.set_title(r"Heat equation: a Fourier mode vs $e^{-Dk^2t}$")
    ax.legend()
    figure.savefig(FIGURES / "pde_convergence.png")


def inverse_figure():
    observations = heat_inverse.synthetic_data()
    result = heat_inverse.recover(observations)
    fitted = np.asarray(result.params["layer_diffusivity"])
    stderr = np.asarray(result.stderr["layer_diffusivity"])
    grid = heat_inverse.GRID
    x = np.asarray(grid.coordinates()[0])
    with simlab.plot.style():
        figure, (data_ax, fit_ax) = plt.subplots(1, 2, figsize=(9.5, 3.6), constrained_layout=True)
    for index in (0, 2, 4, 8):
        label = f"t = {float(heat_inverse.TS[index]):.2f}"
        data_ax.plot(x, observations[0, index], ".", markersize=3, label=label)
    data_ax.set_xlabel("x")
    data_ax.set_ylabel("temperature (experiment 1)")
    data_ax.set_title("Noisy snapshots")
    data_ax.legend()
    layers = len(heat_inverse.TRUE_LAYERS)
    edges = np.linspace(0.0, 1.0, layers + 1)
    fit_ax.stairs(heat_inverse.TRUE_LAYERS, edges, label="true D(x)", color="black")
    centres = 0.5 * (edges[1:] + edges[:-1])
    fit_ax.errorbar(centres, fitted, yerr=2 * stderr, fmt="o", label="fitted ± 2 s.e.")
    fit_ax.set_xlabel("x")
    fit_ax.set_ylabel("diffusivity D")
    fit_ax.set_title("Recovered layered diffusivity")
    fit_ax.legend()
    figure.savefig(FIGURES / "pde_inverse.png")


if __name__ == "__main__":
    FIGURES.mkdir(exist_ok=True)
    for make_figure in sys.argv[1:] or ("convergence", "gray_scott", "inverse"):
        globals()[f"{make_figure}_figure"]()
