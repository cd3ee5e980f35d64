"""Silent failures of `simulate` under `jit` and `vmap`: invalid traced inputs get the status
their known values would raise, a solve that runs into NaN or inf says so, and when, and a
failure raised under `vmap` starts with simlab's reason."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array

import simlab
from simlab import RESULTS
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


def test_traced_times_and_steps_diffrax_would_refuse_give_their_status_through_diffrax():
    # Diffrax checks its save times' order and dt0's sign itself, inside the program and
    # for the whole batch: one member's bad times would raise past throw=False (and wait
    # for a key press on a TPU). The others solve as alone; the refused ones hold NaN.
    def solve(end, dt0):
        ts = jnp.stack([0.0, 0.5, end])
        return simlab.simulate(
            decay, Y0, ts, dt0=dt0, integrator="diffrax", max_steps=64, throw=False
        )

    ends, dt0s = jnp.array([1.0, 0.2, 1.0]), jnp.array([0.1, 0.1, -0.1])
    batch = jax.jit(jax.vmap(solve))(ends, dt0s)
    assert _names(batch.result) == ["successful", "invalid_times", "invalid_step"]
    np.testing.assert_allclose(batch.ys[0, -1], np.exp(-1.0), rtol=1e-5)
    assert np.isnan(batch.ys[1:]).all()


# --- solves that run into NaN or inf ------------------------------------------------------


class UndefinedAfter(eqx.Module):
    """du/dt = -u, split as a linear decay and a zero rest that is NaN after time `end`."""

    end: Array

    def linear(self, t, y, args):
        return -y

    def nonlinear(self, t, y, args):
        return jnp.where(t > self.end, jnp.nan, 0.0) * y

    def __call__(self, t, y, args):
        return self.linear(t, y, args) + self.nonlinear(t, y, args)


@pytest.mark.parametrize("solver", ["tsit5", "rodas5p", "kvaerno5", "kencarp4"])
def test_adaptive_steps_stuck_at_nan_report_it_and_when_per_member(solver):
    """Every integrator with adaptive steps (lean, stiff, Diffrax, IMEX) ran out of steps
    shrinking its step in front of t = 0.3, and said "maximum number of steps"."""

    def solve(end):
        return simlab.simulate(
            UndefinedAfter(end), Y0, TS, solver=solver, max_steps=400, throw=False
        )

    batch = jax.jit(jax.vmap(solve))(jnp.array([0.3, 10.0]))
    assert _names(batch.result) == ["nonfinite_state", "successful"]
    np.testing.assert_allclose(batch.nonfinite_time[0], 0.3, rtol=1e-12)
    assert np.isnan(batch.nonfinite_time[1])
    np.testing.assert_allclose(batch.ys[1, -1], np.exp(-1.0), rtol=1e-4)


def test_a_blow_up_is_a_nonfinite_state_at_the_singularity_not_a_lack_of_steps():
    # dy/dt = y^2 from y(0) = 1 reaches infinity at t = 1.
    def blow_up(t, y, args):
        return y**2

    trajectory = jax.jit(lambda y0: simlab.simulate(blow_up, y0, TS * 2, throw=False))(Y0)
    assert trajectory.result == RESULTS.nonfinite_state
    np.testing.assert_allclose(trajectory.nonfinite_time, 1.0, rtol=1e-4)
    with pytest.raises(simlab.SimulationError, match=r"NaN or infinite.* at t = 1\.000") as error:
        simlab.simulate(blow_up, Y0, TS * 2)
    assert "maximum number of solver steps" not in str(error.value)


def _spectral_overflow():
    """Kuramoto–Sivashinsky from an amplitude of 1e200: u u_x overflows in the first step."""
    grid = simlab.Grid((16,), extent=2 * jnp.pi)
    (x,) = grid.coordinates()
    return simlab.models.KuramotoSivashinsky(grid=grid), 1e200 * jnp.cos(x), "etdrk4"


def _overflow():
    return (lambda t, y, args: 1e200 * y**2), Y0, "rk4"


@pytest.mark.parametrize("case", [_spectral_overflow, _overflow])
def test_fixed_steps_name_the_first_save_time_that_is_not_finite(case):
    model, y0, solver = case()
    ts = jnp.linspace(0.0, 0.3, 4)
    settings = dict(solver=solver, adaptive=False, dt0=0.05, throw=False)
    trajectory = simlab.simulate(model, y0, ts, **settings)
    assert trajectory.result == RESULTS.nonfinite_state
    assert float(trajectory.nonfinite_time) == float(ts[1])


def test_running_out_of_steps_is_still_running_out_of_steps():
    trajectory = simlab.simulate(decay, Y0, jnp.array([0.0, 100.0]), max_steps=5, throw=False)
    assert trajectory.result == RESULTS.max_steps_reached
    assert np.isnan(trajectory.nonfinite_time)


# --- what a user reads when a solve inside a transformation fails -------------------------


def test_a_failure_under_vmap_raises_simlabs_error_with_the_reason_first():
    def final(rate):
        model = simlab.models.Lorenz(sigma=10.0, rho=rate, beta=8 / 3)
        return simlab.simulate(model, jnp.ones(3), jnp.array([0.0, 100.0]), max_steps=5).ys

    with pytest.raises(simlab.SimulationError) as error:
        jax.vmap(final)(jnp.array([28.0, 29.0]))
    first_line = str(error.value).splitlines()[0]
    assert first_line.startswith(RESULTS[RESULTS.max_steps_reached])
    assert "solver='rodas5p'" in first_line
