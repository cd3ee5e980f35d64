"""Makes the figure of docs/decomposition.md: blocks and halos, and a run split over a 2 × 2 mesh.

Run from the repository root: `python docs/scripts/decomposition_figure.py`.
"""

import pathlib

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_num_cpu_devices", 4)

import jax.numpy as jnp  # noqa: E402
import matplotlib.patches as mpatches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import simlab  # noqa: E402
from simlab.decomposition import Decomposed, decomposition_mesh  # noqa: E402
from simlab.plot._style import COLOURS, style  # noqa: E402

FIGURES = pathlib.Path(__file__).parents[1] / "figures"
CELLS = (12, 8)  # the schematic's global grid
BLOCK = (6, 4)  # one block of a 2 x 2 mesh
GREY = "#999999"
FINAL_TIME = 5000.0


def _cell(ax, i, j, **kwargs):
    ax.add_patch(mpatches.Rectangle((i, j), 1, 1, **kwargs))


def _block_colour(i, j):
    return COLOURS[(i // BLOCK[0]) * 2 + (j // BLOCK[1])]


def schematic(ax):
    """The global grid in four coloured blocks; the ghost ring of the lower-left block."""
    for i in range(CELLS[0]):
        for j in range(CELLS[1]):
            _cell(ax, i, j, facecolor=_block_colour(i, j), alpha=0.35, edgecolor="white")
    # Ghost ring of block (0, 0): cells -1 and BLOCK along each axis.
    for i in range(-1, BLOCK[0] + 1):
        for j in range(-1, BLOCK[1] + 1):
            inside = 0 <= i < BLOCK[0] and 0 <= j < BLOCK[1]
            if inside or (i in (-1, BLOCK[0]) and j in (-1, BLOCK[1])):
                continue  # the stencils never read corner ghosts
            from_neighbour = i == BLOCK[0] or j == BLOCK[1]
            colour = _block_colour(i, j) if from_neighbour else GREY
            _cell(ax, i, j, facecolor="none", edgecolor=colour, hatch="///", linewidth=1.2)
    ax.add_patch(mpatches.Rectangle((0, 0), *BLOCK, fill=False, edgecolor="black", lw=2.2))
    for x in (0, BLOCK[0], CELLS[0]):
        ax.plot([x, x], [0, CELLS[1]], color="black", lw=0.8)
    for y in (0, BLOCK[1], CELLS[1]):
        ax.plot([0, CELLS[0]], [y, y], color="black", lw=0.8)
    arrow = dict(arrowstyle="->", lw=1.5, color="black")
    ax.annotate("", xy=(BLOCK[0] + 0.5, 2.5), xytext=(BLOCK[0] + 2.6, 2.5), arrowprops=arrow)
    ax.text(BLOCK[0] + 2.7, 2.5, "ppermute\n(mesh axis x)", va="center", fontsize=8)
    device_labels = {(0, 0): (3.0, 2.0), (1, 0): (9.0, 0.8), (0, 1): (4.9, 5.9), (1, 1): (9.0, 6.0)}
    ax.annotate("", xy=(2.5, BLOCK[1] + 0.5), xytext=(2.5, BLOCK[1] + 2.6), arrowprops=arrow)
    ax.text(2.5, BLOCK[1] + 2.7, "ppermute\n(mesh axis y)", ha="center", fontsize=8)
    ax.text(-1.3, 2.0, "boundary\ncondition", ha="right", va="center", fontsize=8, color="#555")
    ax.text(3.0, -1.35, "boundary condition", ha="center", va="top", fontsize=8, color="#555")
    for (bi, bj), (x, y) in device_labels.items():
        ax.text(
            x, y, f"device\n({bi}, {bj})", ha="center", va="center", fontsize=9, fontweight="bold"
        )
    ax.set_xlim(-4.2, CELLS[0] + 0.5)
    ax.set_ylim(-2.5, CELLS[1] + 0.5)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("A 12 × 8 grid on a 2 × 2 mesh: the halo of device (0, 0)")


def gray_scott_run():
    """Gray–Scott on 64 × 64 cells split over 2 × 2 devices, and the same on one device."""
    grid = simlab.Grid((64, 64), extent=64.0)
    model = simlab.models.GrayScott(
        feed_rate=0.035, kill_rate=0.065, diffusivity_u=0.2, diffusivity_v=0.1, grid=grid
    )
    u, v = np.ones(grid.shape), np.zeros(grid.shape)
    # A seed straddling both block edges, so that the spots grow across them.
    u[28:36, 28:36], v[28:36, 28:36] = 0.5, 0.25
    v[28:36, 28:36] += 0.01 * np.random.default_rng(0).uniform(size=(8, 8))
    y0 = jnp.asarray(np.stack([u, v]))
    ts = jnp.array([0.0, FINAL_TIME])
    decomposed = Decomposed(model, decomposition_mesh((2, 2)))
    settings = dict(solver="euler", adaptive=False, max_steps=20_000, throw=False)
    sharded = simlab.simulate(decomposed, decomposed.shard(y0), ts, **settings).ys[-1]
    one_device = simlab.simulate(model, y0, ts, **settings).ys[-1]
    return decomposed.gather(sharded), np.asarray(one_device)


def field_panel(ax, sharded, one_device):
    image = ax.imshow(sharded[1].T, origin="lower", extent=(0, 64, 0, 64), cmap="viridis")
    for edge in (32,):
        ax.axvline(edge, color="white", ls="--", lw=1.2)
        ax.axhline(edge, color="white", ls="--", lw=1.2)
    difference = float(np.max(np.abs(sharded - one_device)))
    ax.set_title(
        f"Gray–Scott v at t = {FINAL_TIME:g} on 2 × 2 devices\nmax |split − one device| = "
        f"{difference:.1e}"
    )
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.grid(False)
    plt.colorbar(image, ax=ax, shrink=0.8)


def main():
    sharded, one_device = gray_scott_run()
    with style():
        figure, (left, right) = plt.subplots(
            1, 2, figsize=(11, 4.8), gridspec_kw=dict(width_ratios=[1.25, 1])
        )
        schematic(left)
        field_panel(right, sharded, one_device)
        figure.savefig(FIGURES / "decomposition_blocks.png")


if __name__ == "__main__":
    main()
