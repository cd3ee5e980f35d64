"""Adaptive steps in the kernel integrator (`integrator="kernel"`, `adaptive=True`), in the
Pallas interpreter on a CPU: each member takes the lean loop's own steps (its error norm,
controller and save-time clipping), so in float64 the two agree bit for bit, step counts
and statuses included. The tests marked `accelerator` hold in float32 on a TPU, where the
compiled kernel orders its arithmetic otherwise and a member's steps may differ by roundoff.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
import simlab.integrate._kernel as kernel_module
from simlab._results import status_code

FLOAT = jnp.asarray(1.0).dtype  # float64 with x64 on, float32 on an accelerator run
EXACT = FLOAT == jnp.float64
TS = jnp.linspace(0.0, 10.0, 11, dtype=FLOAT)
TOLERANCE = 1e-6 if EXACT else 1e-4


def _van_der_pol(integrator, solver="tsit5", ts=TS, **options):
    def solve(mu):
        return simlab.simulate(
            simlab.models.VanDerPol(mu=mu), jnp.array([2.0, 0.0], FLOAT), ts, solver=solver,
            rtol=TOLERANCE, atol=TOLERANCE, integrator=integrator, throw=False, **options,
        )  # fmt: skip

    return jax.jit(jax.vmap(solve))


def _assert_same_solves(kernel, lean):
    assert kernel.integrator == "kernel"
    assert bool(jnp.all(kernel.result == lean.result))
    if EXACT:
        np.testing.assert_array_equal(kernel.ys, lean.ys)
        for name in ("num_steps", "num_accepted_steps", "num_rejected_steps"):
            np.testing.assert_array_equal(kernel.stats[name], lean.stats[name])
    else:  # steps that differ by roundoff end within what the tolerance allows
        error = jnp.abs(kernel.ys - lean.ys) / (1 + jnp.abs(lean.ys))
        np.testing.assert_array_less(error[jnp.isfinite(lean.ys)], 1e-2)


@pytest.mark.accelerator
@pytest.mark.parametrize("solver", ["tsit5", "heun"])
@pytest.mark.parametrize("dt0", [None, 1e-3], ids=["first step by Hairer's rule", "dt0 given"])
def test_each_member_takes_the_lean_loops_steps(solver, dt0):
    # Stiffness from 0.1 to 10: the members take from 60 to 200 steps, over two blocks.
    mus = jnp.linspace(0.1, 10.0, 200, dtype=FLOAT)
    kernel = _van_der_pol("kernel", solver, dt0=dt0)(mus)
    lean = _van_der_pol("lean", solver, dt0=dt0)(mus)
    _assert_same_solves(kernel, lean)
    assert bool(jnp.all(kernel.succeeded))
    assert int(kernel.stats["num_steps"][0]) < int(kernel.stats["num_steps"][-1])


def _rooted(integrator, max_steps):
    """dy/dt = sqrt(a - t) y from y(0) = 1, whose field is NaN past t = a, to t = 2, a
    member per `a`."""

    def solve(a):
        return simlab.simulate(
            lambda t, y, a: jnp.sqrt(a - t) * y, jnp.array([1.0], FLOAT),
            jnp.linspace(0.0, 2.0, 5, dtype=FLOAT), args=a, dt0=0.01, max_steps=max_steps,
            integrator=integrator, throw=False,
        )  # fmt: skip

    return jax.vmap(solve)


@pytest.mark.accelerator
def test_a_member_stuck_at_nan_or_out_of_steps_fails_alone():
    # a = 1: every step past t = 1 gives NaN, so the member gets stuck there. Then with
    # fewer steps than the member with a = 5 takes, it runs out, while a = 2.5, which takes
    # fewer, still finishes.
    rates = jnp.array([5.0, 1.0, 2.5], FLOAT)
    status = {name: int(status_code(getattr(simlab.RESULTS, name))) for name in (
        "successful", "nonfinite_state", "max_steps_reached")}  # fmt: skip
    kernel, lean = _rooted("kernel", 100)(rates), _rooted("lean", 100)(rates)
    steps = [int(n) for n in lean.stats["num_steps"]]
    assert steps[2] < steps[0] < 100
    for max_steps in (100, steps[0] - 1):
        kernel, lean = _rooted("kernel", max_steps)(rates), _rooted("lean", max_steps)(rates)
        assert bool(jnp.all(kernel.result == lean.result))
        np.testing.assert_array_equal(jnp.isinf(kernel.ys), jnp.isinf(lean.ys))
        codes = list(np.asarray(status_code(kernel.result)))
        first = status["successful"] if max_steps == 100 else status["max_steps_reached"]
        assert codes[0] == first and codes[2] == status["successful"]
        if max_steps == 100:
            assert codes[1] == status["nonfinite_state"]
    ts = jnp.linspace(0.0, 2.0, 5, dtype=FLOAT)
    exact = jnp.exp(2 / 3 * (2.5**1.5 - (2.5 - ts) ** 1.5))
    np.testing.assert_allclose(kernel.ys[2, :, 0], exact, rtol=1e-5 if EXACT else 1e-3)


def test_gradients_are_the_lean_loops():
    # The kernel has no transpose: a differentiated solve takes the lean loop's derivatives,
    # in reverse mode, or with adjoint="forward" its forward sensitivities.
    def final_x(integrator, mu, **options):
        solve = _van_der_pol(integrator, ts=jnp.linspace(0.0, 2.0, 3, dtype=FLOAT), **options)
        return solve(mu[None]).ys[0, -1, 0]

    mu = jnp.asarray(2.0, FLOAT)
    kernel = jax.grad(lambda m: final_x("kernel", m))(mu)
    np.testing.assert_allclose(kernel, jax.grad(lambda m: final_x("lean", m))(mu), rtol=1e-12)
    step = 1e-6
    central = (final_x("lean", mu + step) - final_x("lean", mu - step)) / (2 * step)
    np.testing.assert_allclose(kernel, central, rtol=1e-4)
    forward = jax.jacfwd(lambda m: final_x("kernel", m, adjoint="forward"))(mu)
    np.testing.assert_allclose(forward, central, rtol=1e-4)


def test_auto_takes_the_kernel_for_adaptive_steps_on_a_tpu_only(monkeypatch):
    mus = jnp.linspace(0.1, 1.0, 4, dtype=FLOAT)
    on_a_tpu = jax.default_backend() == "tpu"
    assert _van_der_pol("auto")(mus).integrator == ("kernel" if on_a_tpu else "lean")
    monkeypatch.setattr(kernel_module, "on_tpu", lambda: True)
    jitted = jax.jit(lambda ts: jax.vmap(lambda mu: _member(mu, ts))(mus))
    assert jitted(TS).integrator == "kernel"  # the save times may be traced


def _member(mu, ts):
    return simlab.simulate(
        simlab.models.VanDerPol(mu=mu), jnp.array([2.0, 0.0], FLOAT), ts, solver="tsit5",
        rtol=TOLERANCE, atol=TOLERANCE, throw=False,
    )  # fmt: skip


def test_refuses_more_steps_than_its_floating_point_type_counts():
    # Each member counts its steps in its state's type: float32 counts exactly to 2**24.
    with pytest.raises(ValueError, match="counts up to 16777216 steps in float32"):
        simlab.simulate(
            simlab.models.VanDerPol(mu=1.0), jnp.array([2.0, 0.0], jnp.float32), TS,
            max_steps=2**25, integrator="kernel",
        )  # fmt: skip
