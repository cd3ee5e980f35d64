"""New parameter values, initial states, save times or tolerances never recompile a solve."""

import contextlib

import jax
import jax.monitoring
import jax.numpy as jnp
import pytest
from helpers import lorenz

import simlab

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
