"""SDE ensembles: 10⁴ Ornstein–Uhlenbeck paths × 1,000 Euler–Maruyama steps in float32.

The bare loop is a `lax.scan` over the steps of the whole batch, its increments drawn at
once beforehand (the fastest way to write it, and it stores every increment). simlab draws
each step's increments inside its loop from the member's key. Diffrax solves the same
paths with `diffeqsolve(Euler())`, vmapped, with an `UnsafeBrownianPath` (its cheapest
path, fixed steps and forward only) and with a `VirtualBrownianTree` (what its adaptive
steps and reverse mode need). torchsde runs `sdeint(method="euler")` on the batch in the
interpreter named by the environment variable `TORCHSDE_PYTHON` when torchsde is not
importable here (the row is skipped otherwise).

The memory row runs `sweep(..., paths=...)`, which reduces each chunk of paths to running
statistics, for 10⁴ and for 10⁶ paths (100 steps each: the steps take time, not memory),
each in a fresh interpreter, and compares their peak resident memory.
"""

import functools
import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
from _harness import Row, best_seconds

import simlab

PATHS = 10_000
STEPS = 1_000
T = 1.0
DT = T / STEPS
THETA, MU, SIGMA = 1.0, 0.5, 0.3
DTYPE = jnp.float32
MEMORY_PATHS, MEMORY_CHUNK, MEMORY_STEPS = (10_000, 1_000_000), 10_000, 100


@jax.jit
def bare_loop(key):
    increments = jnp.sqrt(jnp.asarray(DT, DTYPE)) * jax.random.normal(key, (STEPS, PATHS), DTYPE)

    def step(y, dW):
        return y + THETA * (MU - y) * DT + SIGMA * dW, None

    return jax.lax.scan(step, jnp.zeros(PATHS, DTYPE), increments)[0]


def _model(sigma=SIGMA):
    return simlab.models.OrnsteinUhlenbeck(
        theta=jnp.asarray(THETA, DTYPE), mu=jnp.asarray(MU, DTYPE), sigma=jnp.asarray(sigma, DTYPE)
    )


def _simlab_end(key, sigma=SIGMA, integrator="auto"):
    ts = np.array([0.0, T], DTYPE)  # concrete save times: simulate counts the steps statically
    path = simlab.simulate(
        _model(sigma),
        jnp.zeros(1, DTYPE),
        ts,
        key=key,
        solver="euler_maruyama",
        adaptive=False,
        dt0=DT,
        integrator=integrator,
        throw=False,
    )
    return path.ys[-1, 0]


@functools.partial(jax.jit, static_argnames="integrator")
def simlab_paths(keys, integrator="auto"):
    """The paths' end states; `"auto"` takes the kernel integrator on a TPU, the stochastic
    loop (`"sde"`) elsewhere."""
    return jax.vmap(lambda key: _simlab_end(key, integrator=integrator))(keys)


@jax.jit
def simlab_mean_gradient(keys):
    return jax.grad(lambda sigma: jnp.mean(jax.vmap(lambda k: _simlab_end(k, sigma))(keys)))(
        jnp.asarray(SIGMA, DTYPE)
    )


def _diffrax_paths(brownian, adjoint):
    drift = dfx.ODETerm(lambda t, y, args: THETA * (MU - y))

    def one(key):
        noise = dfx.ControlTerm(lambda t, y, args: jnp.full((1,), SIGMA, DTYPE), brownian(key))
        solution = dfx.diffeqsolve(
            dfx.MultiTerm(drift, noise),
            dfx.Euler(),
            0.0,
            T,
            DT,
            jnp.zeros(1, DTYPE),
            saveat=dfx.SaveAt(t1=True),
            max_steps=STEPS + 1,
            adjoint=adjoint,
        )
        return solution.ys[-1, 0]

    return jax.jit(jax.vmap(one))


def _run_json(python: str, script: str, settings: dict, env: dict) -> dict:
    """The JSON that `python script SETTINGS_JSON` prints last."""
    result = subprocess.run(
        [python, str(pathlib.Path(__file__).with_name(script)), json.dumps(settings)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def _euler_maruyama_moments(steps: int) -> tuple[float, float]:
    """The exact mean and variance of Euler–Maruyama's X_T from X_0 = 0 in `steps` steps:
    X_{n+1} = a X_n + b + sigma dW_n with a = 1 - theta h, b = theta mu h."""
    h = T / steps
    a = 1 - THETA * h
    return MU * (1 - a**steps), SIGMA**2 * h * (1 - a ** (2 * steps)) / (1 - a**2)


def _check_moments(who: str, measured: dict, paths: int, steps: int) -> None:
    """Within five standard errors: sqrt(variance / paths) for the mean, and about
    variance sqrt(2 / paths) for the variance (Gaussian final values)."""
    mean, variance = _euler_maruyama_moments(steps)
    np.testing.assert_allclose(
        measured["mean"], mean, rtol=0, atol=5 * math.sqrt(variance / paths), err_msg=who
    )
    np.testing.assert_allclose(
        measured["variance"], variance, rtol=5 * math.sqrt(2 / paths), err_msg=who
    )


def _torchsde_seconds() -> float | None:
    """torchsde's best seconds for the ensemble, or `None` where no interpreter has it."""
    python = (
        sys.executable
        if importlib.util.find_spec("torchsde")
        else os.environ.get("TORCHSDE_PYTHON")
    )
    if python is None or not pathlib.Path(python).exists():
        return None
    settings = dict(theta=THETA, mu=MU, sigma=SIGMA, paths=PATHS, t1=T, dt=DT, repeats=3)
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    measured = _run_json(python, "_torchsde_ornstein_uhlenbeck.py", settings, environment)
    _check_moments("torchsde", measured, PATHS, STEPS)
    return measured["seconds"]


def _torchsde_rows(simlab_seconds: float, detail: str) -> list[Row]:
    torchsde = _torchsde_seconds()
    if torchsde is None:
        print(
            "  (sde: torchsde row skipped: torchsde is not importable here and "
            "TORCHSDE_PYTHON names no interpreter)"
        )
        return []
    return [
        Row(
            "SDE: OU ensemble vs torchsde (CPU)",
            torchsde / simlab_seconds,
            ">= 10x",
            f"{detail}; torchsde {torchsde * 1e3:.0f} ms, simlab {simlab_seconds * 1e3:.0f} ms",
        )
    ]


def _memory_row() -> Row:
    peaks = {}
    for paths in MEMORY_PATHS:
        settings = dict(
            theta=THETA,
            mu=MU,
            sigma=SIGMA,
            paths=paths,
            t1=T,
            dt=T / MEMORY_STEPS,
            chunk_size=MEMORY_CHUNK,
        )
        measured = _run_json(sys.executable, "_sde_peak_memory.py", settings, dict(os.environ))
        _check_moments(f"sweep of {paths} paths", measured, paths, MEMORY_STEPS)
        peaks[paths] = measured["peak_rss_bytes"]
    few, many = MEMORY_PATHS
    return Row(
        "SDE: peak RSS of streamed statistics, 10^6 / 10^4 paths",
        peaks[many] / peaks[few],
        "<= 1.2",
        f"sweep(paths=...) mean and variance of OU at T, chunks of {MEMORY_CHUNK}, "
        f"{MEMORY_STEPS} steps; {peaks[few] / 2**20:.0f} MiB vs {peaks[many] / 2**20:.0f} MiB",
    )


def rows() -> list[Row]:
    key = jax.random.key(0)
    keys = jax.random.split(key, PATHS)
    unsafe = _diffrax_paths(lambda k: dfx.UnsafeBrownianPath(shape=(), key=k), dfx.ForwardMode())
    tree = _diffrax_paths(
        lambda k: dfx.VirtualBrownianTree(0.0, T, tol=DT / 2, shape=(), key=k),
        dfx.RecursiveCheckpointAdjoint(),
    )
    times = best_seconds(
        {
            "bare": lambda: bare_loop(key),
            "simlab": lambda: simlab_paths(keys),
            "gradient": lambda: simlab_mean_gradient(keys),
            "unsafe": lambda: unsafe(keys),
        },
        repeats=5,
    )
    times |= best_seconds({"tree": lambda: tree(keys)}, repeats=1)
    detail = f"{PATHS} paths x {STEPS} steps, float32"
    return [
        Row(
            "SDE: OU ensemble, simlab / bare scan (throughput)",
            times["bare"] / times["simlab"],
            ">= 0.8",
            detail,
        ),
        Row(
            "SDE: OU ensemble vs Diffrax + UnsafeBrownianPath",
            times["unsafe"] / times["simlab"],
            ">= 2.5x",
            detail,
        ),
        Row(
            "SDE: OU ensemble vs Diffrax + VirtualBrownianTree",
            times["tree"] / times["simlab"],
            ">= 30x",
            detail,
        ),
        Row(
            "SDE: pathwise reverse gradient of the mean / solve",
            times["gradient"] / times["simlab"],
            "<= 4",
            detail,
        ),
        *_torchsde_rows(times["simlab"], detail),
        _memory_row(),
    ]


if __name__ == "__main__":
    for row in rows():
        print(row)
