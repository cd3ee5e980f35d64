"""Figures of fields on a `simlab.Grid`: an image with a colour bar, a row of snapshots, a
space-time image of a 1-D field's history, a GIF."""

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


def space_time(
    trajectory,
    grid=None,
    *,
    coordinates=None,
    channel: int | None = None,
    label: str = "u",
    position_label: str = "x",
    time_label: str = "time",
    cmap=None,
    ax=None,
):
    """Draws the history of a 1-D field as an image: position across, time up, colour bar.

    Each cell at each save time is one tile (`pcolormesh` with nearest shading: an image,
    also right for unevenly spaced save times); chaos, travelling waves and fronts show as
    textures, slanted stripes and edges.

    **Arguments:**

    - `trajectory`: a [`simlab.Trajectory`][] of a 1-D grid model, `ys` of shape `(T, n)`
      (or `(T, channels, n)` with `channel`).
    - `grid`: the model's 1-D [`simlab.Grid`][], for the position axis; or give
      `coordinates` (the cell centres), or neither (cell indices).
    - `channel`: which field of a multi-field state.
    - `label`: what the field is, for the colour bar (give its unit).
    - `position_label`, `time_label`: axis labels.
    - `cmap`: a colour map (default: simlab's sequential map).
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes.

    !!! example

        ```python
        grid = simlab.Grid((64,), extent=1.0, boundary="dirichlet")
        (x,) = grid.coordinates()
        trajectory = simlab.simulate(simlab.models.Heat(diffusivity=0.01, grid=grid),
                                     jnp.sin(jnp.pi * x), jnp.linspace(0, 5, 51))
        ax = simlab.plot.space_time(trajectory, grid, label="temperature")
        ```
    """
    ts, ys = np.asarray(trajectory.ts), _frames(trajectory.ys, channel)
    if ys.ndim != 2:
        raise ValueError(f"space_time needs a 1-D field, ys of shape (T, n); got {ys.shape}.")
    if grid is not None and coordinates is not None:
        raise ValueError("give space_time a grid or coordinates, not both.")
    if grid is not None:
        if grid.shape != ys.shape[1:]:
            raise ValueError(
                f"space_time draws a 1-D field on the grid of shape {grid.shape}; got states of "
                f"shape {ys.shape[1:]}."
            )
        coordinates = grid.coordinates()[0]
    xs = np.arange(ys.shape[1], dtype=float) if coordinates is None else np.asarray(coordinates)
    if xs.shape != (ys.shape[1],):
        raise ValueError(f"coordinates must have shape ({ys.shape[1]},); got {xs.shape}.")
    figure, ax = new_axes(ax, figsize=(5.4, 3.8))
    with style():
        image = ax.pcolormesh(xs, ts, ys, shading="nearest", cmap=cmap)
        figure.colorbar(image, ax=ax, label=label)
        ax.set_xlabel(position_label)
        ax.set_ylabel(time_label)
        ax.grid(False)
    return ax


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
