"""The lid-driven cavity at Re = 100 and Re = 1000 on 128² cells, marched from rest to
steady state (t = 20 and t = 60) by RK4 at 0.9 of its stable step: the wall time, the time
per step, and the centreline u against Ghia, Ghia & Shin (1982), Table I.

PhiFlow marches the same cavity at Re = 100 to t = 20 with the scheme of its fluid demos
(`_phiflow_cavity.py`: semi-Lagrangian advection at Courant number 1, explicit diffusion,
a conjugate-gradient pressure solve), in float64 on its jax backend, in the interpreter
named by the environment variable `PHIFLOW_PYTHON` when phiflow is not importable here
(the row is skipped otherwise). Both sides' wall times leave out compiling.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
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
PHIFLOW_REYNOLDS = 100.0
PHIFLOW_COURANT = 1.0  # semi-Lagrangian advection is stable beyond it; first order either way
PHIFLOW_TOLERANCE = 1e-6  # the pressure solve's relative and absolute residual


@eqx.filter_jit
def _steady(model, y0, dt, end):
    ts = jnp.stack([0.0, end - 5.0, end])
    return simlab.simulate(
        model, y0, ts, solver="rk4", adaptive=False, dt0=dt, max_steps=1_000_000
    ).ys


def _ghia_error(reynolds: float, y, u) -> float:
    """max |u - Ghia| over Ghia's points, the profile interpolated linearly to them."""
    ghia_y, ghia_u = simlab.datasets.ghia_cavity_centreline(reynolds)
    return float(np.max(np.abs(np.interp(ghia_y, np.asarray(y), np.asarray(u)) - ghia_u)))


def _cavity_row(reynolds: float) -> tuple[Row, float, float]:
    """The row, its seconds and its max |u - Ghia|."""
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
    ghia = _ghia_error(reynolds, *model.centreline_profile(ys[-1]))
    change = float(jnp.max(jnp.abs(ys[-1] - ys[-2])))
    row = Row(
        f"walled flow: cavity {SIZE}² Re={reynolds:g} to steady state (t={end:g}), seconds",
        seconds,
        "reported",
        f"{steps} RK4 steps, {seconds / steps * 1e3:.2f} ms/step, first call (with compiling) "
        f"{compiled - start:.0f} s; max |u - Ghia| {ghia:.1e}; last 5 time units "
        f"changed u by {change:.1e}",
    )
    return row, seconds, ghia


def _phiflow_python() -> str | None:
    """An interpreter with phiflow: this one, else `PHIFLOW_PYTHON`; `None` where neither."""
    if importlib.util.find_spec("phi") is not None:
        return sys.executable
    python = os.environ.get("PHIFLOW_PYTHON")
    return python if python is not None and pathlib.Path(python).exists() else None


def _phiflow_cavity(python: str) -> dict:
    settings = dict(
        size=SIZE,
        reynolds=PHIFLOW_REYNOLDS,
        end=END_OF[PHIFLOW_REYNOLDS],
        courant=PHIFLOW_COURANT,
        tolerance=PHIFLOW_TOLERANCE,
    )
    script = pathlib.Path(__file__).with_name("_phiflow_cavity.py")
    result = subprocess.run(
        [python, str(script), json.dumps(settings)], capture_output=True, text=True
    )
    if result.returncode != 0:
        raise RuntimeError(f"PhiFlow's cavity failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _phiflow_rows(simlab_seconds: float, simlab_ghia: float) -> list[Row]:
    python = _phiflow_python()
    if python is None:
        print(
            "  (walled_flow: PhiFlow row skipped: phiflow is not importable here and "
            "PHIFLOW_PYTHON names no interpreter)"
        )
        return []
    measured = _phiflow_cavity(python)
    ghia = _ghia_error(PHIFLOW_REYNOLDS, measured["y"], measured["u"])
    change = float(np.max(np.abs(np.subtract(measured["u"], measured["u_earlier"]))))
    seconds, steps = measured["seconds"], measured["steps"]
    end = END_OF[PHIFLOW_REYNOLDS]
    return [
        Row(
            f"walled flow: cavity {SIZE}² Re={PHIFLOW_REYNOLDS:g} t={end:g}: PhiFlow / simlab s",
            seconds / simlab_seconds,
            "reported",
            f"PhiFlow 3.4 (jax, float64): semi-Lagrangian advection (first order) at Courant "
            f"{PHIFLOW_COURANT:g}, explicit diffusion ({measured['substeps']} substeps), CG "
            f"pressure to {PHIFLOW_TOLERANCE:g}; {steps} steps in {seconds:.0f} s "
            f"({seconds / steps * 1e3:.0f} ms/step, first call {measured['first_call']:.0f} s), "
            f"max |u - Ghia| {ghia:.1e}, last 5 time units changed u by {change:.1e}; simlab "
            f"(RK4, second order) {simlab_seconds:.0f} s, max |u - Ghia| {simlab_ghia:.1e}",
        )
    ]


def rows() -> list[Row]:
    with warnings.catch_warnings():  # Re = 1000 exceeds the cell-Reynolds bound of 2 (7.8)
        warnings.simplefilter("ignore", UserWarning)
        measured = {reynolds: _cavity_row(reynolds) for reynolds in END_OF}
    _, seconds, ghia = measured[PHIFLOW_REYNOLDS]
    return [row for row, _, _ in measured.values()] + _phiflow_rows(seconds, ghia)
