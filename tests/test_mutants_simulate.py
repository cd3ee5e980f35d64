"""Paths of `simulate` the mutation run found unchecked by the fast simulate tests, each
against an analytic solution."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab


def test_forward_mode_through_an_imex_solve_equals_the_exact_sensitivity():
    """Heat on a periodic line, one Fourier mode: the semi-discrete amplitude is
    exp(D lam t) with lam = (2 cos(k h) - 2) / h², so d(amplitude)/dD = lam t exp(D lam t).
    `adjoint="forward"` must reach the KenCarp solve (jax.jacfwd through it)."""
    n, extent, t1 = 16, 2 * np.pi, 0.3
    grid = simlab.Grid((n,), extent=extent)
    (x,) = grid.coordinates()
    h, k = extent / n, 2.0
    lam = (2 * np.cos(k * h) - 2) / h**2
    y0 = jnp.sin(k * x)

    def amplitude(diffusivity):
        model = simlab.models.Heat(diffusivity=diffusivity, grid=grid)
        ys = simlab.simulate(
            model, y0, jnp.array([0.0, t1]), solver="kencarp4", rtol=1e-10, atol=1e-12,
            adjoint="forward",
        ).ys  # fmt: skip
        return jnp.sum(ys[-1] * y0) / jnp.sum(y0 * y0)

    diffusivity = jnp.asarray(0.5)
    value, slope = jax.jvp(amplitude, (diffusivity,), (jnp.ones_like(diffusivity),))
    np.testing.assert_allclose(value, np.exp(0.5 * lam * t1), rtol=1e-7)
    np.testing.assert_allclose(slope, lam * t1 * np.exp(0.5 * lam * t1), rtol=1e-6)


def _single_precision_lotka_volterra():
    """Lotka–Volterra with float32 rates, for float32 states (strict promotion)."""
    rates = {"alpha": 1.1, "beta": 0.4, "gamma": 0.4, "delta": 0.1}
    return simlab.models.LotkaVolterra(**{k: jnp.float32(v) for k, v in rates.items()})


def test_a_float32_state_takes_the_float32_default_tolerances():
    """With rtol and atol unset, a single-precision solve uses single precision's defaults
    (1e-4, 1e-7): the same steps as passing them, fewer than at tighter tolerances (double
    precision's defaults, 1e-6, would be below 100 float32 epsilons)."""
    model = _single_precision_lotka_volterra()
    y0, ts = jnp.array([10.0, 5.0], jnp.float32), jnp.linspace(0.0, 20.0, 5, dtype=jnp.float32)
    default = simlab.simulate(model, y0, ts)
    single = simlab.simulate(model, y0, ts, rtol=1e-4, atol=1e-7)
    tighter = simlab.simulate(model, y0, ts, rtol=2e-5, atol=1e-8)
    assert default.ys.dtype == jnp.float32
    assert int(default.stats["num_steps"]) == int(single.stats["num_steps"])
    assert int(default.stats["num_steps"]) < int(tighter.stats["num_steps"])
    np.testing.assert_array_equal(default.ys, single.ys)


def test_integer_times_and_an_implicit_solver_on_the_lean_loop_are_refused_with_the_fix():
    model = simlab.models.LotkaVolterra(alpha=1.1, beta=0.4, gamma=0.4, delta=0.1)
    y0 = jnp.array([10.0, 5.0])
    with pytest.raises(ValueError, match=r"dtype int.*Pass e\.g\. jnp\.asarray\(ts, dtype=float\)"):
        simlab.simulate(model, y0, jnp.arange(5))
    with pytest.raises(ValueError, match="integrator='lean' runs explicit Runge-Kutta solvers"):
        simlab.simulate(model, y0, jnp.linspace(0.0, 1.0, 3), solver="kvaerno5", integrator="lean")


def test_fixed_steps_are_counted_with_the_roundoff_of_float32_times():
    """0.09 / 0.03 is 3.0000002 in float32: three steps of dt0 = 0.03 reach t = 0.09, so
    max_steps=3 suffices (a float64 slack would count four and refuse the solve); the
    three RK4 steps of the linear Lotka–Volterra prey (no predators) give e^(alpha t)."""
    model = _single_precision_lotka_volterra()
    ts = jnp.array([0.0, 0.09], jnp.float32)
    assert float(ts[1] / jnp.float32(0.03)) > 3  # the roundoff this test is about
    y0 = jnp.array([1.0, 0.0], jnp.float32)
    trajectory = simlab.simulate(
        model, y0, ts, solver="rk4", adaptive=False, dt0=jnp.float32(0.03), max_steps=3
    )
    assert int(trajectory.stats["num_steps"]) == 3
    np.testing.assert_allclose(trajectory.ys[-1, 0], np.exp(1.1 * 0.09), rtol=1e-6)


def test_simulate_with_etdrk4_propagates_a_fourier_mode_exactly():
    """Through simulate, ETDRK4 applies exp(t L) of the stencil Laplacian itself: one step
    per interval reproduces the semi-discrete mode exp(D lam t) sin(kx) to roundoff."""
    n, extent, diffusivity, k = 16, 2 * np.pi, 0.3, 2.0
    grid = simlab.Grid((n,), extent=extent)
    (x,) = grid.coordinates()
    h = extent / n
    rate = diffusivity * (2 * np.cos(k * h) - 2) / h**2
    y0 = jnp.sin(k * x)
    ts = jnp.array([0.0, 0.5, 4.0])
    trajectory = simlab.simulate(
        simlab.models.Heat(diffusivity=diffusivity, grid=grid), y0, ts, solver="etdrk4",
        adaptive=False, dt0=3.5,
    )  # fmt: skip
    assert trajectory.integrator == "exponential"
    assert int(trajectory.stats["num_steps"]) == 2
    for t, state in zip(ts, trajectory.ys, strict=True):
        np.testing.assert_allclose(state, np.exp(rate * float(t)) * y0, atol=1e-13)
