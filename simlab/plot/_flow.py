"""Figures of two-dimensional incompressible flow from its vorticity: the field with
streamlines, the kinetic energy spectrum with a reference slope, energy and enstrophy in
time."""

from fractions import Fraction

import numpy as np

from ..grid import energy_spectrum as _energy_spectrum, enstrophy, kinetic_energy, velocity
from ._fields import field_image
from ._style import COLOURS, DIVERGING_CMAP, new_axes, style

QUANTITIES = ("vorticity", "speed")


def flow_field(
    vorticity,
    grid,
    *,
    quantity: str = "vorticity",
    streamlines: bool = True,
    density: float = 1.2,
    ax=None,
):
    r"""Draws a 2-D flow as an image of its vorticity or speed, with streamlines.

    **Arguments:**

    - `vorticity`: $\omega$, shape `grid.shape` (e.g. `trajectory.ys[-1]`).
    - `grid`: the periodic 2-D [`simlab.Grid`][].
    - `quantity`: `"vorticity"` (diverging colours, symmetric about 0) or `"speed"`
      ($|\mathbf u|$, sequential colours).
    - `streamlines`: whether to draw the streamlines of $\mathbf u$ over the image.
    - `density`: their density (matplotlib's `streamplot`).
    - `ax`: the axes to draw on (default: a new figure).

    **Returns:** the Axes.

    !!! example

        ```python
        import simlab.plot

        grid = simlab.Grid((64, 64), extent=2 * jnp.pi)
        ax = simlab.plot.flow_field(simlab.models.taylor_green_vorticity(grid), grid)
        ```
    """
    if quantity not in QUANTITIES:
        raise ValueError(f"flow_field: quantity must be one of {QUANTITIES}; got {quantity!r}.")
    values = np.asarray(vorticity)
    if values.shape != grid.shape or grid.ndim != 2:
        raise ValueError(
            f"flow_field draws a 2-D vorticity field of shape {grid.shape}; got {values.shape}."
        )
    u, v = np.asarray(velocity(values, grid))
    figure, ax = new_axes(ax, figsize=(5.0, 4.2), layout="constrained")
    if quantity == "vorticity":
        limit = float(np.max(np.abs(values))) or 1.0
        field_image(values, grid, ax=ax, label="vorticity ω", cmap=DIVERGING_CMAP,
                    vmin=-limit, vmax=limit)  # fmt: skip
    else:
        field_image(np.hypot(u, v), grid, ax=ax, label="speed |u|", vmin=0.0)
    if streamlines:
        x, y = (np.asarray(c) for c in grid.coordinates())
        with style():
            ax.streamplot(x, y, u.T, v.T, density=density, color="black", linewidth=0.6,
                          arrowsize=0.7, broken_streamlines=True)  # fmt: skip
        ax.set_xlim(grid.origin[0], grid.origin[0] + grid.extent[0])
        ax.set_ylim(grid.origin[1], grid.origin[1] + grid.extent[1])
    ax.set_aspect("equal")
    return ax


def _slope_label(slope: float) -> str:
    fraction = Fraction(slope).limit_denominator(12)
    exponent = str(fraction.numerator) if fraction.denominator == 1 else f"{fraction}"
    return f"$k^{{{exponent}}}$"


def _reference_slope(ax, k, spectrum, slope: float) -> None:
    """Draws k**slope from twice the peak wavenumber of `spectrum` on, three times above the
    spectrum there: beside the curve, not on it."""
    start = min(2 * int(np.argmax(spectrum)) + 1, len(k) - 2)
    line_k = k[start:]
    line = 3 * spectrum[start] * (line_k / line_k[0]) ** slope
    ax.loglog(line_k, line, color="black", linestyle="--", linewidth=1.0,
              label=_slope_label(slope))  # fmt: skip


def energy_spectrum(vorticity, grid, *, slope: float | None = -3.0, labels=None, ax=None):
    r"""Draws the isotropic kinetic energy spectrum $E(k)$ on log–log axes, with a reference
    power law $k^{\text{slope}}$: $k^{-3}$ for the enstrophy cascade of 2-D turbulence
    (the default), $k^{-5/3}$ for the inverse energy cascade.

    The spectrum is [`simlab.grid.energy_spectrum`][]'s, drawn for $k > 0$ up to the
    largest wavenumber of the 2/3 dealiased box (beyond it the model keeps no energy). The
    reference line follows the last spectrum (the most developed, for a time series) from
    twice its peak wavenumber on, three times above it: beside the curve, not on it.

    **Arguments:**

    - `vorticity`: $\omega$, shape `grid.shape`, or a stack `(n, *grid.shape)` drawn as
      `n` curves (e.g. `trajectory.ys[::10]`).
    - `grid`: the periodic 2-D [`simlab.Grid`][].
    - `slope`: the reference power, or `None` for no reference line.
    - `labels`: one legend entry per curve (e.g. `"t = 5"`).
    - `ax`: the axes to draw on (default: a new figure).

    **Returns:** the Axes.

    !!! example

        ```python
        grid = simlab.Grid((64, 64), extent=2 * jnp.pi)
        w = simlab.models.random_vorticity(jax.random.PRNGKey(0), grid)
        ax = simlab.plot.energy_spectrum(w, grid, slope=-3)
        ```
    """
    fields = np.asarray(vorticity)
    fields = fields[None] if fields.ndim == 2 else fields
    if fields.ndim != 3 or fields.shape[1:] != grid.shape:
        raise ValueError(
            f"energy_spectrum draws vorticity of shape {grid.shape} or (n, *{grid.shape}); got "
            f"{np.shape(vorticity)}."
        )
    if labels is not None and len(labels) != len(fields):
        raise ValueError(f"give one label per spectrum: {len(fields)}; got {len(labels)}.")
    k, shells = _energy_spectrum(fields, grid)
    shells = np.asarray(shells)
    # Shells beyond the 2/3 box's edge are only partly filled (its corners).
    box_edge = max(np.array(grid.shape) * 2 * np.pi / (3 * np.array(grid.extent)))
    resolved = (k > 0) & (k <= box_edge)
    figure, ax = new_axes(ax, figsize=(5.0, 3.8), layout="constrained")
    with style():
        for index, spectrum in enumerate(shells):
            colour = COLOURS[index % len(COLOURS)]
            label = None if labels is None else labels[index]
            ax.loglog(k[resolved], spectrum[resolved], color=colour, label=label)
        if slope is not None:
            _reference_slope(ax, k[resolved], shells[-1][resolved], slope)
        positive = shells[:, resolved][shells[:, resolved] > 0]
        ax.set_ylim(bottom=max(float(positive.min()), 1e-10 * float(positive.max())))
        ax.set_xlabel("wavenumber k")
        ax.set_ylabel("energy spectrum E(k)")
        if labels is not None or slope is not None:
            ax.legend()
    return ax


def energy_enstrophy(trajectory, grid, *, time_label: str = "time"):
    r"""Draws the kinetic energy $E$ and the enstrophy $Z$ of a 2-D flow against time, side
    by side.

    **Arguments:**

    - `trajectory`: a [`simlab.Trajectory`][] of [`simlab.models.NavierStokes2D`][]
      (with a passive scalar, its vorticity channel is used).
    - `grid`: the model's [`simlab.Grid`][].
    - `time_label`: the time axis's label (give its unit).

    **Returns:** the Figure.

    !!! example

        ```python
        figure = simlab.plot.energy_enstrophy(trajectory, grid)
        ```
    """
    import matplotlib.pyplot as plt

    ys = np.asarray(trajectory.ys)
    if ys.ndim == 4:  # (time, channel, x, y): the vorticity is the first channel
        ys = ys[:, 0]
    if ys.shape[1:] != grid.shape:
        raise ValueError(
            f"energy_enstrophy needs vorticity of shape {grid.shape} at each time; got "
            f"states of shape {ys.shape[1:]}."
        )
    ts = np.asarray(trajectory.ts)
    series = (
        ("kinetic energy E", np.asarray(kinetic_energy(ys, grid))),
        ("enstrophy Z", np.asarray(enstrophy(ys, grid))),
    )
    with style():
        figure, axes = plt.subplots(1, 2, figsize=(8.0, 3.2), constrained_layout=True)
        for ax, (name, values), colour in zip(axes, series, COLOURS, strict=False):
            ax.plot(ts, values, color=colour)
            ax.set_xlabel(time_label)
            ax.set_ylabel(name)
            ax.set_ylim(bottom=0.0)
    return figure
