"""Makes the figures of docs/hamiltonian.md with `simlab.plot`: the energy error of
symplectic and Runge–Kutta methods on an eccentric Kepler orbit, and a Poincaré section of
the Hénon–Heiles system.

Run from the repository root: `python docs/scripts/hamiltonian_figures.py`.
"""

import pathlib

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib  # noqa: E402
import numpy as np  # noqa: E402

matplotlib.use("Agg")


import simlab  # noqa: E402
import simlab.plot  # noqa: E402

FIGURES = pathlib.Path(__file__).resolve().parents[1] / "figures"


def kepler_energy_error():
    eccentricity = 0.6
    model = simlab.models.Kepler()
    y0 = jnp.array([1 - eccentricity, 0.0, 0.0, np.sqrt((1 + eccentricity) / (1 - eccentricity))])
    ts = jnp.geomspace(0.01, 10_000.0, 3000).at[0].set(0.0)
    runs = {
        "Verlet, dt = 0.01": dict(solver="verlet", adaptive=False, dt0=0.01),
        "McLachlan 4, dt = 0.01": dict(solver="mclachlan4", adaptive=False, dt0=0.01),
        "Tsit5, rtol = 1e-8": dict(solver="tsit5", rtol=1e-8, atol=1e-10),
        "RK4, dt = 0.01": dict(solver="rk4", adaptive=False, dt0=0.01),
    }
    paths = {
        label: simlab.simulate(model, y0, ts, max_steps=10**7, **settings)
        for label, settings in runs.items()
    }
    for label, path in paths.items():
        error = simlab.plot._hamiltonian.relative_energy_error(model, path).max()
        print(f"{label}: max |H - H0| / |H0| up to t = {float(ts[-1]):g}: {error:.2e}")
    # The largest error so far: the envelope of the oscillation within each orbit.
    ax = simlab.plot.energy_error(model, paths, envelope=True, time_label="time (one orbit is 2π)")
    ax.set_title("Kepler orbit, e = 0.6: relative energy error")
    save(ax.figure, "hamiltonian_kepler_energy.png")


def henon_heiles_section(energy=1 / 8, end=3000.0, spacing=0.05):
    """Crossings of x = 0 with p_x > 0, in (y, p_y), of orbits started on the section along
    p_y = 0 and along y = 0."""
    model = simlab.models.HenonHeiles()
    seeds = [(y, 0.0) for y in np.linspace(-0.35, 0.6, 20)]
    seeds += [(0.0, py) for py in np.linspace(-0.45, 0.45, 10)]
    starts = []
    for y, py in seeds:
        px_squared = 2 * energy - py**2 - y**2 + 2 * y**3 / 3
        if px_squared > 0:
            starts.append([0.0, y, np.sqrt(px_squared), py])
    ts = jnp.arange(0.0, end, spacing)

    @jax.jit
    def orbits(starts):
        def orbit(y0):
            return simlab.simulate(
                model, y0, ts, solver="yoshida6", adaptive=False, dt0=spacing, max_steps=10**6
            )

        return jax.vmap(orbit)(starts)

    ax = simlab.plot.poincare_section(model, orbits(jnp.asarray(starts)))
    ax.grid(False)
    ax.set_aspect("equal")
    ax.set_title(f"Hénon–Heiles Poincaré section, H = {energy:g}, x = 0, p_x > 0")
    save(ax.figure, "hamiltonian_henon_heiles_section.png")


def save(figure, name: str) -> None:
    with simlab.plot.style():
        figure.savefig(FIGURES / name)
    print(f"wrote {FIGURES / name}")


if __name__ == "__main__":
    kepler_energy_error()
    henon_heiles_section()
