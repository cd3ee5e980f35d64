"""Makes the figures of docs/flow.md: decaying 2-D turbulence (vorticity, energy spectrum,
energy and enstrophy) and Kolmogorov flow, by ETDRK4 in Fourier space.

Run from the repository root: `python docs/scripts/flow_figures.py` (a few minutes on two
CPU cores).
"""

import pathlib

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import simlab  # noqa: E402
import simlab.plot  # noqa: E402

FIGURES = pathlib.Path(__file__).parents[2] / "docs" / "figures"


def decaying_turbulence_figures():
    grid = simlab.Grid((256, 256), extent=2 * np.pi)
    model = simlab.models.NavierStokes2D(grid=grid, viscosity=1e-4)
    w0 = simlab.models.random_vorticity(jax.random.PRNGKey(0), grid, peak_wavenumber=8.0)
    dt = float(simlab.grid.cfl_step(w0, grid))  # Courant number 0.5 of the initial flow
    ts = jnp.linspace(0.0, 20.0, 41)
    trajectory = simlab.simulate(model, w0, ts, solver="etdrk4", adaptive=False, dt0=dt)
    print(f"decaying turbulence: dt = {dt:.4g}, {int(trajectory.stats['num_steps'])} steps")
    ax = simlab.plot.flow_field(trajectory.ys[-1], grid, density=1.6)
    ax.set_title(f"decaying turbulence, t = {float(ts[-1]):g} (256², ν = 10⁻⁴)")
    ax.figure.savefig(FIGURES / "flow_decaying_vorticity.png", bbox_inches="tight")
    shown = [0, 10, 20, 40]
    ax = simlab.plot.energy_spectrum(trajectory.ys[jnp.array(shown)], grid, slope=-3,
                                     labels=[f"t = {float(ts[i]):g}" for i in shown])  # fmt: skip
    ax.set_title("kinetic energy spectrum")
    ax.figure.savefig(FIGURES / "flow_decaying_spectrum.png", bbox_inches="tight")
    figure = simlab.plot.energy_enstrophy(trajectory, grid)
    figure.savefig(FIGURES / "flow_decaying_energy.png", bbox_inches="tight")


def kolmogorov_flow_figure():
    grid = simlab.Grid((128, 128), extent=2 * np.pi)
    model = simlab.models.NavierStokes2D(
        grid=grid, viscosity=1 / 200, drag=0.1, forcing_amplitude=1.0, forcing_mode=4
    )
    laminar = simlab.models.kolmogorov_laminar_vorticity(model)
    kick = simlab.models.random_vorticity(jax.random.PRNGKey(1), grid, energy=0.01)
    dt = float(simlab.grid.cfl_step(laminar + kick, grid))
    ts = jnp.linspace(0.0, 60.0, 3)
    trajectory = simlab.simulate(model, laminar + kick, ts, solver="etdrk4", adaptive=False, dt0=dt)
    ax = simlab.plot.flow_field(trajectory.ys[-1], grid, quantity="speed", density=1.4)
    ax.set_title("Kolmogorov flow (n = 4, ν = 1/200, α = 0.1), t = 60")
    ax.figure.savefig(FIGURES / "flow_kolmogorov_speed.png", bbox_inches="tight")


if __name__ == "__main__":
    decaying_turbulence_figures()
    kolmogorov_flow_figure()
