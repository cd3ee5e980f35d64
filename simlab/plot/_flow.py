"""Figures of two-dimensional incompressible flow: from its vorticity (periodic), the field
with streamlines, the kinetic energy spectrum with a reference slope, energy and enstrophy
in time; from the staggered velocity of a walled flow, its speed with streamlines and a
centreline profile against a reference."""

from fractions import Fraction

import jax.numpy as jnp
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
        _streamlines(ax, grid, u, v, density)
    ax.set_aspect("equal")
    return ax


def _streamlines(ax, grid, u, v, density: float) -> None:
    """Streamlines of the cell-centre velocity `(u, v)` over the grid's box."""
    x, y = (np.asarray(c) for c in grid.coordinates())
    with style():
        ax.streamplot(x, y, u.T, v.T, density=density, color="black", linewidth=0.6,
                      arrowsize=0.7, broken_streamlines=True)  # fmt: skip
    ax.set_xlim(grid.origin[0], grid.origin[0] + grid.extent[0])
    ax.set_ylim(grid.origin[1], grid.origin[1] + grid.extent[1])


def walled_flow_field(y, model, *, streamlines: bool = True, density: float = 1.2, ax=None):
    r"""Draws a flow of [`simlab.models.WalledNavierStokes2D`][] as an image of its speed
    $|\mathbf u|$ at the cell centres
    ([`cell_velocity`][simlab.models.WalledNavierStokes2D.cell_velocity]), with
    streamlines.

    **Arguments:**

    - `y`: the staggered state, shape `(2, *model.grid.shape)` (e.g. `trajectory.ys[-1]`).
    - `model`: the model it belongs to (its grid and walls).
    - `streamlines`: whether to draw the streamlines over the image.
    - `density`: their density (matplotlib's `streamplot`).
    - `ax`: the axes to draw on (default: a new figure).

    **Returns:** the Axes.

    !!! example

        ```python
        model, y0 = simlab.models.WalledNavierStokes2D.lid_driven_cavity(num_cells=16)
        trajectory = simlab.simulate(model, y0, jnp.array([0.0, 2.0]), solver="rk4",
                                     adaptive=False)
        ax = simlab.plot.walled_flow_field(trajectory.ys[-1], model)
        ```
    """
    grid = model.grid
    values = np.asarray(y)
    if values.shape != (2, *grid.shape):
        raise ValueError(
            f"walled_flow_field draws a staggered velocity of shape {(2, *grid.shape)}; got "
            f"{values.shape}."
        )
    u, v = np.asarray(model.cell_velocity(values))
    figure, ax = new_axes(ax, figsize=(5.0, 4.2), layout="constrained")
    field_image(np.hypot(u, v), grid, ax=ax, label="speed |u|", vmin=0.0)
    if streamlines:
        _streamlines(ax, grid, u, v, density)
    ax.set_aspect("equal")
    return ax


def centreline_profile(y, model, *, reference=None, reference_label: str = "reference", ax=None):
    r"""Draws $u$ across the vertical centreline of a walled flow against height
    ([`centreline_profile`][simlab.models.WalledNavierStokes2D.centreline_profile]), the
    velocity on the horizontal axis as in the cavity literature, with reference points.

    **Arguments:**

    - `y`: the staggered state of `model`, shape `(2, *model.grid.shape)`, or a stack of
      states `(n, 2, ...)` drawn as `n` curves, the last darkest (e.g. the approach to a
      steady state).
    - `model`: the [`simlab.models.WalledNavierStokes2D`][].
    - `reference`: `(heights, u)` to mark as points, e.g.
      [`simlab.datasets.ghia_cavity_centreline`][]`(100)`.
    - `reference_label`: their legend entry.
    - `ax`: the axes to draw on (default: a new figure).

    **Returns:** the Axes.

    !!! example

        ```python
        model, y0 = simlab.models.WalledNavierStokes2D.lid_driven_cavity(16, 100.0)
        trajectory = simlab.simulate(model, y0, jnp.array([0.0, 5.0]), solver="rk4",
                                     adaptive=False)
        ax = simlab.plot.centreline_profile(
            trajectory.ys[-1], model, reference=simlab.datasets.ghia_cavity_centreline(100),
            reference_label="Ghia et al. (1982)",
        )
        ```
    """
    states = np.asarray(y)
    states = states[None] if states.ndim == 3 else states
    if states.ndim != 4 or states.shape[1:] != (2, *model.grid.shape):
        raise ValueError(
            f"centreline_profile draws staggered states of shape {(2, *model.grid.shape)} or "
            f"(n, 2, *{model.grid.shape}); got {np.shape(y)}."
        )
    figure, ax = new_axes(ax, figsize=(4.2, 4.6), layout="constrained")
    with style():
        for index, state in enumerate(states):
            heights, u = (np.asarray(a) for a in model.centreline_profile(jnp.asarray(state)))
            last = index == len(states) - 1
            ax.plot(u, heights, color=COLOURS[0], alpha=1.0 if last else 0.35,
                    label="simulated" if last else None)  # fmt: skip
        if reference is not None:
            ref_heights, ref_u = (np.asarray(a) for a in reference)
            ax.plot(ref_u, ref_heights, "o", color=COLOURS[1], markersize=4,
                    label=reference_label)  # fmt: skip
        ax.axvline(0.0, color="grey", linewidth=0.6)
        ax.set_xlabel("u on the vertical centreline")
        ax.set_ylabel("y")
        (_, bottom), (_, height) = model.grid.origin, model.grid.extent
        ax.set_ylim(bottom, bottom + height)
        ax.legend()
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
