r"""Figures of Hamiltonian trajectories: orbits in the plane, the energy error of each solver,
Poincaré sections and the energies of normal modes."""

from collections.abc import Mapping, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._style import COLOURS, new_axes, style
from ._trajectory import _with_unit

AXIS_NAMES = "xyz"
SCALES = ("linear", "log")
NEWTON_ITERATIONS = 8
DEFAULT_MODES = 4


def orbits(model, trajectory, *, plane=(0, 1), length_unit: str = "", ax=None):
    """Plots the path of each body in a plane, with its starting point marked.

    **Arguments:**

    - `model`: the [`simlab.models.AbstractHamiltonianModel`][] that ran: an N-body model
      (`NBody`, `LennardJones`, one body per `dimension` coordinates) or a model whose
      positions are one point in the plane or in space (`Kepler`, `HenonHeiles`).
    - `trajectory`: its [`simlab.Trajectory`][], `ys` of shape `(T, k)`.
    - `plane`: the two coordinate axes drawn, `(0, 1)` for x–y, `(0, 2)` for x–z.
    - `length_unit`: the unit of the positions, put on the axes (e.g. `"AU"`).
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes: one line per body (labelled by its name) and one marker at its
    start.

    !!! example

        ```python
        import jax.numpy as jnp
        import simlab
        import simlab.plot

        planets, y0 = simlab.models.NBody.outer_solar_system()
        path = simlab.simulate(planets, y0, jnp.linspace(0.0, 2e4, 201), solver="verlet",
                               adaptive=False, dt0=100.0)
        ax = simlab.plot.orbits(planets, path, length_unit="AU")
        ```
    """
    dimension = body_dimension(model)
    positions = np.asarray(model.positions(jnp.asarray(trajectory.ys)))
    bodies = positions.reshape(len(positions), -1, dimension)
    first, second = _checked_plane(plane, dimension)
    names = _body_names(model, dimension)
    figure, ax = new_axes(ax, figsize=(5.6, 5.2), layout="constrained")
    with style():
        for index, name in enumerate(names):
            colour = COLOURS[index % len(COLOURS)]
            path = bodies[:, index]
            ax.plot(path[:, first], path[:, second], color=colour, linewidth=1.0, label=name)
            ax.plot(path[0, first], path[0, second], "o", color=colour, markersize=4)
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_xlabel(_with_unit(AXIS_NAMES[first], length_unit))
        ax.set_ylabel(_with_unit(AXIS_NAMES[second], length_unit))
        if len(names) <= len(COLOURS):
            ax.legend(title="dots: start", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


def body_dimension(model) -> int:
    """How many coordinates each body has: the model's `dimension`, else all its positions
    as one point (two or three of them)."""
    dimension = getattr(model, "dimension", None)
    if dimension is None:
        dimension = len(model.state_names) // 2
        if dimension not in (2, 3):
            raise ValueError(
                f"orbits draws bodies in the plane or in space; {type(model).__name__} has "
                f"{dimension} position coordinates and no `dimension` that groups them."
            )
    if dimension < 2:
        raise ValueError(f"orbits needs bodies in two or three dimensions; got {dimension}.")
    return dimension


def _checked_plane(plane, dimension: int) -> tuple[int, int]:
    choices = range(dimension)
    if len(plane) != 2 or plane[0] == plane[1] or not all(axis in choices for axis in plane):
        raise ValueError(
            f"plane must be two different axes of {list(choices)} (0 is x); got {plane!r}."
        )
    return int(plane[0]), int(plane[1])


def _body_names(model, dimension: int) -> list[str]:
    """`"Jupiter"` from the component `"Jupiter.x"`; the model's name for a single point."""
    names = model.state_names[: len(model.state_names) // 2 : dimension]
    return [name.rpartition(".")[0] or type(model).__name__ for name in names]


def energy_error(
    model, trajectories, *, envelope: bool = False, xscale: str = "log", time_label="time", ax=None
):
    r"""Plots the relative energy error $|H(t) - H(0)| / |H(0)|$ of each trajectory against
    time on a logarithmic error axis: one line per solver.

    **Arguments:**

    - `model`: the [`simlab.models.AbstractHamiltonianModel`][] that ran.
    - `trajectories`: a [`simlab.Trajectory`][], or a mapping of labels (e.g.
      `"verlet, dt = 0.01"`) to trajectories of the same model.
    - `envelope`: draw the largest error so far instead, the upper envelope of the
      oscillation a symplectic method shows within each period.
    - `xscale`: `"log"` (the default, where a drift and a bounded error differ by slope; the
      start, where the error is zero, is left out) or `"linear"`.
    - `time_label`: the time axis label (give units, e.g. `"time (days)"`).
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes.

    **Raises:** `ValueError` if a trajectory starts at zero energy, where a relative error
    means nothing.

    !!! example

        ```python
        model = simlab.models.Kepler()
        y0 = jnp.array([0.4, 0.0, 0.0, 2.0])
        ts = jnp.linspace(0.0, 100.0, 1001)
        runs = {
            name: simlab.simulate(model, y0, ts, solver=name, adaptive=False, dt0=0.01)
            for name in ("verlet", "rk4")
        }
        ax = simlab.plot.energy_error(model, runs)
        ```
    """
    if xscale not in SCALES:
        raise ValueError(f"xscale must be one of {SCALES}; got {xscale!r}.")
    if not isinstance(trajectories, Mapping):
        trajectories = {"": trajectories}
    figure, ax = new_axes(ax, figsize=(7, 3.8), layout="constrained")
    with style():
        for index, (label, trajectory) in enumerate(trajectories.items()):
            error = relative_energy_error(model, trajectory)
            if envelope:
                error = np.maximum.accumulate(error)
            ts = np.asarray(trajectory.ts)
            ax.plot(ts, error, color=COLOURS[index % len(COLOURS)], label=label or None)
        ax.set_xscale(xscale)
        ax.set_yscale("log")
        ax.set_xlabel(time_label)
        what = "largest |H − H₀| / |H₀| so far" if envelope else "|H − H₀| / |H₀|"
        ax.set_ylabel(what)
        if any(trajectories):
            ax.legend()
    return ax


def relative_energy_error(model, trajectory) -> np.ndarray:
    """$|H(t) - H(0)| / |H(0)|$ at each save time of `trajectory`."""
    energy = np.asarray(model.energy(jnp.asarray(trajectory.ys)))
    if energy[0] == 0:
        raise ValueError(
            "the trajectory starts at zero energy, H(0) = 0: a relative energy error is "
            "undefined there; plot |H - H0| of model.energy(trajectory.ys) instead."
        )
    return np.abs(energy - energy[0]) / abs(energy[0])


def poincare_section(model, trajectories, *, ax=None):
    r"""Plots where orbits of a two-degree-of-freedom model cross the section $q_1 = 0$ with
    $p_1 > 0$, in the plane of $(q_2, p_2)$: for Hénon–Heiles, $x = 0$, $p_x > 0$, drawn in
    $(y, p_y)$.

    Each crossing lies between two saved states; it is found on the cubic Hermite
    interpolant through both states and their derivatives (the model's vector field), whose
    error shrinks as the fourth power of the save spacing, so saves a few per oscillation
    apart give sections that lie on the energy surface to plotting accuracy.

    **Arguments:**

    - `model`: the [`simlab.models.AbstractHamiltonianModel`][] that ran, with two positions.
    - `trajectories`: a [`simlab.Trajectory`][], a sequence of them, or one with a batch
      axis first (`ys` of shape `(orbits, T, 4)`, from `jax.vmap` of `simulate`); each orbit
      gets its own colour.
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes, one set of points per orbit.

    !!! example

        ```python
        model = simlab.models.HenonHeiles()
        ts = jnp.arange(0.0, 500.0, 0.1)
        orbit = simlab.simulate(model, jnp.array([0.0, 0.1, 0.45, 0.0]), ts, solver="yoshida6",
                                adaptive=False, dt0=0.05)
        ax = simlab.plot.poincare_section(model, orbit)
        ```
    """
    names = model.state_names
    if len(names) != 4:
        raise ValueError(
            f"a Poincaré section needs two degrees of freedom (four states); "
            f"{type(model).__name__} has {len(names)}."
        )
    orbits = _orbits(trajectories)
    figure, ax = new_axes(ax, figsize=(5.6, 5.2), layout="constrained")
    with style():
        import matplotlib.pyplot as plt

        colours = (
            plt.cm.viridis(np.linspace(0.0, 0.9, len(orbits))) if len(orbits) > 1 else COLOURS[:1]
        )
        for (ts, ys), colour in zip(orbits, colours, strict=True):
            points = section_crossings(model, ts, ys)
            ax.plot(points[:, 1], points[:, 3], ".", markersize=1.5, color=colour)
        ax.set_xlabel(names[1])
        ax.set_ylabel(names[3])
        ax.set_title(f"{names[0]} = 0, {names[2]} > 0", fontsize=10)
    return ax


def _orbits(trajectories) -> list[tuple[np.ndarray, np.ndarray]]:
    """`(ts, ys)` of each orbit, `ys` of shape `(T, k)`."""
    if isinstance(trajectories, Sequence):
        return [pair for trajectory in trajectories for pair in _orbits(trajectory)]
    ts, ys = np.asarray(trajectories.ts), np.asarray(trajectories.ys)
    if ys.ndim == 2:
        return [(ts, ys)]
    if ys.ndim == 3:
        return [(np.broadcast_to(ts, ys.shape[:2])[i], ys[i]) for i in range(len(ys))]
    raise ValueError(f"orbits need ys of shape (T, k) or (orbits, T, k); got {ys.shape}.")


def section_crossings(model, ts, ys) -> np.ndarray:
    r"""The states where the orbit `ys` (saved at `ts`) crosses $q_1 = 0$ upwards, one row
    each: the zero of $q_1$ on the cubic Hermite interpolant between the two saves around
    it, by Newton's method from the linear estimate."""
    ts, ys = np.asarray(ts), np.asarray(ys)
    x = ys[:, 0]
    starts = np.flatnonzero((x[:-1] < 0) & (x[1:] >= 0))
    rates = np.asarray(_rates(model, jnp.asarray(ys)))
    step = (ts[starts + 1] - ts[starts])[:, None]
    ends = (ys[starts], step * rates[starts], ys[starts + 1], step * rates[starts + 1])
    s = -x[starts] / (x[starts + 1] - x[starts])
    for _ in range(NEWTON_ITERATIONS):
        value, slope = _hermite(s, *ends), _hermite_slope(s, *ends)
        s = np.clip(s - value[:, 0] / slope[:, 0], 0.0, 1.0)
    crossings = _hermite(s, *ends)
    return crossings[crossings[:, 2] > 0]


@eqx.filter_jit
def _rates(model, ys):
    """The model's vector field at each state of `ys` (Hamiltonian models are autonomous)."""
    return jax.vmap(lambda y: model(0.0, y, None))(ys)


def _hermite(s, y0, dy0, y1, dy1):
    """The cubic through `y0`, `y1` with slopes `dy0`, `dy1` (per unit `s`), at `s` in [0, 1]."""
    s = s[:, None]
    return (
        (2 * s**3 - 3 * s**2 + 1) * y0
        + (s**3 - 2 * s**2 + s) * dy0
        + (3 * s**2 - 2 * s**3) * y1
        + (s**3 - s**2) * dy1
    )


def _hermite_slope(s, y0, dy0, y1, dy1):
    s = s[:, None]
    return (6 * s**2 - 6 * s) * (y0 - y1) + (3 * s**2 - 4 * s + 1) * dy0 + (3 * s**2 - 2 * s) * dy1


def mode_energies(
    model, trajectory, *, modes: int | None = None, yscale="linear", time_label="time", ax=None
):
    r"""Plots the harmonic energy $E_k = \tfrac12(P_k^2 + \omega_k^2 Q_k^2)$ of the first
    `modes` normal modes of a chain against time: the FPUT recurrence, energy leaving the
    first mode for a few others and coming back.

    **Arguments:**

    - `model`: a model with `mode_energies` (e.g. [`simlab.models.FPUTChain`][]).
    - `trajectory`: its [`simlab.Trajectory`][].
    - `modes`: how many modes, from the lowest (default: four, or all of fewer).
    - `yscale`: `"linear"` or `"log"` (which shows the small energies of the higher modes).
    - `time_label`: the time axis label.
    - `ax`: the Axes to draw on; `None` makes a new figure.

    **Returns:** the Axes, one line per mode.

    !!! example

        ```python
        chain = simlab.models.FPUTChain(num_masses=16, alpha=0.25)
        y0 = jnp.concatenate([4.0 * chain.mode_shapes()[0], jnp.zeros(16)])
        path = simlab.simulate(chain, y0, jnp.linspace(0.0, 3000.0, 301), solver="verlet",
                               adaptive=False, dt0=0.2)
        ax = simlab.plot.mode_energies(chain, path, modes=3)
        ```
    """
    if not hasattr(model, "mode_energies"):
        raise ValueError(
            f"mode_energies needs a model with normal modes (e.g. FPUTChain); "
            f"{type(model).__name__} has none."
        )
    energies = np.asarray(model.mode_energies(jnp.asarray(trajectory.ys)))
    modes = min(DEFAULT_MODES, energies.shape[1]) if modes is None else modes
    if not 1 <= modes <= energies.shape[1]:
        raise ValueError(f"modes must be between 1 and {energies.shape[1]}; got {modes}.")
    if yscale not in SCALES:
        raise ValueError(f"yscale must be one of {SCALES}; got {yscale!r}.")
    figure, ax = new_axes(ax, figsize=(7, 3.8), layout="constrained")
    with style():
        for k in range(modes):
            ax.plot(
                trajectory.ts, energies[:, k], color=COLOURS[k % len(COLOURS)], label=f"{k + 1}"
            )
        ax.set_yscale(yscale)
        ax.set_xlabel(time_label)
        ax.set_ylabel("mode energy $E_k$")
        ax.legend(title="mode k", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax
