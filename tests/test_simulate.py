"""`simulate` against analytic and reference solutions, its derivatives and batching."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
from helpers import LORENZ, lorenz

import simlab
from simlab import models


def decay(t, y, rate):
    return -rate * y


def oscillator(t, y, args):
    return jnp.stack([y[1], -y[0]])


def test_exponential_decay_matches_the_analytic_solution():
    ts = jnp.linspace(0.0, 5.0, 11)
    trajectory = simlab.simulate(decay, jnp.array([2.0]), ts, args=0.7, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(trajectory.ys[:, 0], 2.0 * jnp.exp(-0.7 * ts), rtol=1e-9)
    assert trajectory.result == simlab.RESULTS.successful
    assert bool(trajectory.succeeded)


def test_harmonic_oscillator_matches_the_analytic_solution():
    ts = jnp.linspace(0.0, 20.0, 41)
    trajectory = simlab.simulate(oscillator, jnp.array([1.0, 0.0]), ts, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(trajectory.ys[:, 0], jnp.cos(ts), atol=1e-8)
    np.testing.assert_allclose(trajectory.ys[:, 1], -jnp.sin(ts), atol=1e-8)


def test_robertson_at_t40_matches_hairer_wanner_with_the_automatic_solver():
    trajectory = simlab.simulate(
        models.Robertson(), jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 40.0])
    )
    reference = np.array([0.7158, 9.185e-6, 0.2842])
    np.testing.assert_allclose(trajectory.ys[-1], reference, rtol=1e-3)


def test_lorenz_matches_scipy_dop853():
    model = LORENZ
    y0, ts = np.array([1.0, 1.0, 1.0]), np.linspace(0.0, 1.0, 11)

    def lorenz(t, y):  # the equations themselves, not the model under test
        x, y_, z = y
        return [10.0 * (y_ - x), x * (28.0 - z) - y_, x * y_ - 8 / 3 * z]

    reference = scipy.integrate.solve_ivp(
        lorenz,
        (0.0, 1.0),
        y0,
        method="DOP853",
        t_eval=ts,
        rtol=1e-12,
        atol=1e-12,
    )
    trajectory = simlab.simulate(model, jnp.asarray(y0), jnp.asarray(ts), rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(trajectory.ys, reference.y.T, rtol=1e-7, atol=1e-8)


@jax.jit
def _oscillator_error_with_fixed_step(dt0):
    ts = jnp.array([0.0, 20.0])
    trajectory = simlab.simulate(
        oscillator, jnp.array([1.0, 0.0]), ts, dt0=dt0, adaptive=False, max_steps=2048
    )
    return jnp.max(jnp.abs(trajectory.ys[-1] - jnp.array([jnp.cos(20.0), -jnp.sin(20.0)])))


def test_default_solver_converges_at_fifth_order():
    # Tsit5's leading error coefficients are tuned small, so larger steps show a
    # pre-asymptotic slope near 6; these steps are in the asymptotic range above round-off.
    step_sizes = np.array([0.1, 0.05, 0.025, 0.0125])
    errors = np.array([float(_oscillator_error_with_fixed_step(dt)) for dt in step_sizes])
    slope = np.polyfit(np.log(step_sizes), np.log(errors), 1)[0]
    assert abs(slope - 5.0) < 0.3, (slope, errors)


GRADIENT_CASES = {
    "LotkaVolterra": (
        models.LotkaVolterra,
        dict(alpha=0.55, beta=0.028, gamma=0.84, delta=0.026),
        [30.0, 4.0],
        5.0,
    ),
    "Lorenz": (models.Lorenz, dict(sigma=10.0, rho=28.0, beta=8 / 3), [1.0, 1.0, 1.0], 0.5),
    "SIR": (models.SIR, dict(beta=0.3, gamma=0.1, population=1000.0), [990.0, 10.0, 0.0], 30.0),
    "DampedPendulum": (
        models.DampedPendulum,
        dict(length=1.0, damping=0.3, gravity=9.81),
        [1.0, 0.0],
        3.0,
    ),
    "VanDerPol": (models.VanDerPol, dict(mu=1.5), [2.0, 0.0], 3.0),
    "Robertson": (models.Robertson, dict(k1=0.04, k2=3e7, k3=1e4), [1.0, 0.0, 0.0], 1.0),
}


@pytest.mark.parametrize(
    "name",
    [
        # 15 s (a stiff default solve); make test keeps the other models.
        pytest.param(name, marks=pytest.mark.slow) if name == "VanDerPol" else name
        for name in sorted(GRADIENT_CASES)
    ],
)
def test_gradient_of_a_loss_matches_central_finite_differences(name):
    cls, params, y0, t1 = GRADIENT_CASES[name]
    ts = jnp.linspace(0.0, t1, 6)

    @jax.jit
    def loss(p):
        trajectory = simlab.simulate(cls(**p), jnp.asarray(y0), ts, rtol=1e-11, atol=1e-13)
        scale = jnp.maximum(jnp.max(jnp.abs(trajectory.ys), axis=0, keepdims=True), 1e-30)
        return jnp.sum(jnp.sin(trajectory.ys / scale))

    params = {k: jnp.asarray(v) for k, v in params.items()}
    gradient = jax.grad(loss)(params)
    for key, value in params.items():
        step = 1e-5 * abs(float(value))
        up = loss({**params, key: value + step})
        down = loss({**params, key: value - step})
        finite_difference = float(up - down) / (2 * step)
        assert float(gradient[key]) == pytest.approx(finite_difference, rel=1e-5, abs=1e-12), key


def test_forward_mode_matches_reverse_mode():
    ts = jnp.linspace(0.0, 0.5, 5)

    def final_state(rho, adjoint):
        model = lorenz(rho)
        return simlab.simulate(model, jnp.ones(3), ts, adjoint=adjoint).ys[-1]

    forward = jax.jacfwd(final_state)(jnp.asarray(28.0), "forward")
    reverse = jax.jacrev(final_state)(jnp.asarray(28.0), "checkpoint")
    np.testing.assert_allclose(forward, reverse, rtol=1e-6)


def test_vmap_over_sixteen_parameter_sets_equals_a_python_loop():
    ts = jnp.linspace(0.0, 1.0, 5)
    rhos = jnp.linspace(5.0, 35.0, 16)

    @jax.jit
    def solve(rho):
        return simlab.simulate(lorenz(rho), jnp.ones(3), ts).ys

    batched = jax.vmap(solve)(rhos)
    looped = jnp.stack([solve(rho) for rho in rhos])
    np.testing.assert_allclose(batched, looped, rtol=1e-10, atol=1e-12)


def blow_up(t, y, strength):
    return strength * y**2  # y(t) = y0 / (1 - strength*y0*t): a singularity at 1/(strength*y0)


def test_a_failing_member_under_vmap_reports_its_status_and_spares_the_others():
    ts = jnp.linspace(0.0, 2.0, 5)

    def solve(strength):
        return simlab.simulate(
            blow_up, jnp.array([1.0]), ts, args=strength, max_steps=256, throw=False
        )

    strengths = jnp.array([0.1, 1.0, 0.2])  # only 1.0 blows up before t = 2
    batched = jax.jit(jax.vmap(solve))(strengths)
    assert [bool(s) for s in batched.succeeded] == [True, False, True]
    alone = solve(strengths[2])
    np.testing.assert_allclose(batched.ys[2], alone.ys, rtol=1e-12)
    np.testing.assert_allclose(batched.ys[0, :, 0], 1 / (1 - 0.1 * ts), rtol=1e-5)


def test_a_failed_solve_raises_with_throw_true():
    with pytest.raises(Exception, match="maximum number of solver steps"):
        simlab.simulate(blow_up, jnp.array([1.0]), jnp.array([0.0, 2.0]), args=1.0, max_steps=64)


def test_overflow_with_fixed_steps_is_reported_as_nonfinite_state():
    trajectory = simlab.simulate(
        blow_up,
        jnp.array([1.0]),
        jnp.array([0.0, 3.0]),
        args=50.0,
        dt0=0.1,
        adaptive=False,
        solver="euler",
        throw=False,
    )
    assert trajectory.result == simlab.RESULTS.nonfinite_state
    assert "NaN or infinite" in simlab.RESULTS[trajectory.result]


def test_the_same_call_decides_the_same_directly_under_jit_and_under_vmap():
    """Solver, integrator and result agree where the stiffness estimate and the model's
    declaration agree: a stiff Van der Pol (its stable step 2e4 times shorter than the
    span) directly, and the declaration under jit and vmap, where mu is traced."""
    model = simlab.models.VanDerPol(mu=1000.0)
    y0, ts = jnp.array([2.0, 0.0]), jnp.linspace(0.0, 20.0, 5)

    def solve(mu, ts):
        return simlab.simulate(simlab.models.VanDerPol(mu=mu), y0, ts, throw=False)

    direct = simlab.simulate(model, y0, ts)
    assert "steps for stability" in direct.solver_choice
    jitted = jax.jit(solve)(1000.0, ts)
    batched = jax.vmap(solve, in_axes=(0, None))(jnp.array([1000.0, 1000.0]), ts)
    assert direct.solver == jitted.solver == batched.solver == "rodas5p"
    assert direct.integrator == jitted.integrator == batched.integrator == "stiff"
    np.testing.assert_allclose(jitted.ys, direct.ys, rtol=1e-10)
    np.testing.assert_allclose(batched.ys[1], direct.ys, rtol=1e-10)
    explicit = dict(solver="tsit5", adaptive=False, dt0=0.01)
    short = jnp.linspace(0.0, 2.0, 5)
    fixed = simlab.simulate(simlab.models.VanDerPol(mu=2.0), y0, short, **explicit)
    fixed_jitted = jax.jit(
        lambda mu, ts: simlab.simulate(simlab.models.VanDerPol(mu=mu), y0, ts, **explicit)
    )(2.0, short)
    assert fixed.integrator == fixed_jitted.integrator == "lean"
    np.testing.assert_allclose(fixed_jitted.ys, fixed.ys, rtol=1e-12)


def test_stiff_defaults_follow_the_state_size():
    """Rodas5P for small dense systems; matrix-free Kvaerno5 above the dense limit."""
    from simlab.integrate._solvers import DENSE_JACOBIAN_LIMIT, resolve_solver, solver_name

    assert solver_name(resolve_solver(None, stiff=True, state_size=3)) == ("rodas5p")
    large = resolve_solver(None, stiff=True, state_size=DENSE_JACOBIAN_LIMIT + 1)
    assert solver_name(large) == "kvaerno5"
    assert solver_name(resolve_solver(None, stiff=False, state_size=3)) == ("tsit5")
    robertson = simlab.simulate(
        models.Robertson(),
        jnp.array([1.0, 0.0, 0.0]),
        jnp.array([0.0, 40.0]),
        rtol=1e-8,
        atol=1e-12,
    )
    # Reference at t = 40 (the widely tabulated values; SciPy Radau at rtol 1e-12 agrees).
    np.testing.assert_allclose(
        robertson.ys[-1], [0.7158270687, 9.185534764e-06, 0.2841637457], rtol=1e-6
    )


def _primitive_names(jaxpr) -> set[str]:
    """Every primitive in a jaxpr, nested ones (loop bodies, branches) included."""
    names = set()
    for equation in jaxpr.eqns:
        names.add(equation.primitive.name)
        for value in equation.params.values():
            for inner in value if isinstance(value, tuple | list) else (value,):
                if isinstance(inner, jax.extend.core.ClosedJaxpr):
                    names |= _primitive_names(inner.jaxpr)
                elif isinstance(inner, jax.extend.core.Jaxpr):
                    names |= _primitive_names(inner)
    return names


@pytest.mark.parametrize(
    "model, y0, solver, key",
    [
        (models.LotkaVolterra(alpha=1.1, beta=0.4, gamma=0.4, delta=0.1), [10.0, 5.0], "rk4", None),
        (models.OrnsteinUhlenbeck(theta=0.7, mu=0.5, sigma=0.3), [2.0], "euler_maruyama", 3),
    ],
)
def test_fixed_steps_under_jit_run_a_static_loop_and_match_the_direct_solve(model, y0, solver, key):
    """Concrete `ts` and `dt0` become arrays inside `simulate`, which a surrounding `jit`
    traces; the step count is taken before that, so the gradient under `jit` goes through a
    scan (no run-time-bounded while loop) and equals the direct one."""
    ts = np.linspace(0.0, 1.0, 5)
    key = None if key is None else jax.random.PRNGKey(key)

    def end_value(scale):
        scaled = jax.tree.map(lambda leaf: scale * leaf, model)
        trajectory = simlab.simulate(
            scaled, jnp.array(y0), ts, key=key, solver=solver, adaptive=False, dt0=0.01
        )
        return trajectory.ys[-1, 0]

    gradient = jax.grad(end_value)
    scale = jnp.asarray(1.0)
    assert "while" not in _primitive_names(jax.make_jaxpr(gradient)(scale).jaxpr)
    np.testing.assert_allclose(jax.jit(gradient)(scale), gradient(scale), rtol=1e-13)
