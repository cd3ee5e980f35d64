"""Every bad input to `simulate` gets a clear error at trace time, never an XLA stack trace."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import LORENZ, without_type_checks

import simlab
from simlab.models import Heat, Wave

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


def test_an_explicit_solver_on_a_stiff_model_fails_fast_with_a_hint():
    with pytest.raises(simlab.SimulationError, match="solver='rodas5p'"):
        simlab.simulate(
            simlab.models.Robertson(),
            jnp.array([1.0, 0.0, 0.0]),
            jnp.array([0.0, 1e5]),
            solver="tsit5",
            max_steps=2000,
        )


def _heat_solve(diffusivity, dt0, *, throw=False):
    """A forward-Euler heat solve whose stability limit is h^2 / (2 D)."""
    grid = simlab.Grid((16,), extent=1.0, boundary="neumann")
    (x,) = grid.coordinates()
    model = Heat(diffusivity=diffusivity, grid=grid)
    ts = jnp.linspace(0.0, 0.05, 3)
    return simlab.simulate(
        model, jnp.cos(jnp.pi * x), ts, solver="euler", adaptive=False, dt0=dt0, throw=throw
    )


def _heat_status(diffusivity, dt0):
    return _heat_solve(diffusivity, dt0).result


def test_an_unstable_fixed_step_fails_alike_directly_under_jit_and_under_vmap():
    # Forward Euler on the 1-D Laplacian: dt <= h^2 / (2 D) = (1/16)^2 / 2 / D.
    h = 1 / 16
    diffusivities = jnp.array([1.0, 30.0])  # dt0 is stable for D = 1 only
    dt0 = 0.5 * h**2 / 2
    direct = [_heat_status(d, dt0) for d in diffusivities]
    jitted = [jax.jit(_heat_status, static_argnums=1)(d, dt0) for d in diffusivities]
    batched = jax.jit(jax.vmap(_heat_status, in_axes=(0, None)), static_argnums=1)(
        diffusivities, dt0
    )
    for want in (simlab.RESULTS.successful, simlab.RESULTS.unstable_step):
        expected = [want == simlab.RESULTS.successful, want == simlab.RESULTS.unstable_step]
        assert [bool(status == want) for status in direct] == expected
        assert [bool(status == want) for status in jitted] == expected
        assert np.asarray(batched == want).tolist() == expected
    # A traced step too: the limit is compared with it inside the compiled solve.
    traced = jax.jit(_heat_status)(jnp.asarray(30.0), jnp.asarray(dt0))
    assert traced == simlab.RESULTS.unstable_step
    # At top level the failure is raised, with the limit and the ways out.
    limit = h**2 / (2 * 30.0)
    with pytest.raises(simlab.SimulationError, match=f"largest stable step {limit:.6g}") as error:
        _heat_solve(30.0, dt0, throw=True)
    assert "adaptive=True" in str(error.value) and "implicit" in str(error.value)
    # Under jit with throw=True the same status raises inside the compiled code.
    with pytest.raises(Exception, match="above the largest stable step"):
        jax.jit(lambda d: _heat_solve(d, dt0, throw=True).ys)(jnp.asarray(30.0)).block_until_ready()


def test_the_stability_limit_is_the_same_traced_and_matches_the_analytic_one():
    grid = simlab.Grid((16, 16), extent=1.0)
    y0 = jnp.zeros(grid.shape)

    def limit(solver, diffusivity):
        return Heat(diffusivity=diffusivity, grid=grid).max_stable_step(solver, y0)

    for solver, factor in (
        (simlab.SOLVERS["euler"].build(), 2.0),
        (simlab.SOLVERS["rk4"].build(), 2.7853),
    ):
        # Forward Euler: |1 + z| <= 1 on [-2, 0]; RK4 reaches -2.785 on the real axis.
        expected = factor * (1 / 16) ** 2 / (8 * np.asarray([0.5, 2.0]))  # max: 8 D / h^2
        direct = [float(limit(solver, d)) for d in (0.5, 2.0)]
        batched = jax.jit(jax.vmap(lambda d, s=solver: limit(s, d)))(jnp.array([0.5, 2.0]))
        np.testing.assert_allclose(direct, expected, rtol=1e-3)
        np.testing.assert_allclose(np.asarray(batched), direct, rtol=1e-12)


def test_a_chosen_fixed_step_follows_traced_parameters():
    """dt0=None picks 0.9 x the limit from the parameters' values, under vmap too, and
    matches the exact semi-discrete decay of the slowest cosine mode."""
    grid = simlab.Grid((16,), extent=1.0, boundary="neumann")
    (x,) = grid.coordinates()
    h = grid.spacing[0]
    ts = jnp.array([0.0, 0.02])

    def final(diffusivity):
        model = Heat(diffusivity=diffusivity, grid=grid)
        trajectory = simlab.simulate(
            model, jnp.cos(jnp.pi * x), ts, solver="heun", adaptive=False, throw=False
        )
        return trajectory.ys[-1], trajectory.result, trajectory.stats["num_steps"]

    diffusivities = jnp.array([0.5, 2.0])
    ys, status, steps = jax.vmap(final)(diffusivities)
    assert np.asarray(status == simlab.RESULTS.successful).tolist() == [True, True]
    rate = (2 - 2 * np.cos(np.pi * h)) / h**2
    for i, d in enumerate([0.5, 2.0]):
        direct_ys, direct_status, direct_steps = final(jnp.asarray(d))
        assert direct_status == simlab.RESULTS.successful
        assert int(steps[i]) == int(direct_steps)
        # Heun's real stability limit is 2 / |lambda_max| = h^2 / (2 D).
        assert int(steps[i]) == int(np.ceil(0.02 / (0.9 * h**2 / (2 * d)) * (1 - 1e-9)))
        np.testing.assert_allclose(ys[i], direct_ys, rtol=1e-12)
        exact = np.exp(-d * rate * 0.02) * np.cos(np.pi * np.asarray(x))
        np.testing.assert_allclose(ys[i], exact, atol=5e-4)


def test_no_stable_fixed_step_is_a_status_under_vmap():
    grid = simlab.Grid((16,))
    ts = jnp.array([0.0, 0.1])

    def status(speed):
        model = Wave(wave_speed=speed, grid=grid)
        return simlab.simulate(
            model, jnp.zeros((2, 16)), ts, solver="euler", adaptive=False, throw=False
        ).result

    statuses = jax.vmap(status)(jnp.array([1.0, 2.0]))
    assert np.asarray(statuses == simlab.RESULTS.unstable_step).tolist() == [True, True]


def test_too_many_fixed_steps_fail_alike_directly_and_under_jit():
    def status(dt0):
        return simlab.simulate(
            LORENZ, Y0, TS, adaptive=False, dt0=dt0, max_steps=100, throw=False
        ).result

    assert status(1e-3) == simlab.RESULTS.max_steps_reached
    assert jax.jit(status)(jnp.asarray(1e-3)) == simlab.RESULTS.max_steps_reached
    assert jax.jit(status)(jnp.asarray(0.02)) == simlab.RESULTS.successful
    with pytest.raises(simlab.SimulationError, match="1000 fixed steps .* raise max_steps or dt0"):
        simlab.simulate(LORENZ, Y0, TS, adaptive=False, dt0=1e-3, max_steps=100)


_CROSSING = simlab.Event(lambda t, y, args: y[0] - 0.5)
_GRID_16 = simlab.Grid((16,), extent=2 * np.pi)


@pytest.mark.parametrize(
    ("model", "y0", "settings", "advice"),
    [
        (
            simlab.models.OrnsteinUhlenbeck(theta=1.0, mu=0.0, sigma=0.3),
            jnp.ones(1),
            dict(adaptive=False, dt0=0.01, key=jax.random.PRNGKey(0)),
            "nor does any solver of a stochastic model: simulate without event= .* changes sign",
        ),
        (
            simlab.models.OrnsteinUhlenbeck(theta=1.0, mu=0.0, sigma=0.3),
            jnp.ones(1),
            dict(solver="spark", key=jax.random.PRNGKey(0)),
            "nor does any solver of a stochastic model: simulate without event=",
        ),
        (
            simlab.models.Pendulum(length=1.0),
            jnp.array([1.0, 0.0]),
            dict(solver="verlet", adaptive=False, dt0=0.01),
            "nor does any symplectic solver: for a Hamiltonian model with an event pass an "
            "explicit solver .* such as solver='dopri8'",
        ),
        (
            Heat(diffusivity=0.1, grid=_GRID_16),
            jnp.ones(16),
            dict(solver="etdrk4", adaptive=False, dt0=0.05),
            "nor does ETDRK4: for a stiff model with an event pass solver='rodas5p'",
        ),
    ],
    ids=["sde", "sde_adaptive", "symplectic", "exponential"],
)
def test_an_event_on_a_solver_that_cannot_locate_it_names_what_can(model, y0, settings, advice):
    with pytest.raises(ValueError, match=f"does not locate events, {advice}") as error:
        simlab.simulate(model, y0, TS, event=_CROSSING, **settings)
    if not isinstance(model, Heat):  # advice for stiff ODEs does not apply to these
        assert "solver='rodas5p'" not in str(error.value)


def test_the_symplectic_integrator_on_an_ode_says_it_needs_a_hamiltonian_model():
    # Lorenz is no Hamiltonian system: integrator='lean' would run, but not symplectically.
    with pytest.raises(
        ValueError,
        match=r"integrator='symplectic' needs a Hamiltonian model, split into kinetic and "
        r"potential energies .*; Lorenz is not one\. For an ODE pass integrator='auto' "
        r"\(the default\), 'lean', 'stiff' or 'diffrax'",
    ):
        simlab.simulate(LORENZ, Y0, TS, integrator="symplectic")
    # A Hamiltonian model with the default solver: the fix is a symplectic solver.
    with pytest.raises(
        ValueError,
        match=r"integrator='symplectic' runs symplectic splitting methods .*; got Tsit5\. "
        r"Pass a symplectic solver such as solver='verlet', with adaptive=False",
    ):
        simlab.simulate(
            simlab.models.Pendulum(length=1.0), jnp.array([1.0, 0.0]), TS, integrator="symplectic"
        )
