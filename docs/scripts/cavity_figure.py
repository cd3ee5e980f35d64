"""Makes docs/figures/cavity_re100.png: the lid-driven cavity at Re = 100 on 64² cells,
marched from rest to steady state (t = 25) by RK4; its speed with streamlines beside u on
the vertical centreline against Ghia, Ghia & Shin (1982), Table I.

Run from the repository root: `python docs/scripts/cavity_figure.py` (about half a minute
on two CPU cores).
"""

import pathlib

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

import simlab  # noqa: E402
import simlab.plot  # noqa: E402

FIGURES = pathlib.Path(__file__).parents[2] / "docs" / "figures"


def main():
    model, y0 = simlab.models.WalledNavierStokes2D.lid_driven_cavity(num_cells=64, reynolds=100.0)
    ts = jnp.array([0.0, 5.0, 10.0, 25.0])
    trajectory = simlab.simulate(model, y0, ts, solver="rk4", adaptive=False)
    with simlab.plot.style():
        figure, (left, right) = plt.subplots(
            1, 2, figsize=(9.5, 4.3), layout="constrained", width_ratios=(1.25, 1)
        )
    simlab.plot.walled_flow_field(trajectory.ys[-1], model, density=1.4, ax=left)
    left.set_title("speed and streamlines, t = 25")
    simlab.plot.centreline_profile(
        trajectory.ys[1:], model, reference=simlab.datasets.ghia_cavity_centreline(100),
        reference_label="Ghia, Ghia & Shin (1982)", ax=right,
    )  # fmt: skip
    right.set_title("u on x = 1/2 at t = 5, 10, 25")
    figure.suptitle("Lid-driven cavity, Re = 100, 64² cells")
    figure.savefig(FIGURES / "cavity_re100.png", bbox_inches="tight")


if __name__ == "__main__":
    main()
