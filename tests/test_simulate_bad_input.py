"""Every bad input to `simulate` gets a clear error at trace time, never an XLA stack trace."""

import jax.numpy as jnp
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
        (dict(rtol=-1e-6), "rtol must be positive"),
        (dict(atol=0.0), "atol must be positive"),
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


def test_solver_names_are_case_insensitive():
    trajectory = simlab.simulate(LORENZ, Y0, TS, solver="Dopri5")
    assert bool(trajectory.succeeded)


def test_component_lookup_names_the_known_components():
    trajectory = simlab.simulate(LORENZ, Y0, TS)
    with pytest.raises(ValueError, match=r"components are \['x', 'y', 'z'\]"):
        trajectory.component("w")
