"""Figures of fields on a `simlab.Grid`: an image with a colour bar, a row of snapshots, a GIF."""

import numpy as np

from ._gallery import animate
from ._style import new_axes, style


def field_image(field, grid=None, *, ax=None, label: str = "", cmap=None, vmin=None, vmax=None):
    """Draws a 2-D field as an image with a colour bar, in the grid's coordinates.

    **Arguments:**

    - `field`: an array of shape `grid.shape` (2-D), first axis along x.
    - `grid`: the [`simlab.Grid`][] (for the axes' extent); `None` draws in cell indices.
    - `ax`: the axes to draw on (default: a new figure).
    - `label`: what the field is, shown on the colour bar.
    - `cmap`, `vmin`, `vmax`: colour map and its range (default: the field's range).

    **Returns:** the Axes.

    !!! example

        ```python
        import simlab.plot

        ax = simlab.plot.field_image(trajectory.ys[-1, 1], grid, label="v")
        ax.figure.savefig("v.png")
        ```
    """
    values = np.asarray(field)
    if values.ndim != 2 or (grid is not None and values.shape != grid.shape):
        expected = "a 2-D array" if grid is None else f"shape {grid.shape}"
        raise ValueError(f"field_image draws {expected}; got shape {values.shape}.")
    figure, ax = new_axes(ax)
    with style():
        extent = None
        if grid is not None:
            (x0, y0), (width, height) = grid.origin, grid.extent
            extent = (x0, x0 + width, y0, y0 + height)
        image = ax.imshow(
            values.T,
            origin="lower",
            extent=extent,
            cmap=cmap,
            vmin=vmin,
            vmax=vmax,
            interpolation="nearest",
        )
        ax.grid(False)
        ax.set_xlabel("x" if grid is not None else "cell index (x)")
        ax.set_ylabel("y" if grid is not None else "cell index (y)")
        figure.colorbar(image, ax=ax, label=label, shrink=0.85)
    return ax


def field_snapshots(trajectory, grid, *, channel: int | None = None, indices=None, label=""):
    """Draws 2-D snapshots of a grid trajectory side by side, with one shared colour scale.

    **Arguments:**

    - `trajectory`: a [`simlab.Trajectory`][] of a grid model.
    - `grid`: the model's [`simlab.Grid`][].
    - `channel`: which field of a multi-field state (e.g. `1` for Gray–Scott's $v$).
    - `indices`: which save times to show (default: up to four, evenly spread).
    - `label`: what the field is, shown on the colour bar.

    **Returns:** the Figure.

    !!! example

        ```python
        figure = simlab.plot.field_snapshots(trajectory, grid, channel=1, label="v")
        ```
    """
    import matplotlib.pyplot as plt

    frames = _frames(trajectory.ys, channel)
    if indices is None:
        indices = np.unique(np.linspace(0, len(frames) - 1, min(4, len(frames))).astype(int))
    low, high = float(frames[indices].min()), float(frames[indices].max())
    with style():
        figure, axes = plt.subplots(
            1,
            len(indices),
            figsize=(3.0 * len(indices) + 0.8, 3.0),
            squeeze=False,
            constrained_layout=True,
        )
        for ax, index in zip(axes[0], indices, strict=True):
            field_image(frames[index], grid, ax=ax, vmin=low, vmax=high, label=label)
            ax.set_title(f"t = {float(trajectory.ts[index]):g}")
    return figure


def field_animation(trajectory, grid, path, *, channel: int | None = None, label="", fps=8):
    """Writes a GIF of a grid trajectory (images in 2-D, curves in 1-D), whole or not at all.

    **Arguments:**

    - `trajectory`: a [`simlab.Trajectory`][] of a grid model.
    - `grid`: the model's [`simlab.Grid`][].
    - `path`: where to write the `.gif`.
    - `channel`: which field of a multi-field state.
    - `label`, `fps`: the field's name and the frame rate.

    **Returns:** the path written.

    !!! example

        ```python
        simlab.plot.field_animation(trajectory, grid, "gray_scott.gif", channel=1, label="v")
        ```
    """
    frames = _frames(trajectory.ys, channel)
    coordinates = np.asarray(grid.coordinates()[0]) if grid.ndim == 1 else None
    return animate(
        frames, path, ts=np.asarray(trajectory.ts), label=label, coordinates=coordinates, fps=fps
    )


def _frames(ys, channel):
    frames = np.asarray(ys)
    if channel is not None:
        if frames.ndim < 3 or not 0 <= channel < frames.shape[1]:
            raise ValueError(
                f"channel {channel} does not exist: the states have shape {frames.shape[1:]}."
            )
        frames = frames[:, channel]
    return frames
