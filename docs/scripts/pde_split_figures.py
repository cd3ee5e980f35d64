"""Makes the Kuramoto–Sivashinsky space–time figure of docs/pde.md (ETDRK4 in Fourier space).

Run from the repository root: `python docs/scripts/pde_split_figures.py`.
"""

import pathlib

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import simlab  # noqa: E402
import simlab.plot  # noqa: E402
from simlab.integrate import ETDRK4  # noqa: E402

FIGURES = pathlib.Path(__file__).parents[2] / "docs" / "figures"


def kuramoto_sivashinsky_figure():
    # Kassam & Trefethen's set-up: x in [0, 32π), u0 = cos(x/16)(1 + sin(x/16)).
    grid = simlab.Grid((128,), extent=32 * np.pi)
    (x,) = grid.coordinates()
    model = simlab.models.KuramotoSivashinsky(grid=grid)
    y0 = jnp.cos(x / 16) * (1 + jnp.sin(x / 16))
    ts = jnp.linspace(0.0, 150.0, 301)
    ys, result, stats = ETDRK4().solve(model, ts, y0, None, dt0=0.25, max_steps=1000)
    # The slope v = u_x obeys the conservative form v_t = -v v_x - v_xx - v_xxxx.
    slope = simlab.grid.spectral_gradient(ys, grid)[0]
    trajectory = simlab.Trajectory(ts=ts, ys=slope, result=result, stats=stats)
    ax = simlab.plot.space_time(trajectory, coordinates=x, label="slope ∂u/∂x")
    ax.set_title("Kuramoto–Sivashinsky by ETDRK4 (dt = 1/4, 128 cells)")
    ax.figure.savefig(FIGURES / "pde_kuramoto_sivashinsky.png", bbox_inches="tight")


if __name__ == "__main__":
    kuramoto_sivashinsky_figure()
