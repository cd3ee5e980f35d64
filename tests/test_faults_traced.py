"""Silent failures of `simulate` under `jit` and `vmap`: invalid traced inputs get the status
their known values would raise."""

import jax
import jax.numpy as jnp
import numpy as np

import simlab
from simlab._results import status_code, status_name

TS = jnp.linspace(0.0, 1.0, 3)
Y0 = jnp.array([1.0])


def decay(t, y, args):
    return -y


def _names(result):
    """The name of each member's status."""
    return [status_name(int(code)) for code in np.atleast_1d(np.asarray(status_code(result)))]


# --- invalid traced inputs ----------------------------------------------------------------


def test_a_traced_invalid_step_is_refused_with_its_own_status():
    def fixed(dt0):
        return simlab.simulate(decay, Y0, TS, adaptive=False, dt0=dt0, throw=False).result

    def adaptive(dt0):
        return simlab.simulate(decay, Y0, TS, dt0=dt0, max_steps=64, throw=False).result

    # -0.01 took one step per save interval, NaN took none, and both "succeeded"; inf and a
    # step longer than the span are refused on known values.
    steps = jnp.array([0.01, -0.01, jnp.nan, jnp.inf, 2.0])
    expected = ["successful"] + ["invalid_step"] * 4
    assert _names(jax.jit(jax.vmap(fixed))(steps)) == expected
    # Adaptive steps take any positive first step, even one longer than the span.
    assert _names(jax.jit(jax.vmap(adaptive))(steps)) == expected[:4] + ["successful"]


def test_traced_tolerances_out_of_range_are_refused_with_their_own_status():
    def status(rtol, atol):
        return simlab.simulate(decay, Y0, TS, rtol=rtol, atol=atol, max_steps=64, throw=False)

    rtols = jnp.array([1e-6, -1e-6, jnp.nan, 0.7, 1e-6, 1e-6, 1e-6])
    atols = jnp.array([1e-9, 1e-9, 1e-9, 1e-9, 0.0, jnp.nan, jnp.inf])
    batch = jax.jit(jax.vmap(status))(rtols, atols)
    assert _names(batch.result) == ["successful"] + ["invalid_tolerance"] * 6
    np.testing.assert_allclose(batch.ys[0, -1], np.exp(-1.0), rtol=1e-5)


def test_a_traced_nonfinite_y0_or_ts_is_refused_with_its_own_status():
    def solve(y0, end):
        ts = jnp.stack([0.0, end])
        return simlab.simulate(decay, y0, ts, max_steps=64, throw=False)

    y0s, ends = jnp.array([[1.0], [jnp.nan], [1.0]]), jnp.array([1.0, 1.0, jnp.inf])
    statuses = jax.jit(jax.vmap(solve))(y0s, ends).result
    assert _names(statuses) == ["successful", "nonfinite_initial_state", "invalid_times"]
