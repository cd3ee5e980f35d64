"""Fields: a gallery of thumbnails over a two-parameter sweep, and an animated GIF."""

import pathlib

import numpy as np

from ..io import atomic_write
from ._style import SEQUENTIAL_CMAP, style
from ._sweep import _label


def sweep_gallery(
    result,
    variable: str,
    *,
    channel: int | None = None,
    x=None,
    y=None,
    cmap=None,
    size: float = 1.2,
    label: str | None = None,
):
    """Draws one thumbnail of a field observable per member of a two-parameter grid sweep.

    Columns follow `x`, rows follow `y` (largest at the top, as on a heatmap); every
    thumbnail shares one colour scale, so patterns compare at a glance. Failed members are
    left blank and labelled.

    **Arguments:**

    - `result`: a [`simlab.SweepResult`][] from a `mode="grid"` sweep over two names.
    - `variable`: an observable holding a 2-D field per member (or `(channels, nx, ny)`).
    - `channel`: which leading channel to draw, for multi-field states.
    - `x`, `y`: the swept names along columns and rows (default: the two swept names).
    - `cmap`: a colour map (default: simlab's sequential map).
    - `size`: the side of one thumbnail, in inches.
    - `label`: the colour bar's label (default: the variable and channel).

    **Returns:** the Figure.

    !!! example

        ```python
        result = simlab.sweep(gray_scott, {"feed_rate": F, "kill_rate": k}, y0, ts,
                              observable=lambda t: {"v": t.ys[-1, 1]})
        figure = simlab.plot.sweep_gallery(result, "v")
        ```
    """
    import matplotlib.pyplot as plt

    if result.mode != "grid" or len(result.names) != 2:
        raise ValueError(
            f"a gallery needs a grid sweep over two names; this sweep has mode {result.mode!r} "
            f"over {list(result.names)}."
        )
    if variable not in result.observables:
        raise ValueError(
            f"unknown observable {variable!r}; this sweep has {list(result.observables)}."
        )
    x = x or result.names[0]
    y = y or next(name for name in result.names if name != x)
    fields = np.asarray(result.observables[variable])
    if channel is not None:
        fields = fields[:, channel]
    if fields.ndim != 3:
        raise ValueError(
            f"observable {variable!r} has shape {fields.shape[1:]} per member; a gallery needs "
            "a 2-D field (pick a channel with channel=)."
        )
    x_values, y_values = result.parameter(x), result.parameter(y)
    x_axis, y_axis = np.unique(x_values), np.unique(y_values)
    finite = fields[np.isfinite(fields)]
    low, high = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
    with style():
        figure, axes = plt.subplots(
            len(y_axis),
            len(x_axis),
            figsize=(size * len(x_axis) + 1.2, size * len(y_axis) + 0.6),
            squeeze=False,
            gridspec_kw={"wspace": 0.05, "hspace": 0.05},
        )
        image = None
        for member, field in enumerate(fields):
            column = int(np.searchsorted(x_axis, x_values[member]))
            row = len(y_axis) - 1 - int(np.searchsorted(y_axis, y_values[member]))
            ax = axes[row, column]
            if np.all(np.isfinite(field)):
                image = ax.imshow(
                    field.T,
                    origin="lower",
                    cmap=cmap or SEQUENTIAL_CMAP,
                    vmin=low,
                    vmax=high,
                    interpolation="nearest",
                )
            else:
                ax.text(0.5, 0.5, "failed", ha="center", va="center", transform=ax.transAxes)
        for row, ax_row in enumerate(axes):
            for column, ax in enumerate(ax_row):
                ax.set_xticks([])
                ax.set_yticks([])
                ax.grid(False)
                if row == len(y_axis) - 1:
                    ax.set_xlabel(f"{x_axis[column]:.3g}", fontsize=8)
                if column == 0:
                    ax.set_ylabel(f"{y_axis[len(y_axis) - 1 - row]:.3g}", fontsize=8)
        figure.supxlabel(_label(result, x))
        figure.supylabel(_label(result, y))
        if image is not None:
            if label is None:
                label = variable if channel is None else f"{variable}[{channel}]"
            figure.colorbar(image, ax=axes, shrink=0.6, label=label)
    return figure


def animate(
    frames, path, *, ts=None, label: str = "field", coordinates=None, fps: int = 8, cmap=None
):
    """Writes an animated GIF of a field over time: images of 2-D fields, curves of 1-D ones.

    The file appears whole or not at all (written under a temporary name, then renamed).

    **Arguments:**

    - `frames`: shape `(T, nx, ny)` (images) or `(T, n)` (curves), e.g. a grid model's
      `trajectory.ys` (pick a channel first).
    - `path`: where to write the `.gif`.
    - `ts`: the time of each frame, shown in the title.
    - `label`: what the field is (colour-bar or y-axis label).
    - `coordinates`: for 1-D fields, the cell centres (default: the index).
    - `fps`: frames per second.
    - `cmap`: a colour map for images.

    **Returns:** the path written.

    !!! example

        ```python
        trajectory = simlab.simulate(gray_scott, y0, jnp.linspace(0, 2000, 41))
        simlab.plot.animate(trajectory.ys[:, 1], "gray_scott.gif", ts=trajectory.ts, label="v")
        ```
    """
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation, PillowWriter

    frames = np.asarray(frames)
    if frames.ndim not in (2, 3) or frames.shape[0] < 2:
        raise ValueError(
            f"frames must have shape (T, n) or (T, nx, ny) with T >= 2; got {frames.shape}."
        )
    path = pathlib.Path(path)
    if path.suffix.lower() != ".gif":
        raise ValueError(
            f"animate writes GIF files; give a path ending in .gif, not {str(path)!r}."
        )
    finite = frames[np.isfinite(frames)]
    low, high = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
    with style():
        figure, ax = plt.subplots(figsize=(4.2, 3.6) if frames.ndim == 3 else (5, 3.4))
        if frames.ndim == 3:
            artist = ax.imshow(
                frames[0].T, origin="lower", cmap=cmap or SEQUENTIAL_CMAP, vmin=low, vmax=high
            )
            figure.colorbar(artist, ax=ax, label=label)
            ax.grid(False)
            ax.set(xlabel="x (cells)", ylabel="y (cells)")
        else:
            xs = np.arange(frames.shape[1]) if coordinates is None else np.asarray(coordinates)
            (artist,) = ax.plot(xs, frames[0])
            margin = 0.05 * (high - low or 1.0)
            ax.set(ylim=(low - margin, high + margin), xlabel="position", ylabel=label)

        def update(index):
            if frames.ndim == 3:
                artist.set_data(frames[index].T)
            else:
                artist.set_ydata(frames[index])
            if ts is not None:
                ax.set_title(f"t = {float(np.asarray(ts)[index]):.4g}")
            return (artist,)

        animation = FuncAnimation(figure, update, frames=frames.shape[0], blit=False)
        writer = PillowWriter(fps=fps)
        atomic_write(path, lambda temporary: animation.save(temporary, writer=writer))
        plt.close(figure)
    return path
