"""Silent failures of events, batches, forward mode and the getting-started page: each
case gives the right answer on every path, or a failure that says what to do."""

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_docs import python_blocks

import simlab

ROOT = pathlib.Path(__file__).resolve().parents[1]
GRAVITY = 9.81
# The lean loop (Tsit5), Diffrax's stiff Kvaerno5 and Diffrax running Tsit5.
INTEGRATOR_SETTINGS = {
    "lean": {},
    "stiff": {"solver": "kvaerno5"},
    "diffrax": {"integrator": "diffrax"},
}


def ballistic(t, y, args):
    """A ball under gravity: state (height, vertical velocity)."""
    return jnp.stack([y[1], -GRAVITY * jnp.ones_like(y[1])])


def height(t, y, args):
    return y[0]


def height_above_a_metre(t, y, args):
    """The distance above 1 m, written as a square root: `NaN` once the ball is below."""
    return jnp.sqrt(y[0] - 1.0)


EITHER_CROSSING = simlab.Event(height)
RISING_CROSSING = simlab.Event(height, direction=1)
TS = jnp.linspace(0.0, 2.0, 5)


def _event_times(event, y0):
    return [
        float(
            simlab.simulate(
                ballistic, y0, TS, event=event, rtol=1e-10, atol=1e-12, **settings
            ).event_time
        )
        for settings in INTEGRATOR_SETTINGS.values()
    ]


# --- 4. one rule for events on every integrator ------------------------------------------


@pytest.mark.parametrize(
    ("start_height", "speed"), [(0.0, 5.0), (2.0, 5.0)], ids=["zero at t0", "crossing"]
)
def test_every_integrator_puts_the_landing_at_the_same_analytic_time(start_height, speed):
    # Thrown up at `speed` from `start_height`: it lands at (v + sqrt(v^2 + 2 g z0)) / g.
    # From the ground the height is zero at t0, which is no event: the landing is.
    landing = (speed + np.sqrt(speed**2 + 2 * GRAVITY * start_height)) / GRAVITY
    times = _event_times(EITHER_CROSSING, jnp.array([start_height, speed]))
    np.testing.assert_allclose(times, landing, rtol=1e-9)


@pytest.mark.slow
def test_a_condition_that_starts_at_zero_and_only_falls_never_rises_on_any_integrator():
    # Thrown up from the ground the height leaves zero upwards and then falls through it:
    # it never crosses zero from below, so no integrator reports a rising crossing.
    times = _event_times(RISING_CROSSING, jnp.array([0.0, 5.0]))
    assert np.all(np.isnan(times)), times


@pytest.mark.parametrize("integrator", list(INTEGRATOR_SETTINGS))
def test_a_condition_that_turns_nan_fails_the_solve_instead_of_never_firing(integrator):
    # Dropped from 2 m: sqrt(height - 1) falls to zero at 1 m, where a step lands below
    # 1 m and the condition is NaN. Whether it fired is unknown: that is a failure.
    settings = INTEGRATOR_SETTINGS[integrator]
    event = simlab.Event(height_above_a_metre, terminate=False)
    y0 = jnp.array([2.0, 0.0])
    trajectory = simlab.simulate(ballistic, y0, TS, event=event, throw=False, **settings)
    assert not bool(trajectory.succeeded)
    assert trajectory.result == simlab.RESULTS.nonfinite_event_condition
    with pytest.raises(simlab.SimulationError, match="event condition returned NaN"):
        simlab.simulate(ballistic, y0, TS, event=event, **settings)


# --- 8. final_state of a batch ------------------------------------------------------------


def decay(t, y, rate):
    return -rate * y


def test_final_state_of_a_vmapped_batch_is_each_members_final_state():
    rates = jnp.array([0.5, 1.0, 2.0])

    def solve(rate):
        return simlab.simulate(decay, jnp.array([1.0, 2.0]), TS, args=rate, throw=False)

    batch = jax.vmap(solve)(rates)
    expected = np.exp(-np.asarray(rates) * float(TS[-1]))[:, None] * np.array([1.0, 2.0])
    np.testing.assert_allclose(batch.final_state(), expected, rtol=1e-5)
    np.testing.assert_allclose(solve(rates[0]).final_state(), expected[0], rtol=1e-5)


# --- 18. forward mode with the default adjoint --------------------------------------------


def test_forward_mode_through_a_reverse_mode_solve_says_to_pass_adjoint_forward():
    def final_value(rate, adjoint):
        return simlab.simulate(decay, jnp.array([1.0]), TS, args=rate, adjoint=adjoint).ys[-1, 0]

    with pytest.raises(ValueError, match="adjoint='forward'"):
        jax.jacfwd(final_value)(0.5, None)
    # As the error says: d/dk exp(-k T) = -T exp(-k T).
    slope = jax.jacfwd(final_value)(0.5, "forward")
    np.testing.assert_allclose(slope, -TS[-1] * np.exp(-0.5 * TS[-1]), rtol=1e-5)


# --- 19. the getting-started page says its precision --------------------------------------


@pytest.mark.slow  # 15 s in a fresh interpreter; tests/test_docs.py runs the page itself
def test_the_getting_started_page_simulates_in_float64():
    # Pasted into a fresh interpreter (no float64 from this suite's configuration), the
    # page's first block runs in the precision its text assumes.
    first_block = python_blocks((ROOT / "docs" / "getting-started.md").read_text())[0]
    completed = subprocess.run(
        [sys.executable, "-c", first_block + "print(trajectory.ys.dtype)"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    assert completed.stdout.split()[-1] == "float64"
