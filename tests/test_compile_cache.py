"""New parameter values, initial states, save times or tolerances never recompile a solve."""

import contextlib
import json
import os
import pathlib
import subprocess
import sys

import jax
import jax.monitoring
import jax.numpy as jnp
import pytest
from helpers import lorenz

import simlab

ROOT = pathlib.Path(__file__).parent.parent
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def count_compilations():
    """Counts XLA compilations inside the block (JAX reports each one as an event)."""
    compilations = []

    def listener(event, duration_secs, **kwargs):
        if event == BACKEND_COMPILE_EVENT:
            compilations.append(duration_secs)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield compilations
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def _solve(rho, y0, ts, **settings):
    return simlab.simulate(lorenz(rho), y0, ts, throw=False, **settings).ys


def _inputs(rho, y0, ts):
    """Arrays made outside the counted block (making an array compiles a conversion)."""
    return jnp.asarray(rho), jnp.asarray(y0), jnp.asarray(ts)


SETTINGS = {
    "diffrax adaptive": dict(integrator="diffrax"),
    "lean adaptive": dict(integrator="lean"),
    "lean fixed": dict(integrator="lean", adaptive=False, dt0=0.01),
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_new_values_do_not_recompile(name):
    settings = SETTINGS[name]
    first_inputs = _inputs(28.0, [1.0, 1.0, 1.0], [0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    new_inputs = _inputs(24.0, [1.0, 2.0, 3.0], [0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    new_times = _inputs(20.0, [3.0, 2.0, 1.0], [0.0, 0.15, 0.3, 0.45, 0.6, 0.75])
    # The first call compiles (unless an earlier test already did, with these shapes).
    jax.block_until_ready(_solve(*first_inputs, rtol=1e-6, atol=1e-8, **settings))
    with count_compilations() as again:
        jax.block_until_ready(_solve(*new_inputs, rtol=1e-7, atol=1e-9, **settings))
        if "adaptive" in name:  # fixed steps follow ts, so only adaptive solves keep the code
            jax.block_until_ready(_solve(*new_times, **settings))
    assert len(again) == 0, f"{name}: {len(again)} recompilations"


def test_the_counter_sees_compilations():
    new_function = jax.jit(lambda x: jnp.sin(x) * 3.0)
    ones, zeros, longer = jnp.ones(17), jnp.zeros(17), jnp.zeros(18)
    with count_compilations() as compilations:
        jax.block_until_ready(new_function(ones))
        jax.block_until_ready(new_function(zeros))
        jax.block_until_ready(new_function(longer))
    assert len(compilations) == 2


def test_vmapped_solve_under_jit_compiles_once():
    ts = jnp.linspace(0.0, 0.5, 6)
    solve = jax.jit(jax.vmap(lambda rho, y0: _solve(rho, y0, ts, integrator="lean")))
    first_inputs = (jnp.array([20.0, 28.0]), jnp.ones((2, 3)))
    new_inputs = (jnp.array([10.0, 14.0]), 2 * jnp.ones((2, 3)))
    with count_compilations() as first:
        jax.block_until_ready(solve(*first_inputs))
    with count_compilations() as again:
        jax.block_until_ready(solve(*new_inputs))
    assert len(first) == 1
    assert len(again) == 0


# A fresh process with the command's JAX settings: top-level solves (lean fixed steps of a
# grid model with its stability limit, the adaptive lean loop), then the counts of
# persistent-cache hits and misses as JSON.
_CACHED_RUN = """
import json, jax, jax.monitoring, jax.numpy as jnp
events = {"hits": 0, "misses": 0}
names = {"/jax/compilation_cache/cache_hits": "hits",
         "/jax/compilation_cache/cache_misses": "misses"}
def listener(event, **kwargs):
    if event in names:
        events[names[event]] += 1
jax.monitoring.register_event_listener(listener)
import simlab, simlab.cli
simlab.cli.configure_jax(None)
grid = simlab.Grid((16,), extent=1.0)
heat = simlab.models.Heat(diffusivity=0.1, grid=grid)
ts = jnp.linspace(0.0, 0.1, 3)
simlab.simulate(heat, jnp.sin(2 * jnp.pi * grid.coordinates()[0]), ts, solver="rk4",
                adaptive=False)
lorenz = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)
simlab.simulate(lorenz, jnp.ones(3), ts)
print(json.dumps(events))
"""


@pytest.mark.slow
def test_a_second_process_finds_every_executable_in_the_persistent_cache(tmp_path):
    """What the first process compiled, the second reads back: no executable is kept out of
    the cache (a host callback such as `eqx.error_if` in compiled code would be)."""
    environment = {
        **os.environ,
        "SIMLAB_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": str(ROOT),
        "JAX_PLATFORMS": "cpu",
    }
    counts = []
    for _ in range(2):
        finished = subprocess.run(
            [sys.executable, "-c", _CACHED_RUN],
            env=environment,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert finished.returncode == 0, finished.stderr[-2000:]
        counts.append(json.loads(finished.stdout.strip().splitlines()[-1]))
    first, second = counts
    assert first["misses"] > 10  # (a hit in the first: one executable compiled twice)
    assert second == {"hits": first["hits"] + first["misses"], "misses": 0}
