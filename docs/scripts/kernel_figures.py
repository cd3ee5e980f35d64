"""Draws docs/figures/kernel_tiles.png: how a kernel's program reads its window (tile plus
halo) from the padded field, and how temporal blocking shrinks the valid region.

Run from the repository root: `.venv/bin/python docs/scripts/kernel_figures.py`.
"""

import os
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.patches as patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from simlab.plot._style import COLOURS, style  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parents[1] / "figures" / "kernel_tiles.png"
INTERIOR, TILE = 12, 4


def _cells(ax, size, offset, **kwargs):
    for i in range(size):
        for j in range(size):
            ax.add_patch(patches.Rectangle((offset + i, offset + j), 1, 1, **kwargs))


def _tiles_panel(ax):
    width = 1
    _cells(ax, INTERIOR + 2 * width, 0, facecolor="#eeeeee", edgecolor="white", lw=0.8)
    _cells(ax, INTERIOR, width, facecolor="#ffffff", edgecolor="#dddddd", lw=0.8)
    for k in range(0, INTERIOR + 1, TILE):  # tile boundaries
        ax.plot([width + k] * 2, [width, width + INTERIOR], color="0.4", lw=1.2)
        ax.plot([width, width + INTERIOR], [width + k] * 2, color="0.4", lw=1.2)
    for (ti, tj), colour in (((1, 1), COLOURS[0]), ((2, 1), COLOURS[1])):
        x0, y0 = width + ti * TILE, width + tj * TILE
        ax.add_patch(patches.Rectangle((x0, y0), TILE, TILE, facecolor=colour, alpha=0.35))
        ax.add_patch(
            patches.Rectangle(
                (x0 - width, y0 - width),
                TILE + 2 * width,
                TILE + 2 * width,
                fill=False,
                edgecolor=colour,
                lw=2.2,
            )
        )
    ax.set_title("tiles (shaded) and their windows (outlined)\nwindows overlap by 2 halo cells")
    ax.text(0, -0.4, "grey: ghost cells filled from the boundary conditions", fontsize=8, va="top")


def _temporal_panel(ax):
    steps = 3
    size = TILE + 2 * steps
    colours = ["#dddddd", COLOURS[5], COLOURS[2], COLOURS[0]]
    for s in range(steps + 1):
        _cells(
            ax,
            size - 2 * s,
            s,
            facecolor=colours[s],
            edgecolor="white",
            lw=0.8,
            alpha=0.45 + 0.15 * s,
        )
    ax.add_patch(
        patches.Rectangle((steps, steps), TILE, TILE, fill=False, edgecolor=COLOURS[1], lw=2.2)
    )
    ax.set_title(
        f"temporal blocking, {steps} steps in one launch\neach step leaves one ring fewer valid"
    )
    ax.text(
        0,
        -0.4,
        "window = tile + 3-cell halo; rings stay valid for 0, 1, 2, 3 steps\n"
        "(grey, light blue, green, blue); outlined: the tile written back",
        fontsize=8,
        va="top",
    )


def main():
    with style():
        figure, axes = plt.subplots(1, 2, figsize=(9.5, 4.8))
        _tiles_panel(axes[0])
        _temporal_panel(axes[1])
        for ax in axes:
            ax.set_aspect("equal")
            ax.autoscale_view()
            ax.axis("off")
        temporary = OUT.with_name(f".{OUT.stem}.tmp.png")
        figure.savefig(temporary)
        os.replace(temporary, OUT)
        plt.close(figure)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
