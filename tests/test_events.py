"""Events: event times against analytic ones and SciPy, their derivatives, vmap, sweeps."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.special
from helpers import without_type_checks

import simlab

GRAVITY = 9.81
INTEGRATORS = ["lean", "diffrax"]


def projectile(t, y, args):
    """A projectile without drag: state (x, z, vx, vz)."""
    return jnp.stack([y[2], y[3], jnp.zeros_like(y[2]), -GRAVITY * jnp.ones_like(y[3])])


def height(t, y, args):
    return y[1]


def decay(t, y, rate):
    return -rate * y


def above_threshold(t, y, rate):
    return y[0] - 0.25


def pendulum(t, y, length):
    """The undamped pendulum, written out: theta'' = -(g / L) sin(theta)."""
    return jnp.stack([y[1], -GRAVITY / length * jnp.sin(y[0])])


def angle(t, y, length):
    return y[0]


LANDING = simlab.Event(height, direction=-1)
THRESHOLD = simlab.Event(above_threshold)
ANGLE_ZERO = simlab.Event(angle)


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_projectile_lands_at_the_analytic_time(integrator):
    z0, vx, vz = 2.0, 3.0, 7.0
    y0 = jnp.array([0.0, z0, vx, vz])
    ts = jnp.linspace(0.0, 3.0, 16)
    trajectory = simlab.simulate(
        projectile, y0, ts, event=LANDING, integrator=integrator, rtol=1e-10, atol=1e-12
    )
    impact_speed = np.sqrt(vz**2 + 2 * GRAVITY * z0)
    landing = (vz + impact_speed) / GRAVITY
    assert abs(float(trajectory.event_time) - landing) < 1e-12
    np.testing.assert_allclose(
        trajectory.event_state, [vx * landing, 0.0, vx, -impact_speed], atol=1e-11
    )
    # The solve stopped at the event: later save times were never reached.
    assert trajectory.result == simlab.RESULTS.successful
    reached = np.asarray(ts) <= landing
    assert np.all(np.isfinite(trajectory.ys[reached]))
    assert np.all(np.isnan(trajectory.ys[~reached]))


@pytest.mark.parametrize("solver", ["rodas5p", "radau5"])
def test_stiff_solvers_locate_the_landing_on_their_dense_output(solver):
    z0, vx, vz = 2.0, 3.0, 7.0
    ts = jnp.linspace(0.0, 3.0, 4)
    trajectory = simlab.simulate(
        projectile, jnp.array([0.0, z0, vx, vz]), ts, event=LANDING, solver=solver,
        rtol=1e-10, atol=1e-12,
    )  # fmt: skip
    impact_speed = np.sqrt(vz**2 + 2 * GRAVITY * z0)
    landing = (vz + impact_speed) / GRAVITY
    # The flight is a parabola, which both methods and their interpolants follow exactly.
    assert abs(float(trajectory.event_time) - landing) < 1e-10
    np.testing.assert_allclose(
        trajectory.event_state, [vx * landing, 0.0, vx, -impact_speed], atol=1e-9
    )
    assert np.all(np.isnan(trajectory.ys[np.asarray(ts) > landing]))


@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("adaptive", [True, False])
def test_decay_reaches_threshold_at_log_ratio_over_rate(integrator, adaptive):
    rate = 0.7
    ts = jnp.linspace(0.0, 5.0, 6)
    trajectory = simlab.simulate(
        decay,
        jnp.array([1.0]),
        ts,
        args=rate,
        event=THRESHOLD,
        integrator=integrator,
        adaptive=adaptive,
        dt0=0.05,
        rtol=1e-10,
        atol=1e-12,
    )
    expected = np.log(1.0 / 0.25) / rate
    # Adaptive: the solution's tolerance; fixed Tsit5 steps of 0.05: its local error.
    assert abs(float(trajectory.event_time) - expected) < 1e-9
    np.testing.assert_allclose(trajectory.event_state, [0.25], atol=1e-10)


def _scipy_pendulum_events(theta0, length, t_end):
    def rhs(t, y):
        return [y[1], -GRAVITY / length * np.sin(y[0])]

    def crossing(t, y):
        return y[0]

    solution = scipy.integrate.solve_ivp(
        rhs, (0.0, t_end), [theta0, 0.0], events=crossing, rtol=1e-12, atol=1e-12
    )
    return solution.t_events[0]


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_pendulum_zero_crossing_matches_solve_ivp_and_the_elliptic_integral(integrator):
    theta0, length = 1.2, 1.5
    ts = jnp.linspace(0.0, 3.0, 7)
    trajectory = simlab.simulate(
        pendulum,
        jnp.array([theta0, 0.0]),
        ts,
        args=length,
        event=ANGLE_ZERO,
        integrator=integrator,
        rtol=1e-11,
        atol=1e-12,
    )
    crossings = _scipy_pendulum_events(theta0, length, 3.0)
    quarter_period = np.sqrt(length / GRAVITY) * scipy.special.ellipk(np.sin(theta0 / 2) ** 2)
    assert abs(crossings[0] - quarter_period) < 1e-9  # the reference itself
    assert abs(float(trajectory.event_time) - crossings[0]) < 1e-9
    assert abs(float(trajectory.event_time) - quarter_period) < 1e-9


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_direction_selects_the_rising_crossing(integrator):
    theta0, length = 1.2, 1.5
    rising = simlab.Event(angle, direction=1)
    trajectory = simlab.simulate(
        pendulum,
        jnp.array([theta0, 0.0]),
        jnp.linspace(0.0, 3.0, 7),
        args=length,
        event=rising,
        integrator=integrator,
        rtol=1e-11,
        atol=1e-12,
    )
    crossings = _scipy_pendulum_events(theta0, length, 3.0)  # falling, rising, falling, ...
    assert abs(float(trajectory.event_time) - crossings[1]) < 1e-8
    assert float(trajectory.event_state[1]) > 0  # swinging back through the bottom


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_non_terminating_event_records_the_first_crossing_and_continues(integrator):
    recorder = simlab.Event(angle, terminate=False)
    ts = jnp.linspace(0.0, 3.0, 7)
    kwargs = dict(args=1.5, integrator=integrator, rtol=1e-11, atol=1e-12)
    recorded = simlab.simulate(pendulum, jnp.array([1.2, 0.0]), ts, event=recorder, **kwargs)
    stopped = simlab.simulate(pendulum, jnp.array([1.2, 0.0]), ts, event=ANGLE_ZERO, **kwargs)
    plain = simlab.simulate(pendulum, jnp.array([1.2, 0.0]), ts, **kwargs)
    assert abs(float(recorded.event_time) - float(stopped.event_time)) < 1e-12
    np.testing.assert_allclose(recorded.ys, plain.ys, rtol=1e-12, atol=1e-12)
    assert plain.event_time is None


def _central_difference(fn, x, step):
    return (fn(x + step) - fn(x - step)) / (2 * step)


# The lean loop's forward-mode event-time derivative (15 s) runs in make slow; make test
# checks it against the analytic one in test_lean.py's vmapped event-time derivatives.
@pytest.mark.parametrize(
    ("integrator", "mode"),
    [
        ("lean", "reverse"),
        pytest.param("lean", "forward", marks=pytest.mark.slow),
        ("diffrax", "reverse"),
        ("diffrax", "forward"),
    ],
)
def test_event_time_gradient_matches_finite_differences(integrator, mode):
    ts = jnp.linspace(0.0, 3.0, 7)
    adjoint = "forward" if mode == "forward" else None

    def crossing_time(length):
        trajectory = simlab.simulate(
            pendulum,
            jnp.array([1.2, 0.0]),
            ts,
            args=length,
            event=ANGLE_ZERO,
            integrator=integrator,
            adjoint=adjoint,
            rtol=1e-12,
            atol=1e-12,
        )
        return trajectory.event_time

    derivative = jax.grad if mode == "reverse" else jax.jacfwd
    gradient = float(derivative(crossing_time)(1.5))
    reference = float(_central_difference(crossing_time, 1.5, 1e-4))
    # The quarter period is sqrt(L / g) K(m): d tau / d L = tau / (2 L).
    assert abs(gradient - float(crossing_time(1.5)) / 3.0) < 1e-7
    assert abs(gradient - reference) < 1e-7


@pytest.mark.parametrize("adaptive", [True, False])
def test_event_state_gradient_matches_finite_differences(adaptive):
    def landing_distance(speed):
        y0 = jnp.stack([0.0, 1.0, speed, speed])  # launched at 45 degrees from 1 m
        trajectory = simlab.simulate(
            projectile,
            y0,
            jnp.linspace(0.0, 2.0, 5),
            event=LANDING,
            adaptive=adaptive,
            dt0=0.01,
            rtol=1e-10,
            atol=1e-12,
        )
        return trajectory.event_state[0]

    gradient = float(jax.grad(landing_distance)(4.0))
    reference = float(_central_difference(landing_distance, 4.0, 1e-4))
    assert abs(gradient - reference) < 1e-7


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_vmapped_members_stop_at_their_own_events(integrator):
    rates = jnp.array([0.3, 0.7, 2.0, 0.1])  # the last never reaches 0.25 before t = 5
    ts = jnp.linspace(0.0, 5.0, 11)

    def run(rate):
        return simlab.simulate(
            decay,
            jnp.array([1.0]),
            ts,
            args=rate,
            event=THRESHOLD,
            integrator=integrator,
            throw=False,
            rtol=1e-10,
            atol=1e-12,
        )

    batched = jax.vmap(run)(rates)
    for i, rate in enumerate(rates):
        single = run(rate)
        np.testing.assert_allclose(batched.event_time[i], single.event_time, rtol=1e-12)
        np.testing.assert_allclose(batched.ys[i], single.ys, rtol=1e-12, atol=1e-14)
    expected = np.log(1.0 / 0.25) / np.asarray(rates)
    np.testing.assert_allclose(batched.event_time[:3], expected[:3], rtol=1e-9)
    assert np.isnan(batched.event_time[3]) and np.all(np.isnan(batched.event_state[3]))
    assert np.all(batched.succeeded)
    assert np.all(np.isfinite(batched.ys[3]))  # it ran to the end


def infection_peak(model):
    """The epidemic peak: dI/dt = beta S I / N - gamma I crossing zero downward."""

    def growth(t, y, args):
        return model(t, y, args)[1]

    return simlab.Event(growth, direction=-1)


def peak_observable(trajectory):
    return {"peak_time": trajectory.event_time, "peak_infected": trajectory.event_state[1]}


def _scipy_peak_time(beta, gamma, population, y0, t_end):
    def rhs(t, y):
        infections = beta * y[0] * y[1] / population
        return [-infections, infections - gamma * y[1], gamma * y[1]]

    def growth(t, y):
        return rhs(t, y)[1]

    growth.direction = -1
    solution = scipy.integrate.solve_ivp(
        rhs, (0.0, t_end), y0, events=growth, rtol=1e-11, atol=1e-9
    )
    return solution.t_events[0][0] if solution.t_events[0].size else np.nan


def test_sweep_observes_the_epidemic_peak_time_and_nan_where_there_is_none(tmp_path):
    model = simlab.models.SIR(beta=0.3, gamma=0.1, population=1000.0)
    y0 = jnp.array([990.0, 10.0, 0.0])
    ts = jnp.linspace(0.0, 200.0, 5)
    betas, gammas = np.array([0.3, 0.5]), np.array([0.1, 0.6])  # 0.3 / 0.6: R0 < 1, no peak
    store = tmp_path / "peaks"
    result = simlab.sweep(
        model,
        {"beta": betas, "gamma": gammas},
        y0,
        ts,
        observable=peak_observable,
        event=infection_peak,
        store=store,
        rtol=1e-10,
        atol=1e-8,
        progress=False,
    )
    assert np.all(result.succeeded) and result.num_failed == 0
    peaks = result.to_xarray()["peak_time"]
    for beta in betas:
        for gamma in gammas:
            expected = _scipy_peak_time(beta, gamma, 1000.0, [990.0, 10.0, 0.0], 200.0)
            observed = float(peaks.sel(beta=beta, gamma=gamma))
            if np.isnan(expected):
                assert np.isnan(observed)
            else:
                assert abs(observed - expected) < 1e-6 * expected
    assert np.isnan(float(peaks.sel(beta=0.3, gamma=0.6)))
    # The event is part of the store's identity: the same store refuses another event.
    with pytest.raises(ValueError, match="event"):
        simlab.sweep(
            model,
            {"beta": betas, "gamma": gammas},
            y0,
            ts,
            observable=peak_observable,
            event=lambda model: infection_peak(model),
            store=store,
            rtol=1e-10,
            atol=1e-8,
            progress=False,
        )


def test_a_condition_returning_a_vector_is_refused():
    def both_components(t, y, args):
        return y

    with pytest.raises(ValueError, match=r"must return a scalar.*shape \(4,\)"):
        simlab.simulate(
            projectile,
            jnp.array([0.0, 1.0, 1.0, 1.0]),
            jnp.linspace(0.0, 1.0, 3),
            event=simlab.Event(both_components),
        )


def test_bad_events_are_refused():
    def above(t, y, args):
        return y[1] > 0.0

    y0, ts = jnp.array([0.0, 1.0, 1.0, 1.0]), jnp.linspace(0.0, 1.0, 3)
    with pytest.raises(ValueError, match="real number.*y\\[0\\] - level"):
        simlab.simulate(projectile, y0, ts, event=simlab.Event(above))
    with pytest.raises(ValueError, match="direction must be"):
        simlab.Event(height, direction=2)
    # What callers without runtime type checks meet:
    with without_type_checks():
        with pytest.raises(ValueError, match="callable condition"):
            simlab.Event(1.0)
        with pytest.raises(ValueError, match="simlab.Event"):
            simlab.simulate(projectile, y0, ts, event=height)


def test_event_builders_with_static_settings_are_told_apart_by_their_settings():
    """A callable Module building each member's event (as an experiment's [event] table
    does) is named with its fields in provenance and store identities: builders with
    another threshold give another name, equal ones the same."""
    from simlab.experiment._fields import StateEvent
    from simlab.integrate._events import event_name

    lower, upper = StateEvent(1, 0.1, -1), StateEvent(1, 0.2, -1)
    assert event_name(lower) != event_name(upper)
    assert event_name(lower) == event_name(StateEvent(1, 0.1, -1))
    assert "threshold=0.1" in event_name(lower)
    assert event_name(infection_peak).endswith(".infection_peak")
