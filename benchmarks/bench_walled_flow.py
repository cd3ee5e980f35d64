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
GHIA_Y, GHIA_U = simlab.datasets.ghia_cavity_centreline(REYNOLDS)


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
