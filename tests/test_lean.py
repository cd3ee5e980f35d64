"""The lean integrator, `simulate`'s default for explicit Runge–Kutta solves."""

import contextlib
from unittest import mock

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
from helpers import LORENZ, lorenz, with_dtype
from jax.experimental import io_callback

import simlab
import simlab.integrate._lean as _lean
from simlab.integrate._solvers import SOLVERS

LORENZ_Y0 = jnp.array([1.0, 1.0, 1.0])
TS = jnp.linspace(0.0, 1.0, 6)


def oscillator(t, y, args):
    """The harmonic oscillator: from (1, 0) the solution is (cos t, -sin t)."""
    return jnp.stack([y[1], -y[0]])


def oscillator_exact(ts):
    return jnp.stack([jnp.cos(ts), -jnp.sin(ts)], axis=-1)


def blow_up(t, y, args):
    """dy/dt = a y^2 from y(0) = 1 reaches infinity at t = 1/a."""
    return args * y**2


@pytest.mark.parametrize("solver", ["tsit5", "rk4"])
def test_fixed_steps_match_diffrax(solver):
    kwargs = dict(solver=solver, adaptive=False, dt0=0.02)
    lean = simlab.simulate(LORENZ, LORENZ_Y0, TS, integrator="lean", **kwargs)
    reference = simlab.simulate(LORENZ, LORENZ_Y0, TS, integrator="diffrax", **kwargs)
    np.testing.assert_allclose(lean.ys, reference.ys, rtol=1e-11, atol=1e-11)
    assert int(lean.stats["num_steps"]) == int(reference.stats["num_steps"]) == 50
    assert lean.result == reference.result == simlab.RESULTS.successful


def test_adaptive_steps_match_diffrax_to_tolerance():
    kwargs = dict(rtol=1e-10, atol=1e-10)
    lean = simlab.simulate(LORENZ, LORENZ_Y0, TS, integrator="lean", **kwargs)
    reference = simlab.simulate(LORENZ, LORENZ_Y0, TS, integrator="diffrax", **kwargs)
    # Lorenz amplifies local errors by about e^(0.9 t); both solves are within ~1e-8.
    np.testing.assert_allclose(lean.ys, reference.ys, rtol=0, atol=1e-7)
    # The same controller, so about the same work (the lean loop also lands on save times).
    ratio = int(lean.stats["num_steps"]) / int(reference.stats["num_steps"])
    assert 0.8 < ratio < 1.3


def test_adaptive_error_follows_tolerance_on_analytic_solution():
    ts = jnp.linspace(0.0, 10.0, 21)
    errors = []
    for tolerance in (1e-6, 1e-9):
        trajectory = simlab.simulate(
            oscillator,
            jnp.array([1.0, 0.0]),
            ts,
            rtol=tolerance,
            atol=tolerance,
            integrator="lean",
        )
        errors.append(float(jnp.max(jnp.abs(trajectory.ys - oscillator_exact(ts)))))
        assert errors[-1] < 100 * tolerance
    assert errors[1] < errors[0] / 100


@pytest.mark.parametrize(("solver", "order"), [("rk4", 4), ("tsit5", 5)])
def test_fixed_step_convergence_order(solver, order):
    ts = jnp.array([0.0, 2.0])
    steps = np.array([0.2, 0.1, 0.05])
    errors = [
        float(
            jnp.max(
                jnp.abs(
                    simlab.simulate(
                        oscillator,
                        jnp.array([1.0, 0.0]),
                        ts,
                        solver=solver,
                        adaptive=False,
                        dt0=float(dt),
                        integrator="lean",
                    ).ys[-1]
                    - oscillator_exact(ts[-1])
                )
            )
        )
        for dt in steps
    ]
    slope = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(slope - order) < 0.3, (slope, errors)


def test_fixed_steps_land_on_uneven_save_times():
    ts = jnp.array([0.0, 0.1, 0.45, 1.0, 2.3])
    trajectory = simlab.simulate(
        oscillator,
        jnp.array([1.0, 0.0]),
        ts,
        solver="rk4",
        adaptive=False,
        dt0=0.05,
        integrator="lean",
    )
    np.testing.assert_allclose(trajectory.ys, oscillator_exact(ts), atol=1e-6)
    # ceil(interval / dt0) steps per interval: 2 + 7 + 11 + 26.
    assert int(trajectory.stats["num_steps"]) == 46


def _lorenz_batch(integrator, adaptive):
    def one(rho, y0):
        return simlab.simulate(
            lorenz(rho),
            y0,
            TS,
            adaptive=adaptive,
            dt0=None if adaptive else 0.02,
            rtol=1e-8,
            atol=1e-8,
            throw=False,
            integrator=integrator,
        )

    return one


@pytest.mark.parametrize("adaptive", [False, True])
def test_vmapped_members_equal_separate_solves(adaptive):
    rhos = jnp.array([5.0, 14.0, 28.0, 99.0])
    y0s = LORENZ_Y0[None] * jnp.arange(1.0, 5.0)[:, None]
    one = _lorenz_batch("lean", adaptive)
    batch = jax.jit(jax.vmap(one))(rhos, y0s)
    for i in range(rhos.shape[0]):
        alone = one(rhos[i], y0s[i])
        np.testing.assert_allclose(batch.ys[i], alone.ys, rtol=1e-12, atol=1e-12)
        assert int(batch.stats["num_steps"][i]) == int(alone.stats["num_steps"])
    # Per-trajectory step sizes: the chaotic members take more steps than the calm one.
    if adaptive:
        assert int(batch.stats["num_steps"][0]) < int(batch.stats["num_steps"][3])


@pytest.mark.parametrize(
    "ts, tolerance, max_steps",
    [(TS, 1e-8, 150), (jnp.linspace(0.0, 1.0, 61), 1e-6, 100)],
    ids=["steps between saves", "a save every step"],
)
def test_a_tpus_dense_saves_equal_the_scattered_ones(monkeypatch, ts, tolerance, max_steps):
    """A TPU writes a members-last batch's saves by selects over the save times instead of
    a scatter (`_scatters_are_slow`), holding each landed state until a member lands again:
    the same states, bit for bit, and the same steps, including a member that runs out of
    steps (its unreached save times hold inf). With 60 save intervals, two members land on
    every step (60 steps), so held states are written at almost every step."""
    rhos = jnp.array([5.0, 14.0, 28.0, 99.0])
    y0s = LORENZ_Y0[None] * jnp.arange(1.0, 5.0)[:, None]

    def one(rho, y0):
        return simlab.simulate(
            lorenz(rho), y0, ts, rtol=tolerance, atol=tolerance, max_steps=max_steps, throw=False
        )

    scattered = jax.jit(jax.vmap(one))(rhos, y0s)
    monkeypatch.setattr(_lean, "_scatters_are_slow", lambda: True)
    jax.clear_caches()
    dense = jax.jit(jax.vmap(one))(rhos, y0s)
    jax.clear_caches()
    assert np.isinf(scattered.ys[3, -1]).all()  # out of steps before the end
    assert np.isfinite(scattered.ys[3, 1]).all()
    np.testing.assert_array_equal(dense.ys, scattered.ys)
    np.testing.assert_array_equal(dense.stats["num_steps"], scattered.stats["num_steps"])


CHIRP_END = 2.0
CHIRP_RATE = 10.0


def chirp_speed(t, late):
    """The angular speed of a rotation that speeds up (`late = 1`: phase `c t^2`) or slows
    down (`late = 0`: phase `c (2 T t - t^2)`), so that one member's steps crowd the end
    of the run and the other's its start."""
    return 2 * CHIRP_RATE * (late * t + (1 - late) * (CHIRP_END - t))


def chirp(t, y, late):
    return chirp_speed(t, late) * jnp.stack([-y[1], y[0]])


def test_vmapped_members_never_wait_for_each_other_at_save_times():
    """A batch runs as many loop iterations as its slowest member takes steps alone: the
    members, whose steps crowd opposite ends of the run, no longer advance in lockstep
    save interval by save interval (which would cost about 1.5 times as many here)."""
    evaluations = []

    def counted_chirp(t, y, late):
        # One call per member per evaluation of the vector field, running or finished.
        zero = io_callback(lambda x: evaluations.append(1) or np.zeros_like(x), late, late)
        return chirp(t, y, late) + zero

    ts = jnp.linspace(0.0, CHIRP_END, 21)
    y0 = jnp.array([1.0, 0.0])

    def one(late):
        return simlab.simulate(counted_chirp, y0, ts, args=late, rtol=1e-7, atol=1e-7)

    lates = jnp.array([0.0, 1.0])
    batch = jax.jit(jax.vmap(one))(lates)
    batch_evaluations = len(evaluations)
    alone_evaluations = []
    for i, late in enumerate(lates):
        evaluations.clear()
        alone = jax.jit(one)(late)
        alone_evaluations.append(len(evaluations))
        assert int(batch.stats["num_steps"][i]) == int(alone.stats["num_steps"])
        np.testing.assert_allclose(batch.ys[i], alone.ys, rtol=1e-12, atol=1e-12)
        reference = scipy.integrate.solve_ivp(
            lambda t, y, late=float(late): chirp_speed(t, late) * np.array([-y[1], y[0]]),
            (0.0, CHIRP_END),
            np.asarray(y0),
            method="DOP853",
            t_eval=np.asarray(ts),
            rtol=1e-12,
            atol=1e-12,
        )
        np.testing.assert_allclose(batch.ys[i], reference.y.T, rtol=0, atol=1e-5)
    assert batch_evaluations == len(lates) * max(alone_evaluations)


def test_status_codes_match_diffrax():
    cases = [
        # (model, y0, ts, settings, expected status)
        (LORENZ, LORENZ_Y0, TS, dict(max_steps=5), simlab.RESULTS.max_steps_reached),
        (
            blow_up,
            jnp.array([1.0]),
            jnp.linspace(0.0, 2.0, 5),
            dict(adaptive=False, dt0=0.01, args=1.0),
            simlab.RESULTS.nonfinite_state,
        ),
        (
            blow_up,
            jnp.array([1.0]),
            jnp.linspace(0.0, 2.0, 5),
            dict(dt0=0.01, max_steps=500, args=1.0),
            simlab.RESULTS.max_steps_reached,
        ),
    ]
    for model, y0, ts, settings, expected in cases:
        lean = simlab.simulate(model, y0, ts, throw=False, integrator="lean", **settings)
        reference = simlab.simulate(model, y0, ts, throw=False, integrator="diffrax", **settings)
        assert lean.result == reference.result == expected, settings
        # Save times the solve never reached hold inf (or NaN after a blow-up), as in Diffrax.
        assert bool(jnp.all(~jnp.isfinite(lean.ys[-1])))
    with pytest.raises(Exception, match="maximum number"):
        simlab.simulate(LORENZ, LORENZ_Y0, TS, max_steps=5, integrator="lean")


def test_failed_member_leaves_the_others_alone():
    rates = jnp.array([0.0, 1.0, 0.1])  # the middle member blows up at t = 1

    def one(rate):
        return simlab.simulate(
            blow_up,
            jnp.array([1.0]),
            jnp.linspace(0.0, 2.0, 5),
            dt0=0.01,
            max_steps=400,
            args=rate,
            throw=False,
            integrator="lean",
        )

    batch = jax.vmap(one)(rates)
    assert [bool(s) for s in batch.succeeded] == [True, False, True]
    np.testing.assert_allclose(batch.ys[0, :, 0], 1.0)
    exact = 1 / (1 - 0.1 * jnp.linspace(0.0, 2.0, 5))
    np.testing.assert_allclose(batch.ys[2, :, 0], exact, rtol=1e-5)


def _pendulum_final_angle(damping, integrator, adaptive, adjoint=None):
    model = simlab.models.DampedPendulum(length=1.0, damping=damping)
    trajectory = simlab.simulate(
        model,
        jnp.array([1.0, 0.0]),
        jnp.linspace(0.0, 2.0, 5),
        adaptive=adaptive,
        dt0=None if adaptive else 0.01,
        rtol=1e-11,
        atol=1e-11,
        integrator=integrator,
        adjoint=adjoint,
    )
    return trajectory.ys[-1, 0]


def test_reverse_mode_gradient_of_fixed_steps():
    damping, h = 0.3, 1e-5
    grad = jax.grad(_pendulum_final_angle)(damping, "lean", False)
    central = (
        _pendulum_final_angle(damping + h, "lean", False)
        - _pendulum_final_angle(damping - h, "lean", False)
    ) / (2 * h)
    np.testing.assert_allclose(grad, central, rtol=1e-6)


def test_forward_mode_gradient_of_adaptive_steps():
    damping, h = 0.3, 1e-4

    def final_angle(d):
        return _pendulum_final_angle(d, "lean", True, adjoint="forward")

    _, tangent = jax.jvp(final_angle, (damping,), (1.0,))
    central = (final_angle(damping + h) - final_angle(damping - h)) / (2 * h)
    np.testing.assert_allclose(tangent, central, rtol=1e-5)


LV_TS = jnp.linspace(0.0, 5.0, 6)
LV_WEIGHTS = jnp.linspace(0.5, 1.5, 12).reshape(6, 2)


def _lotka_volterra_loss(rates, y0, adjoint=None, adaptive=True):
    alpha, beta, gamma, delta = rates
    model = simlab.models.LotkaVolterra(alpha=alpha, beta=beta, gamma=gamma, delta=delta)
    trajectory = simlab.simulate(
        model,
        y0,
        LV_TS,
        adaptive=adaptive,
        dt0=None if adaptive else 0.01,
        rtol=1e-10,
        atol=1e-10,
        adjoint=adjoint,
    )
    return jnp.sum(LV_WEIGHTS * trajectory.ys**2)


@contextlib.contextmanager
def _recording_members_last_solves():
    """Records `(members_last, state shape)` for each solve run through `_members_last`."""
    solved = []
    original = _lean._members_last

    def recording(params, rest, state0, schedule, solve, **settings):
        def recorded_solve(field, state0, schedule, members_last):
            solved.append((members_last, state0.shape))
            return solve(field, state0, schedule, members_last)

        return original(params, rest, state0, schedule, recorded_solve, **settings)

    with mock.patch.object(_lean, "_members_last", recording):
        yield solved


@contextlib.contextmanager
def _counting_sensitivities():
    """Records `adaptive` for each solve that carries forward sensitivities."""
    calls = []
    original = _lean._integrate_with_sensitivities

    def counting(*args, **kwargs):
        calls.append(kwargs["adaptive"])
        return original(*args, **kwargs)

    with mock.patch.object(_lean, "_integrate_with_sensitivities", counting):
        yield calls


@pytest.mark.parametrize("adaptive", [True, False])
def test_sensitivities_give_the_derivatives_of_the_loop_in_both_modes(adaptive):
    # 6 differentiated scalars: the default adjoint carries forward sensitivities in the
    # step (reverse mode contracts them); adjoint="checkpoint" differentiates the loop.
    rates, y0 = jnp.array([1.1, 0.4, 0.4, 0.1]), jnp.array([10.0, 5.0])
    argnums = (0, 1)
    with _counting_sensitivities() as calls:
        auto = jax.grad(_lotka_volterra_loss, argnums)(rates, y0, None, adaptive)
        forward = jax.jacfwd(_lotka_volterra_loss, argnums)(rates, y0, "forward", adaptive)
    assert calls == [adaptive, adaptive]
    loop = jax.grad(_lotka_volterra_loss, argnums)(rates, y0, "checkpoint", adaptive)
    for a, b, c in zip(auto, forward, loop, strict=True):
        np.testing.assert_allclose(a, c, rtol=1e-9)
        np.testing.assert_allclose(b, c, rtol=1e-9)
    h = 1e-6
    step = jnp.array([0.0, h, 0.0, 0.0])
    central = (
        _lotka_volterra_loss(rates + step, y0, None, adaptive)
        - _lotka_volterra_loss(rates - step, y0, None, adaptive)
    ) / (2 * h)
    np.testing.assert_allclose(auto[0][1], central, rtol=1e-6)


DECAY_RATES = jnp.array([[0.1, 0.5, 1.0], [0.2, 0.3, 0.4]])
DECAY_Y0 = jnp.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])


def _decay_total(rates, y0, end, adaptive):
    """sum_i y_i(end) of dy_i/dt = -k_i y_i, which is sum_i y0_i exp(-k_i end)."""
    trajectory = simlab.simulate(
        lambda t, y, args: -args * y,
        y0,
        jnp.stack([0.0 * end, 0.5 * end, end]),
        args=rates,
        adaptive=adaptive,
        dt0=None if adaptive else 0.01,
        rtol=1e-10,
        atol=1e-10,
    )
    return jnp.sum(trajectory.ys[-1])


@pytest.mark.parametrize("adaptive", [False, True])
def test_vmapped_sensitivities_give_the_exact_derivatives(adaptive):
    # Members with their own rates and y0, sharing y0, and each with its own end time (then
    # fixed steps differ per member): forward sensitivities under vmap, whether the
    # members run as one state or as a batched loop, give the exact derivatives.
    def gradient(rates, y0, end):
        return jax.grad(_decay_total, (0, 1))(rates, y0, end, adaptive)

    ends = jnp.array([1.0, 1.5])
    with _counting_sensitivities() as calls:
        cases = [
            (jax.vmap(gradient, (0, 0, None))(DECAY_RATES, DECAY_Y0, 1.0), DECAY_Y0, 1.0),
            (
                jax.vmap(gradient, (0, None, None))(DECAY_RATES, DECAY_Y0[0], 1.0),
                jnp.broadcast_to(DECAY_Y0[0], DECAY_Y0.shape),
                1.0,
            ),
            (jax.vmap(gradient)(DECAY_RATES, DECAY_Y0, ends), DECAY_Y0, ends[:, None]),
        ]
    assert calls == [adaptive] * 3
    for (d_rates, d_y0), y0, end in cases:
        decay = jnp.exp(-DECAY_RATES * end)
        np.testing.assert_allclose(d_rates, -end * y0 * decay, rtol=1e-8)
        np.testing.assert_allclose(d_y0, decay, rtol=1e-8)


@pytest.mark.parametrize("adaptive", [False, True])
def test_second_derivatives_through_vmapped_sensitivities(adaptive):
    # Forward mode over the sensitivities of members run as one state:
    # d^2/dk_i dk_j of sum y(T) = delta_ij T^2 y0_i exp(-k_i T).
    def hessian(rates, y0):
        return jax.jacfwd(jax.grad(_decay_total))(rates, y0, 1.0, adaptive)

    exact = jax.vmap(jnp.diag)(DECAY_Y0 * jnp.exp(-DECAY_RATES))
    np.testing.assert_allclose(
        jax.vmap(hessian)(DECAY_RATES, DECAY_Y0), exact, rtol=1e-8, atol=1e-12
    )


def test_vmapped_adaptive_sensitivities_keep_each_members_steps_and_status():
    # dy/dt = k y^2, y(0) = 1: y = 1 / (1 - k t) blows up at t = 1/k. Run as one state with
    # the members last, the member with k = 2 fails before t = 1 while the others finish
    # with y(1) = 1 / (1 - k) and dy(1)/dk = 1 / (1 - k)^2, each in its own steps.
    def solve(k):
        trajectory = simlab.simulate(
            lambda t, y, args: args * y**2,
            jnp.array([1.0]),
            jnp.array([0.0, 0.5, 1.0]),
            args=k,
            rtol=1e-10,
            atol=1e-10,
            adjoint="forward",
            max_steps=2000,
            throw=False,
        )
        return trajectory.ys[-1, 0], (trajectory.succeeded, trajectory.stats["num_steps"])

    ks = jnp.array([0.25, 2.0, 0.5])
    with _counting_sensitivities() as calls:
        y1, dy1, (succeeded, steps) = jax.vmap(
            lambda k: jax.jvp(solve, (k,), (jnp.ones_like(k),), has_aux=True)
        )(ks)
    assert calls == [True]
    np.testing.assert_array_equal(succeeded, [True, False, True])
    alone = [int(solve(k)[1][1]) for k in ks]
    np.testing.assert_array_equal(steps, alone)
    finished = np.asarray(succeeded)
    np.testing.assert_allclose(y1[finished], 1 / (1 - ks[finished]), rtol=1e-8)
    np.testing.assert_allclose(dy1[finished], 1 / (1 - ks[finished]) ** 2, rtol=1e-7)


def _blow_up(k, ts, **settings):
    """dy/dt = k y^2, y(0) = 1: y = 1 / (1 - k t), which blows up at t = 1/k."""
    return simlab.simulate(
        lambda t, y, args: args * y**2,
        jnp.array([1.0]),
        ts,
        args=k,
        rtol=1e-10,
        atol=1e-10,
        max_steps=2000,
        throw=False,
        **settings,
    )


BLOW_UP_KS = jnp.array([0.25, 2.0, 0.5])


def test_a_vmapped_adaptive_solve_runs_members_last_each_in_its_own_steps():
    # Run as one state with the members last, the member with k = 2 fails before t = 1
    # while the others finish with y = 1 / (1 - k t), each in the steps it takes alone.
    ts = jnp.array([0.0, 0.5, 1.0])

    def solve(k):
        trajectory = _blow_up(k, ts)
        return trajectory.ys[:, 0], trajectory.succeeded, trajectory.stats["num_steps"]

    with _recording_members_last_solves() as solved:
        ys, succeeded, steps = jax.vmap(solve)(BLOW_UP_KS)
    assert [shape for members_last, shape in solved if members_last] == [(1, 3)]
    np.testing.assert_array_equal(succeeded, [True, False, True])
    for k, member_ys, member_steps in zip(BLOW_UP_KS, ys, steps, strict=True):
        alone_ys, _, alone_steps = solve(k)
        assert int(member_steps) == int(alone_steps)
        np.testing.assert_allclose(member_ys, alone_ys, rtol=1e-13)
    finished = np.asarray(succeeded)
    exact = 1 / (1 - BLOW_UP_KS[finished, None] * ts[None])
    np.testing.assert_allclose(ys[finished], exact, rtol=1e-8)


def test_a_vmapped_fixed_step_solve_runs_members_last_as_each_member_alone():
    rhos = jnp.linspace(20.0, 30.0, 5)

    def solve(rho, y0):
        model = simlab.models.Lorenz(sigma=10.0, rho=rho, beta=8 / 3)
        return simlab.simulate(model, y0, TS, adaptive=False, dt0=0.01).ys

    y0s = LORENZ_Y0[None] + 0.1 * jnp.arange(5.0)[:, None]
    with _recording_members_last_solves() as solved:
        batched = jax.vmap(solve)(rhos, y0s)
    assert [shape for members_last, shape in solved if members_last] == [(3, 5)]
    for rho, y0, member in zip(rhos, y0s, batched, strict=True):
        np.testing.assert_allclose(member, solve(rho, y0), rtol=1e-13, atol=1e-13)


def _fixed_step_loss(params, *, batch_of_one):
    sigma, rho = params
    model = simlab.models.Lorenz(sigma=sigma, rho=rho, beta=8 / 3)

    def solve(y0):
        return simlab.simulate(model, y0, TS, solver="rk4", adaptive=False, dt0=0.01).ys

    ys = jax.vmap(solve)(LORENZ_Y0[None])[0] if batch_of_one else solve(LORENZ_Y0)
    return jnp.sum(ys**2)


def test_a_hessian_through_a_vmap_of_one_fixed_step_solve_is_that_of_the_solve_alone():
    # Second derivatives batch the solve members first while its primal runs members
    # last: both must agree that the step counts, shared by all members, do not vary.
    params = jnp.array([10.0, 28.0])
    hessian = jax.jit(jax.hessian(_fixed_step_loss), static_argnames="batch_of_one")
    batched = hessian(params, batch_of_one=True)
    np.testing.assert_allclose(batched, hessian(params, batch_of_one=False), rtol=1e-12)
    grad = jax.jit(jax.grad(_fixed_step_loss), static_argnames="batch_of_one")
    eps = 1e-5
    central = [
        (grad(params + eps * e, batch_of_one=False) - grad(params - eps * e, batch_of_one=False))
        / (2 * eps)
        for e in jnp.eye(2)
    ]
    np.testing.assert_allclose(batched, jnp.stack(central), rtol=1e-6)


def _damped_oscillator_crossing(omega, level, **settings):
    """x'' + 0.2 omega x' + omega^2 x = 0 from x = 1 at rest, in a field that closes over
    `omega`; the event is x falling through `level`, which the condition closes over."""

    def field(t, y, args):
        return jnp.stack([y[1], -0.2 * omega * y[1] - omega**2 * y[0]])

    falling_through_level = simlab.Event(lambda t, y, args: y[0] - level, direction=-1)
    return simlab.simulate(
        field,
        jnp.array([1.0, 0.0]),
        jnp.linspace(0.0, 3.0, 4),
        event=falling_through_level,
        rtol=1e-11,
        atol=1e-12,
        **settings,
    )


OMEGAS = jnp.array([1.0, 2.0, 3.0])


def _first_zero_of_the_damped_oscillator(omega):
    """x = exp(-0.1 omega t) (cos(w t) + 0.1 omega / w sin(w t)), w = omega sqrt(0.99):
    first zero where tan(w t) = -w / (0.1 omega)."""
    w = omega * np.sqrt(0.99)
    return (np.pi - np.arctan(w / (0.1 * omega))) / w


@pytest.mark.parametrize("adaptive", [True, False])
def test_vmapped_event_times_of_functions_that_close_over_the_swept_values(adaptive):
    settings = dict(adaptive=adaptive, dt0=None if adaptive else 1e-3)

    def event_time(omega, level):
        return _damped_oscillator_crossing(omega, level, **settings).event_time

    levels = jnp.zeros(3)
    times = jax.vmap(event_time)(OMEGAS, levels)
    member_time = jax.jit(event_time)  # one compile for every member
    for omega, level, member in zip(OMEGAS, levels, times, strict=True):
        np.testing.assert_allclose(member, member_time(omega, level), rtol=1e-13)
    exact = _first_zero_of_the_damped_oscillator(np.asarray(OMEGAS))
    np.testing.assert_allclose(times, exact, rtol=1e-9 if adaptive else 1e-8)


def test_a_vmapped_solve_of_a_field_that_closes_over_the_swept_value_is_each_members():
    def solve(omega):
        def field(t, y, args):
            return jnp.stack([y[1], -(omega**2) * y[0]])

        return simlab.simulate(field, jnp.array([1.0, 0.0]), TS, rtol=1e-11, atol=1e-12).ys

    batched = jax.vmap(solve)(OMEGAS)
    member_solve = jax.jit(solve)  # one compile for every member
    for omega, member in zip(OMEGAS, batched, strict=True):
        np.testing.assert_allclose(member, member_solve(omega), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(batched[:, :, 0], np.cos(np.outer(OMEGAS, TS)), atol=1e-9)


# Reverse mode takes twice as long to compile: make slow runs it.
@pytest.mark.parametrize("adjoint", [pytest.param(None, marks=pytest.mark.slow), "forward"])
def test_vmapped_event_time_derivatives_are_each_members_own(adjoint):
    # The event time scales as 1 / omega: d tau / d omega = -tau / omega.
    derivative = jax.grad if adjoint is None else jax.jacfwd

    def event_time(omega):
        return _damped_oscillator_crossing(omega, 0.0, adjoint=adjoint).event_time

    slopes = jax.vmap(derivative(event_time))(OMEGAS)
    member_slope = jax.jit(derivative(event_time))  # one compile for every member
    for omega, slope in zip(OMEGAS, slopes, strict=True):
        np.testing.assert_allclose(slope, member_slope(omega), rtol=1e-12)
    exact = _first_zero_of_the_damped_oscillator(np.asarray(OMEGAS))
    np.testing.assert_allclose(slopes, -exact / np.asarray(OMEGAS), rtol=1e-8)


def test_members_with_their_own_save_times_or_tolerances_step_apart_or_together():
    # Save times that differ between members keep them apart (members first); tolerances
    # that differ are per-member vectors of the one members-last state.
    ts = jnp.array([[0.0, 0.5, 1.0], [0.0, 0.25, 0.4], [0.0, 0.5, 1.0]])
    rtols = jnp.array([1e-10, 1e-6, 1e-8])

    def by_times(k, ts):
        return _blow_up(k, ts).ys[:, 0]

    def by_tolerance(k, rtol):
        trajectory = simlab.simulate(
            lambda t, y, args: args * y**2,
            jnp.array([1.0]),
            ts[0],
            args=k,
            rtol=rtol,
            atol=rtol,
            throw=False,
        )
        return trajectory.ys[:, 0], trajectory.stats["num_steps"]

    with _recording_members_last_solves() as solved_apart:
        apart = jax.vmap(by_times)(BLOW_UP_KS, ts)
    with _recording_members_last_solves() as solved_together:
        together, steps = jax.vmap(by_tolerance)(BLOW_UP_KS, rtols)
    assert not any(members_last for members_last, _ in solved_apart)
    assert [shape for members_last, shape in solved_together if members_last] == [(1, 3)]
    for k, times, member_ys in zip(BLOW_UP_KS, ts, apart, strict=True):
        np.testing.assert_allclose(member_ys, by_times(k, times), rtol=1e-13)
    for k, rtol, member_ys, member_steps in zip(BLOW_UP_KS, rtols, together, steps, strict=True):
        alone_ys, alone_steps = by_tolerance(k, rtol)
        assert int(member_steps) == int(alone_steps)
        np.testing.assert_allclose(member_ys, alone_ys, rtol=1e-13)
    assert len(set(np.asarray(steps).tolist())) == 3


def test_nested_vmaps_of_an_adaptive_solve_match_each_member_alone():
    rhos = jnp.linspace(20.0, 30.0, 6).reshape(2, 3)

    def final_state(rho):
        model = simlab.models.Lorenz(sigma=10.0, rho=rho, beta=8 / 3)
        return simlab.simulate(model, LORENZ_Y0, TS, rtol=1e-9, atol=1e-9).ys[-1]

    batched = jax.vmap(jax.vmap(final_state))(rhos)
    for rho, member in zip(rhos.reshape(-1), batched.reshape(-1, 3), strict=True):
        np.testing.assert_allclose(member, final_state(rho), rtol=1e-12)


@pytest.mark.parametrize("solver", ["tsit5", "dopri5", "bosh3"])
def test_stored_stage_states_leave_the_step_unchanged(solver):
    # A state large enough for its stage states to be stored once (MATERIALISED_STAGE_SIZE)
    # gives the same step as the same state with every stage state fused into its reader.
    tableau = SOLVERS[solver].build().tableau
    members = jax.vmap(lorenz)(jnp.linspace(20.0, 30.0, 256))
    y = jnp.stack([jnp.ones(256), jnp.linspace(1.0, 2.0, 256), jnp.linspace(20.0, 30.0, 256)])
    assert y.size >= _lean.MATERIALISED_STAGE_SIZE

    def field(t, y):  # members along the last axis
        return jax.vmap(lambda m, y: m(t, y, None), in_axes=(0, -1), out_axes=-1)(members, y)

    def step(y):
        return _lean._runge_kutta_step(field, tableau, 0.0, y, field(0.0, y), 1e-3)

    stored = jax.jit(step)(y)
    with mock.patch.object(_lean, "MATERIALISED_STAGE_SIZE", y.size + 1):
        fused = jax.jit(step)(y)
    for a, b in zip(stored, fused, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("adaptive", [False, True])
def test_a_vmap_over_one_member_hands_its_batch_to_the_vmap_around_it(adaptive):
    # As a fit does: its starts are vmapped around a vmap over each experiment's initial
    # states. With one initial state the inner batch is that member alone, and the outer
    # batch runs as one state with its members last (y and its sensitivities to 3 rates,
    # 2 members), with d/dk_i of sum_i y_i(1) = -y0_i exp(-k_i).
    def gradient(rates, y0):
        one = jax.vmap(lambda y: jax.grad(_decay_total)(rates, y, 1.0, adaptive))
        return one(y0[None])[0]

    with _recording_members_last_solves() as solved:
        d_rates = jax.vmap(gradient)(DECAY_RATES, DECAY_Y0)
    assert (True, (4, 3, 2)) in solved
    assert all(shape[-1] != 1 for members_last, shape in solved if members_last)
    np.testing.assert_allclose(d_rates, -DECAY_Y0 * jnp.exp(-DECAY_RATES), rtol=1e-8)


def test_many_differentiated_scalars_go_through_the_loop():
    # 20 decay rates: above FORWARD_SENSITIVITY_LIMIT, reverse mode runs through the loop;
    # d/dk_i of sum_i y_i(T) = -T y0_i exp(-k_i T).
    rates = jnp.linspace(0.1, 2.0, 20)
    y0 = jnp.linspace(1.0, 3.0, 20)
    exact = -y0 * jnp.exp(-rates)  # at T = 1
    with mock.patch.object(_lean, "_integrate_with_sensitivities", side_effect=AssertionError):
        for adaptive in (True, False):
            gradient = jax.grad(_decay_total)(rates, y0, 1.0, adaptive)
            np.testing.assert_allclose(gradient, exact, rtol=1e-7)


def test_auto_takes_the_lean_loop_for_every_explicit_runge_kutta_solve():
    calls = []
    original = _lean.lean_solve

    def counting(*args, **kwargs):
        calls.append(kwargs["adaptive"])
        return original(*args, **kwargs)

    with mock.patch.object(_lean, "lean_solve", counting):
        fixed = simlab.simulate(LORENZ, LORENZ_Y0, TS, adaptive=False, dt0=0.02)
        off_grid = simlab.simulate(LORENZ, LORENZ_Y0, TS, adaptive=False, dt0=0.03)
        adaptive = simlab.simulate(LORENZ, LORENZ_Y0, TS)
        jax.jit(lambda y0, ts: simlab.simulate(LORENZ, y0, ts, adaptive=False, dt0=0.02).ys)(
            LORENZ_Y0, TS
        )
    assert calls == [False, False, True, False]
    assert fixed.integrator == off_grid.integrator == adaptive.integrator == "lean"
    assert adaptive.solver == "tsit5"
    reference = simlab.simulate(
        LORENZ, LORENZ_Y0, TS, adaptive=False, dt0=0.02, integrator="diffrax"
    )
    np.testing.assert_allclose(fixed.ys, reference.ys, rtol=1e-11, atol=1e-11)
    # Implicit solvers and adjoints the lean loop does not implement go to Diffrax.
    for settings in (dict(adjoint="direct"), dict(solver="kvaerno5")):
        trajectory = simlab.simulate(LORENZ, LORENZ_Y0, TS, **settings)
        assert trajectory.integrator == "diffrax"


def test_float32_stays_float32():
    ts = jnp.linspace(0.0, 1.0, 6, dtype=jnp.float32)
    for adaptive in (False, True):
        trajectory = simlab.simulate(
            with_dtype(LORENZ, jnp.float32),
            LORENZ_Y0.astype(jnp.float32),
            ts,
            adaptive=adaptive,
            dt0=0.02,
            rtol=1e-4,
            atol=1e-4,
            integrator="lean",
        )
        assert trajectory.ys.dtype == jnp.float32
        reference = simlab.simulate(LORENZ, LORENZ_Y0, TS, adaptive=False, dt0=0.002)
        np.testing.assert_allclose(trajectory.ys, reference.ys, atol=2e-2)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(integrator="fast"), "unknown integrator 'fast'"),
        (dict(integrator="lean", solver="kvaerno5"), "explicit Runge-Kutta"),
        (dict(integrator="lean", adjoint="backsolve"), "adjoint=None"),
        (dict(integrator="lean", adjoint=dfx.ForwardMode()), "adjoint=None"),
        (dict(solver="rk4"), "no error estimate for adaptive steps"),
    ],
)
def test_bad_settings_are_refused_with_the_fix(settings, message):
    with pytest.raises(ValueError, match=message):
        simlab.simulate(LORENZ, LORENZ_Y0, TS, **settings)


LONG_ROLLOUT_TS = jnp.array([0.0, 1.0])  # concrete under jit, so "auto" takes the lean loop


def test_reverse_mode_through_a_long_fixed_step_rollout_checkpoints():
    # 10⁴ RK4 steps of a 256² float64 field: storing every step would take ~20 GiB.
    def loss(rate):
        trajectory = simlab.simulate(
            lambda t, y, a: -a * y,
            jnp.ones((256, 256)),
            LONG_ROLLOUT_TS,
            args=rate,
            dt0=1e-4,
            adaptive=False,
            solver="rk4",
            max_steps=20_000,
        )
        return jnp.sum(trajectory.ys[-1])

    compiled = jax.jit(jax.grad(loss)).lower(1.0).compile()
    assert compiled.memory_analysis().temp_size_in_bytes < 2**30


def test_forward_sensitivities_run_through_pallas_stencils():
    # The Pallas Laplacian differentiates in forward mode itself, so the lean loop's
    # forward sensitivities carry it: the gradient equals the XLA stencil's.
    grid = simlab.Grid((8, 8), extent=1.0)
    x, y = jnp.meshgrid(*grid.coordinates(), indexing="ij")
    u0 = jnp.sin(2 * jnp.pi * x) * jnp.sin(2 * jnp.pi * y) + 0.3 * jnp.cos(2 * jnp.pi * x)
    ts = jnp.array([0.0, 0.005, 0.01])

    def energy(diffusivity, impl):
        model = simlab.models.Heat(diffusivity=diffusivity, grid=grid, impl=impl)
        trajectory = simlab.simulate(model, u0, ts, adaptive=False, dt0=0.001)
        return jnp.sum(trajectory.ys[-1] ** 2)

    with _counting_sensitivities() as calls:
        pallas = jax.grad(energy)(0.1, "pallas")
    assert calls == [False]
    np.testing.assert_allclose(pallas, jax.grad(energy)(0.1, "xla"), rtol=1e-12)
