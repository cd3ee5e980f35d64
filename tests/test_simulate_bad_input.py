"""Every bad input to `simulate` gets a clear error at trace time, never an XLA stack trace."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import LORENZ, without_type_checks

import simlab

TS = jnp.linspace(0.0, 1.0, 5)
Y0 = jnp.ones(3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(y0=jnp.ones(2)), r"y0 has shape \(2,\), but Lorenz has state shape \(3,\)"),
        (dict(y0=jnp.array([1, 1, 1])), "y0 must be floating point"),
        (dict(y0=jnp.array([1.0, jnp.nan, 1.0])), "y0 must be finite"),
        (dict(ts=jnp.ones((2, 3))), "ts must be a 1-D array"),
        (dict(ts=jnp.array([0.0])), "at least two save times"),
        (dict(ts=jnp.array([0, 1, 2])), "ts must hold floating-point times"),
        (
            dict(ts=jnp.array([0.0, 1.0, 1.0, 2.0])),
            r"strictly increasing; got ts\[2\] = 1 <= ts\[1\]",
        ),
        (dict(ts=jnp.array([0.0, jnp.inf])), "ts must be finite"),
        (dict(solver="rk45"), "unknown solver 'rk45'; use one of"),
        (dict(solver=3), "unknown solver 3"),
        (dict(adjoint="magic"), "unknown adjoint 'magic'"),
        (dict(rtol=-1e-6), r"rtol must lie in \(0, 0.5\)"),
        (dict(rtol=0.7), r"rtol must lie in \(0, 0.5\)"),
        (dict(rtol=float("inf")), r"rtol must lie in \(0, 0.5\)"),
        (dict(atol=0.0), "atol must be positive"),
        (dict(dt0=float("inf")), "dt0 must be positive and finite"),
        (dict(adaptive=False, dt0=2.0), "longer than the whole span"),
        (dict(options=simlab.SolveOptions(), rtol=1e-3), "either as options= or as keywords"),
        (dict(max_steps=0), "max_steps must be a positive integer"),
        (dict(dt0=-0.1), "dt0 must be positive"),
        (dict(adaptive=False), "adaptive=False takes fixed steps and needs a step: pass dt0"),
        (dict(adaptive=False, dt0=1e-6, max_steps=100), "raise max_steps or dt0"),
    ],
)
def test_bad_input_is_refused_with_a_message_that_names_the_fix(kwargs, message):
    arguments = dict(y0=Y0, ts=TS) | kwargs
    y0, ts = arguments.pop("y0"), arguments.pop("ts")
    with pytest.raises(ValueError, match=message), without_type_checks():
        simlab.simulate(LORENZ, y0, ts, **arguments)


def test_a_vector_field_of_the_wrong_shape_is_refused():
    def broadcasting(t, y, args):
        return jnp.ones((3, 3))  # would broadcast against the state and "succeed"

    with pytest.raises(ValueError, match=r"returns shape \(3, 3\) for a state of shape \(3,\)"):
        simlab.simulate(broadcasting, Y0, TS)


def test_traced_bad_values_are_caught_inside_the_compiled_solve():
    """Checks on values only known at run time give a status under jit and vmap."""

    def final_status(rho, ts):
        model = simlab.models.Lorenz(sigma=10.0, rho=rho, beta=8 / 3)
        return simlab.simulate(model, Y0, ts, throw=False).result

    solve = jax.jit(jax.vmap(final_status, in_axes=(0, None)))
    status = solve(jnp.array([28.0, -1.0]), TS)
    assert np.asarray(status == simlab.RESULTS.successful).tolist() == [True, False]
    assert np.asarray(status == simlab.RESULTS.parameter_out_of_range).tolist() == [False, True]
    decreasing = jax.jit(final_status)(28.0, TS[::-1])
    assert decreasing == simlab.RESULTS.invalid_times
    with pytest.raises(Exception, match="not strictly increasing"):
        jax.jit(lambda ts: simlab.simulate(LORENZ, Y0, ts).ys)(TS[::-1])


def test_a_failed_top_level_solve_raises_simlabs_error_with_the_status_message():
    with pytest.raises(simlab.SimulationError, match="maximum number of solver steps"):
        simlab.simulate(LORENZ, Y0, jnp.array([0.0, 100.0]), max_steps=10)


def test_solver_names_are_case_insensitive():
    trajectory = simlab.simulate(LORENZ, Y0, TS, solver="Dopri5")
    assert bool(trajectory.succeeded)


def test_component_lookup_names_the_known_components():
    trajectory = simlab.simulate(LORENZ, Y0, TS)
    with pytest.raises(ValueError, match=r"components are \['x', 'y', 'z'\]"):
        trajectory.component("w")
