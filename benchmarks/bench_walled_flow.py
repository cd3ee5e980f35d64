"""The lid-driven cavity at Re = 100 and Re = 1000 on 128² cells, marched from rest to
steady state (t = 20 and t = 60) by RK4 at 0.9 of its stable step: the wall time, the time
per step, and the centreline u against Ghia, Ghia & Shin (1982), Table I."""

import time
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from _harness import Row

import simlab
from simlab.integrate import SOLVERS

SIZE = 128
END_OF = {100.0: 20.0, 1000.0: 60.0}  # steady by then (the rows report the last change)


@eqx.filter_jit
def _steady(model, y0, dt, end):
    ts = jnp.stack([0.0, end - 5.0, end])
    return simlab.simulate(
        model, y0, ts, solver="rk4", adaptive=False, dt0=dt, max_steps=1_000_000
    ).ys


def _cavity_row(reynolds: float) -> Row:
    model, y0 = simlab.models.WalledNavierStokes2D.lid_driven_cavity(SIZE, reynolds)
    dt = 0.9 * float(model.max_stable_step(SOLVERS["rk4"].build(), y0))
    end = END_OF[reynolds]
    arguments = (model, y0, jnp.asarray(dt), jnp.asarray(end))
    start = time.perf_counter()
    jax.block_until_ready(_steady(*arguments))
    compiled = time.perf_counter()
    ys = jax.block_until_ready(_steady(*arguments))
    seconds = time.perf_counter() - compiled
    steps = int(np.ceil(end / dt))
    ghia_y, ghia_u = simlab.datasets.ghia_cavity_centreline(reynolds)
    y, u = model.centreline_profile(ys[-1])
    ghia = np.max(np.abs(np.interp(ghia_y, np.asarray(y), np.asarray(u)) - ghia_u))
    change = float(jnp.max(jnp.abs(ys[-1] - ys[-2])))
    return Row(
        f"walled flow: cavity {SIZE}² Re={reynolds:g} to steady state (t={end:g}), seconds",
        seconds,
        "reported",
        f"{steps} RK4 steps, {seconds / steps * 1e3:.2f} ms/step, first call (with compiling) "
        f"{compiled - start:.0f} s; max |u - Ghia| {ghia:.1e}; last 5 time units "
        f"changed u by {change:.1e}",
    )


def rows() -> list[Row]:
    with warnings.catch_warnings():  # Re = 1000 exceeds the cell-Reynolds bound of 2 (7.8)
        warnings.simplefilter("ignore", UserWarning)
        return [_cavity_row(reynolds) for reynolds in END_OF]
