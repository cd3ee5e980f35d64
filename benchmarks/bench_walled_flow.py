"""The lid-driven cavity at Re = 100 on 128² cells, marched from rest to steady state
(t = 20) by RK4 at 0.9 of its stable step: the wall time, the time per step, and the
centreline u against Ghia, Ghia & Shin (1982), Table I."""

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from _harness import Row

import simlab
from simlab.integrate import SOLVERS

SIZE, REYNOLDS, END = 128, 100.0, 20.0
# Ghia, Ghia & Shin, J. Comput. Phys. 48 (1982) 387-411, Table I, Re = 100 (interior points).
GHIA_Y = np.array(
    [0.9766, 0.9688, 0.9609, 0.9531, 0.8516, 0.7344, 0.6172, 0.5000]
    + [0.4531, 0.2813, 0.1719, 0.1016, 0.0703, 0.0625, 0.0547]
)
GHIA_U = np.array(
    [0.84123, 0.78871, 0.73722, 0.68717, 0.23151, 0.00332, -0.13641, -0.20581]
    + [-0.21090, -0.15662, -0.10150, -0.06434, -0.04775, -0.04192, -0.03717]
)


@eqx.filter_jit
def _steady(model, y0, dt):
    ts = jnp.array([0.0, END - 5.0, END])
    return simlab.simulate(
        model, y0, ts, solver="rk4", adaptive=False, dt0=dt, max_steps=1_000_000
    ).ys


def _cavity_row() -> Row:
    model, y0 = simlab.models.WalledNavierStokes2D.lid_driven_cavity(SIZE, REYNOLDS)
    dt = 0.9 * float(model.max_stable_step(SOLVERS["rk4"].build(), y0))
    start = time.perf_counter()
    jax.block_until_ready(_steady(model, y0, jnp.asarray(dt)))
    compiled = time.perf_counter()
    ys = jax.block_until_ready(_steady(model, y0, jnp.asarray(dt)))
    seconds = time.perf_counter() - compiled
    steps = int(np.ceil(END / dt))
    y, u = model.centreline_profile(ys[-1])
    ghia = np.max(np.abs(np.interp(GHIA_Y, np.asarray(y), np.asarray(u)) - GHIA_U))
    change = float(jnp.max(jnp.abs(ys[-1] - ys[-2])))
    return Row(
        f"walled flow: cavity {SIZE}² Re={REYNOLDS:g} to steady state (t={END:g}), seconds",
        seconds,
        "reported",
        f"{steps} RK4 steps, {seconds / steps * 1e3:.2f} ms/step, first call (with compiling) "
        f"{compiled - start:.0f} s; max |u - Ghia| {ghia:.1e}; last 5 time units "
        f"changed u by {change:.1e}",
    )


def rows() -> list[Row]:
    return [_cavity_row()]
