"""The reversible adjoint of the symmetric symplectic solvers, in float64: gradients equal
those of stored (or checkpointed) reverse mode and central finite differences; states
rebuilt backwards return to the start to round-off; the backward pass's memory does not
grow with the number of steps; vmap; forward mode and non-symmetric methods refused."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab.integrate._symplectic import _steps
from simlab.models import Kepler

Y0 = jnp.array([0.7, 0.0, 0.0, 1.4])  # e = 0.51 about mu = 1.2: a fast perihelion passage
TS = jnp.array([0.0, 10.0, 25.0])  # 2,500 steps of 0.01 in two save intervals


def _observable_at(ts, mu, y0, *, adjoint, solver="verlet"):
    """A mixture of the saved states, so each interval's cotangent matters."""
    model = Kepler(mu=mu)
    ys = simlab.simulate(model, y0, ts, solver=solver, adaptive=False, dt0=0.01, adjoint=adjoint)
    return ys.ys[1, 1] + ys.ys[-1, 0] + 0.5 * ys.ys[-1, 3]


@eqx.filter_jit
def _observable(mu, y0, *, adjoint, solver="verlet"):
    """`_observable_at` the fixed `TS`, compiled: inside `jit` the step counts are traced."""
    return _observable_at(TS, mu, y0, adjoint=adjoint, solver=solver)


_gradient = eqx.filter_jit(jax.grad(_observable, argnums=(0, 1)))


def _top_level_gradient(mu, y0, *, adjoint, solver):
    """The gradient outside `jit`: the step counts are Python ints."""
    return jax.grad(_observable_at, argnums=(1, 2))(TS, mu, y0, adjoint=adjoint, solver=solver)


@pytest.mark.parametrize(
    ("solver", "gradient"),
    [("verlet", _gradient), ("forest_ruth", _top_level_gradient)],
    ids=["verlet-jit", "forest_ruth-top-level"],
)
def test_reversible_gradient_equals_stored_reverse_mode(solver, gradient):
    mu = jnp.asarray(1.2)
    reversible = gradient(mu, Y0, adjoint="reversible", solver=solver)
    stored = gradient(mu, Y0, adjoint=None, solver=solver)
    for ours, reference in zip(reversible, stored, strict=True):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(reference), rtol=1e-9, atol=1e-12)


def test_reversible_gradient_equals_central_finite_differences():
    mu, step = jnp.asarray(1.2), 1e-6
    gradient_mu, gradient_y0 = _gradient(mu, Y0, adjoint="reversible")

    def difference(dmu, dy0):
        plus = _observable(mu + step * dmu, Y0 + step * dy0, adjoint="reversible")
        minus = _observable(mu - step * dmu, Y0 - step * dy0, adjoint="reversible")
        return float(plus - minus) / (2 * step)

    assert float(gradient_mu) == pytest.approx(difference(1.0, jnp.zeros(4)), rel=1e-6)
    differences = [difference(0.0, e) for e in jnp.eye(4)]
    np.testing.assert_allclose(np.asarray(gradient_y0), differences, rtol=1e-6, atol=1e-8)


def test_gradient_with_respect_to_the_save_times():
    """Traced save times: the step counts are known only at run time, and the step size
    (span over count) carries the gradients of the times."""
    gradient = eqx.filter_jit(jax.grad(_observable_at))
    reversible = gradient(TS, jnp.asarray(1.2), Y0, adjoint="reversible")
    stored = gradient(TS, jnp.asarray(1.2), Y0, adjoint=None)
    np.testing.assert_allclose(np.asarray(reversible), np.asarray(stored), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("solver", ["verlet", "forest_ruth", "yoshida6"])
def test_states_rebuilt_backwards_return_to_the_start_to_round_off(solver):
    """2,000 steps forward, then 2,000 of -h, return to within 1e-12 of the start (1,100 to
    6,300 machine epsilons): 2.5 to 9 times what one ulp of change in y0 makes of the end
    state, the round-off of the steps, carried along by the flow."""
    method, h, steps = simlab.SOLVERS[solver].build(), jnp.asarray(0.01), 2000
    model = Kepler(mu=1.2)
    end = _steps(method, model, Y0, h, None, steps)
    back = _steps(method, model, end, -h, None, steps)
    one_ulp = _steps(method, model, Y0 * (1 + np.finfo(np.float64).eps), h, None, steps)
    response = float(jnp.max(jnp.abs(one_ulp - end)))
    assert float(jnp.max(jnp.abs(back - Y0))) < 30 * response


@functools.cache
def _temporary_bytes(steps: int, adjoint) -> int:
    """Scratch memory of the compiled gradient of a solve of `steps` steps (XLA's account of
    the buffers it allocates besides inputs and outputs). Under `jit` the step count is
    known at run time only, and stored reverse mode checkpoints within `max_steps`."""
    ts = jnp.array([0.0, 0.01 * steps])

    def end(mu):
        model = Kepler(mu=mu)
        ys = simlab.simulate(
            model,
            Y0,
            ts,
            solver="verlet",
            adaptive=False,
            dt0=0.01,
            max_steps=steps,
            adjoint=adjoint,
        ).ys
        return ys[-1, 0]

    return jax.jit(jax.grad(end)).lower(1.2).compile().memory_analysis().temp_size_in_bytes


def test_reverse_mode_memory_does_not_grow_with_the_number_of_steps():
    assert _temporary_bytes(4000, "reversible") == _temporary_bytes(1000, "reversible")
    assert _temporary_bytes(4000, None) > 1.5 * _temporary_bytes(1000, None)  # ~sqrt(steps)
    assert _temporary_bytes(4000, "reversible") < 0.1 * _temporary_bytes(4000, None)


def test_reversible_gradient_under_vmap():
    mus = jnp.array([0.9, 1.2, 1.5])
    batched = jax.vmap(lambda mu: _gradient(mu, Y0, adjoint="reversible"))(mus)
    for i, mu in enumerate(mus):
        single = _gradient(mu, Y0, adjoint=None)
        np.testing.assert_allclose(float(batched[0][i]), float(single[0]), rtol=1e-9)
        np.testing.assert_allclose(np.asarray(batched[1][i]), np.asarray(single[1]), rtol=1e-9)


def test_forward_mode_is_refused_with_the_adjoint_to_pass():
    with pytest.raises(ValueError, match="reverse mode only.*pass adjoint='forward'"):
        jax.jvp(lambda mu: _observable_at(TS, mu, Y0, adjoint="reversible"), (1.2,), (1.0,))


@pytest.mark.parametrize("solver", ["symplectic_euler", "mclachlan4", "tsit5"])
def test_methods_that_are_not_symmetric_are_refused(solver):
    with pytest.raises(ValueError, match="'verlet', 'forest_ruth'"):
        simlab.simulate(
            Kepler(), Y0, TS, solver=solver, adaptive=False, dt0=0.01, adjoint="reversible"
        )


def test_a_traced_step_count_stops_at_max_steps_as_the_stored_loop_does():
    """Under `jit` the count is traced: 100 steps asked, 40 allowed, on both loops."""

    @eqx.filter_jit
    def solve(dt0, adjoint):
        path = simlab.simulate(
            Kepler(mu=1.2),
            Y0,
            jnp.array([0.0, 1.0]),
            solver="verlet",
            adaptive=False,
            dt0=dt0,
            max_steps=40,
            adjoint=adjoint,
            throw=False,
        )
        return path.ys[-1], path.result

    reversible, reversible_status = solve(jnp.asarray(0.01), "reversible")
    stored, stored_status = solve(jnp.asarray(0.01), None)
    assert reversible_status == stored_status == simlab.RESULTS.max_steps_reached
    np.testing.assert_allclose(reversible, stored, rtol=1e-13, atol=1e-13)
