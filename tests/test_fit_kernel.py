"""Fits whose solves run in the kernel integrator (`integrator="kernel"`, the Pallas
interpreter on a CPU): a fixed-step fit keeps its save times concrete for it, so its
compiled loop knows the step count per save interval, as a sweep's chunks do."""

import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import simlab
import simlab._simulate
import simlab.integrate._kernel

TS = np.linspace(0.0, 2.0, 11)  # equal intervals of 4 steps: a step count known when traced
FIXED = dict(solver="rk4", adaptive=False, dt0=0.05)
TRUE = simlab.models.LotkaVolterra(alpha=1.0, beta=0.5, gamma=1.0, delta=0.4)
START = simlab.models.LotkaVolterra(alpha=0.8, beta=0.5, gamma=1.2, delta=0.4)
Y0 = jnp.asarray([2.0, 1.0])
PARAMS = ["alpha", "gamma"]
# The same steps in another order of operations, then the same optimiser steps.
AGREEMENT = 1e-9


@pytest.fixture(scope="module")
def observations():
    return simlab.simulate(TRUE, Y0, TS, **FIXED).ys


@pytest.fixture
def integrators(monkeypatch):
    """The names of the integrators `simulate` selects (once per traced solve)."""
    names = []

    def spy(*args, **kwargs):
        chosen = select(*args, **kwargs)
        names.append(chosen.name)
        return chosen

    select = simlab._simulate.select_integrator
    monkeypatch.setattr(simlab._simulate, "select_integrator", spy)
    return names


def _fit(observations, integrator, **settings):
    return simlab.fit(
        START,
        TS,
        observations,
        y0=Y0,
        params=PARAMS,
        noise_scale=0.1,
        simulate_options=dict(FIXED, integrator=integrator),
        progress=False,
        **settings,
    )


def _assert_same_fit(result, reference):
    for name in PARAMS:
        np.testing.assert_allclose(result.params[name], reference.params[name], rtol=AGREEMENT)
        np.testing.assert_allclose(result.stderr[name], reference.stderr[name], rtol=1e-6)


def test_a_fixed_step_fit_in_the_kernel_recovers_the_parameters_as_the_lean_loop_does(
    observations, integrators
):
    kernel = _fit(observations, "kernel")
    assert set(integrators) == {"kernel"}  # every solve: the loop's, the covariance's
    assert bool(kernel.converged)
    for name in PARAMS:
        np.testing.assert_allclose(kernel.params[name], getattr(TRUE, name), rtol=1e-7)
    _assert_same_fit(kernel, _fit(observations, "lean"))


@pytest.mark.slow  # tens of seconds in Pallas' interpreter
def test_auto_takes_the_kernel_for_a_multi_start_fit_on_a_tpu_only(
    observations, integrators, monkeypatch
):
    settings = dict(starts=3, bounds={p: (0.5, 2.0) for p in PARAMS}, key=jr.key(0))
    # On a CPU "auto" keeps the lean loop, and the fit traces its save times as before.
    cpu = _fit(observations, "auto", **settings)
    assert set(integrators) == {"lean"}
    assert cpu.problem.experiments[0].concrete_ts is None
    # With a TPU as the default backend the fit keeps its save times concrete, so the
    # step count is known when its compiled loop traces the solves and "auto" takes the
    # kernel (here in the Pallas interpreter).
    monkeypatch.setattr(simlab.integrate._kernel, "on_tpu", lambda: True)
    integrators.clear()
    tpu = _fit(observations, "auto", **settings)
    assert set(integrators) == {"kernel"}
    np.testing.assert_array_equal(tpu.problem.experiments[0].concrete_ts.array(), TS)
    _assert_same_fit(tpu, cpu)
    np.testing.assert_allclose(tpu.starts.loss, cpu.starts.loss, rtol=1e-6, atol=1e-12)
