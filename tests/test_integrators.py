"""The integrator interface: a new integrator plugs in with one registry line, and the
default solver turns stiff where an explicit one would spend its steps on stability."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab.integrate import AbstractIntegrator, Problem, Solution
from simlab.integrate._loops import fixed_steps_per_interval


class MidpointByHand(eqx.Module):
    """A solver no built-in integrator knows: the explicit midpoint rule."""


class MidpointIntegrator(AbstractIntegrator):
    """Fixed midpoint steps in a scan, defined only here: what a new file would hold."""

    name = "midpoint_by_hand"
    runs = "the midpoint rule by hand"
    adaptive_steps = False

    def accepts_solver(self, solver):
        return isinstance(solver, MidpointByHand)

    def solve(self, problem: Problem) -> Solution:
        steps = fixed_steps_per_interval(problem.ts, problem.dt0)
        assert isinstance(steps, int)  # equal save intervals in these tests

        def field(t, y):
            return problem.model(t, y, problem.args)

        def interval(y, bounds):
            t0, t1 = bounds
            h = (t1 - t0) / steps

            def step(i, y):
                t = t0 + i * h
                return y + h * field(t + h / 2, y + h / 2 * field(t, y))

            y = jax.lax.fori_loop(0, steps, step, y)
            return y, y

        _, ys = jax.lax.scan(interval, problem.y0, (problem.ts[:-1], problem.ts[1:]))
        total = jnp.asarray(steps * (problem.ts.shape[0] - 1))
        stats = {"num_steps": total, "num_accepted_steps": total, "num_rejected_steps": 0 * total}
        ys = jnp.concatenate([problem.y0[None], ys])
        return Solution(ys, simlab.RESULTS.successful, stats)


@pytest.fixture
def midpoint_registered():
    simlab.integrate.register_integrator(MidpointIntegrator())
    yield
    simlab.integrate.unregister_integrator(MidpointIntegrator.name)


def _forced_decay(t, y, rate):
    return -rate * y + jnp.cos(t)


def _midpoint_reference(rate: float, y0: float, ts: np.ndarray, steps: int) -> np.ndarray:
    """The same rule in plain NumPy: an independent computation of what the loop must give."""
    ys, y = [y0], y0
    for t0, t1 in zip(ts[:-1], ts[1:], strict=True):
        h = (t1 - t0) / steps
        for i in range(steps):
            t = t0 + i * h
            half = y + h / 2 * (-rate * y + np.cos(t))
            y = y + h * (-rate * half + np.cos(t + h / 2))
        ys.append(y)
    return np.array(ys)


def test_an_integrator_defined_outside_the_package_runs_through_simulate(midpoint_registered):
    ts = jnp.linspace(0.0, 2.0, 5)
    settings = dict(solver=MidpointByHand(), adaptive=False, dt0=0.05, args=0.7)
    trajectory = simlab.simulate(_forced_decay, jnp.asarray(1.0), ts, **settings)
    assert trajectory.integrator == "midpoint_by_hand"
    assert trajectory.solver == "MidpointByHand"
    assert int(trajectory.stats["num_steps"]) == 40
    expected = _midpoint_reference(0.7, 1.0, np.asarray(ts), 10)
    np.testing.assert_allclose(trajectory.ys, expected, rtol=1e-13)

    # Batched and differentiated like any other: d y(T) / d rate against central differences.
    def final(rate):
        return simlab.simulate(_forced_decay, jnp.asarray(1.0), ts, **{**settings, "args": rate})

    finals = jax.vmap(lambda rate: final(rate).ys[-1])(jnp.array([0.5, 0.7]))
    np.testing.assert_allclose(finals[1], expected[-1], rtol=1e-13)
    gradient = jax.grad(lambda rate: final(rate).ys[-1])(0.7)
    h = 1e-6
    central = (final(0.7 + h).ys[-1] - final(0.7 - h).ys[-1]) / (2 * h)
    np.testing.assert_allclose(gradient, central, rtol=1e-7)


def test_a_registered_integrator_states_what_it_cannot_run(midpoint_registered):
    ts = jnp.linspace(0.0, 1.0, 3)
    with pytest.raises(ValueError, match="no error estimate for adaptive steps"):
        simlab.simulate(_forced_decay, jnp.asarray(1.0), ts, solver=MidpointByHand(), args=1.0)
    with pytest.raises(ValueError, match="midpoint_by_hand integrator does not locate events"):
        simlab.simulate(
            _forced_decay,
            jnp.asarray(1.0),
            ts,
            solver=MidpointByHand(),
            adaptive=False,
            dt0=0.1,
            args=1.0,
            event=simlab.Event(lambda t, y, args: y - 0.5),
        )
    with pytest.raises(ValueError, match="integrator='lean' runs explicit Runge-Kutta solvers"):
        simlab.simulate(
            _forced_decay,
            jnp.asarray(1.0),
            ts,
            solver=MidpointByHand(),
            adaptive=False,
            dt0=0.1,
            args=1.0,
            integrator="lean",
        )


def test_an_unregistered_solver_object_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="unknown solver"):
        simlab.SolveOptions(solver=MidpointByHand())
    with pytest.raises(ValueError, match="unknown solver"):
        simlab.simulate(
            _forced_decay, jnp.asarray(1.0), jnp.array([0.0, 1.0]), solver=MidpointByHand()
        )


def test_registering_twice_or_registering_a_non_integrator_is_refused(midpoint_registered):
    with pytest.raises(ValueError, match="registered already"):
        simlab.integrate.register_integrator(MidpointIntegrator())
    with pytest.raises(TypeError, match="AbstractIntegrator"):
        simlab.integrate.register_integrator(MidpointByHand())


def test_integrator_names_follow_registering_and_unregistering():
    name = MidpointIntegrator.name
    simlab.SolveOptions(integrator="lean")  # the names are read (and kept) before the change
    simlab.integrate.register_integrator(MidpointIntegrator())
    try:
        assert simlab.SolveOptions(integrator=name).integrator == name
    finally:
        simlab.integrate.unregister_integrator(name)
    with pytest.raises(ValueError, match="unknown integrator"):
        simlab.SolveOptions(integrator=name)


class CountingMidpointIntegrator(MidpointIntegrator):
    """The midpoint integrator, declaring that it needs its step count when traced."""

    counts_steps_when_traced = True


def test_whether_an_integrator_counts_its_steps_follows_registering_and_unregistering():
    from simlab.integrate._registry import counts_steps_when_traced

    name = MidpointIntegrator.name
    assert not counts_steps_when_traced(name)  # asked once before registering
    for integrator, counts in ((MidpointIntegrator(), False), (CountingMidpointIntegrator(), True)):
        simlab.integrate.register_integrator(integrator)
        try:
            assert counts_steps_when_traced(name) is counts
        finally:
            simlab.integrate.unregister_integrator(name)
    assert not counts_steps_when_traced(name)


def test_heat_to_steady_state_picks_the_stiff_default_and_says_why():
    # 64 cells on [0, 1) with D = 1: the 3-point Laplacian's fastest mode decays at
    # 4 D / h^2 = 16384 per unit time, so Tsit5 would need ~1e5 steps to reach t = 20
    # (and ran out of max_steps); the slowest mode, 4 pi^2 D, is gone long before.
    grid = simlab.Grid((64,), extent=1.0)
    (x,) = grid.coordinates()
    y0 = 1.0 + 0.5 * jnp.sin(2 * jnp.pi * x)
    ts = jnp.array([0.0, 0.01, 20.0])
    model = simlab.models.Heat(diffusivity=1.0, grid=grid)
    trajectory = simlab.simulate(model, y0, ts)
    assert (trajectory.solver, trajectory.integrator) == ("rodas5p", "stiff")
    assert "explicit solver would need about" in trajectory.solver_choice
    # The discrete sine mode decays at (2 - 2 cos(2 pi h)) / h^2 exactly.
    h = 1 / 64
    rate = (2 - 2 * np.cos(2 * np.pi * h)) / h**2
    exact = 1.0 + 0.5 * np.exp(-rate * 0.01) * np.sin(2 * np.pi * np.asarray(x))
    np.testing.assert_allclose(trajectory.ys[1], exact, atol=1e-5)
    np.testing.assert_allclose(trajectory.ys[-1], 1.0, atol=1e-8)

    # The same choice under jit and vmap over y0, and under grad over the diffusivity.
    @jax.jit
    def final_jitted(y0):
        return simlab.simulate(model, y0, ts).ys[-1]

    np.testing.assert_allclose(final_jitted(y0), trajectory.ys[-1], rtol=1e-12)
    batch = jax.vmap(final_jitted)(jnp.stack([y0, 2 * y0]))
    np.testing.assert_allclose(batch[1], 2 * trajectory.ys[-1], rtol=1e-10)

    def first_save(diffusivity):
        model = simlab.models.Heat(diffusivity=diffusivity, grid=grid)
        return jnp.sum(simlab.simulate(model, y0, ts).ys[1] * jnp.sin(2 * jnp.pi * x))

    # d/dD of sum(u(0.01) sin): the mode's amplitude 0.5 e^{-D r t} times sum(sin^2) = 32.
    expected = -0.5 * rate * 0.01 * np.exp(-rate * 0.01) * 32
    np.testing.assert_allclose(jax.grad(first_save)(1.0), expected, rtol=1e-4)


def test_slow_diffusion_stays_explicit():
    grid = simlab.Grid((64,), extent=1.0)
    (x,) = grid.coordinates()
    model = simlab.models.Heat(diffusivity=1e-3, grid=grid)
    trajectory = simlab.simulate(model, jnp.sin(2 * jnp.pi * x), jnp.array([0.0, 20.0]))
    assert (trajectory.solver, trajectory.integrator) == ("tsit5", "lean")
    assert trajectory.solver_choice is None
    estimate = simlab.integrate.explicit_step_estimate(model, x, jnp.array([0.0, 20.0]))
    assert 10 < estimate < simlab.integrate.EXPLICIT_STEP_LIMIT


def test_sweeps_and_fits_solve_heat_as_a_direct_call_would():
    # Inside a sweep or a fit the diffusivity is traced; both pin the solver that a direct
    # call on their starting model picks, so the 32-cell run to t = 20 (~2.5e4 explicit
    # steps) is stiff there too, and members equal direct solves.
    grid = simlab.Grid((32,), extent=1.0)
    (x,) = grid.coordinates()
    y0 = 1.0 + 0.5 * jnp.sin(2 * jnp.pi * x)
    ts = jnp.array([0.0, 0.002, 0.004, 20.0])

    def direct(diffusivity):
        return simlab.simulate(simlab.models.Heat(diffusivity=diffusivity, grid=grid), y0, ts)

    assert direct(1.0).solver == "rodas5p"
    swept = simlab.sweep(
        simlab.models.Heat(diffusivity=1.0, grid=grid),
        {"diffusivity": [0.8, 1.2]},
        y0,
        ts,
        progress=False,
    )
    for member, diffusivity in enumerate((0.8, 1.2)):
        np.testing.assert_allclose(
            swept.observables["trajectory"][member], direct(diffusivity).ys, rtol=1e-10
        )
    fitted = simlab.fit(
        simlab.models.Heat(diffusivity=0.6, grid=grid),
        ts,
        direct(1.0).ys,
        y0=y0,
        params=["diffusivity"],
        progress=False,
    )
    np.testing.assert_allclose(fitted.params["diffusivity"], 1.0, rtol=1e-5)


CLOSURE_OMEGAS = jnp.array([1.0, 2.0, 3.0])  # the members take different numbers of steps
CLOSURE_TS = jnp.linspace(0.0, 1.0, 3)


@pytest.mark.parametrize(
    "settings",
    [
        dict(),
        dict(adjoint="forward"),
        dict(adaptive=False, dt0=1e-3),
        # 16 s each; make test keeps the lean loop's three ways.
        pytest.param(dict(integrator="diffrax"), marks=pytest.mark.slow),
        pytest.param(dict(solver="rodas5p"), marks=pytest.mark.slow),
    ],
    ids=["lean", "lean-forward", "lean-fixed", "diffrax", "stiff"],
)
def test_derivatives_through_a_field_that_closes_over_the_parameter(settings):
    # x'' = -omega^2 x from x = 1 at rest: x(1) = cos(omega), d x(1) / d omega = -sin(omega).
    derivative = jax.jacfwd if settings.get("adjoint") == "forward" else jax.grad
    tolerances = {} if settings.get("adaptive") is False else dict(rtol=1e-10, atol=1e-12)

    def final_x(omega):
        def field(t, y, args):
            return jnp.stack([y[1], -(omega**2) * y[0]])

        ys = simlab.simulate(field, jnp.array([1.0, 0.0]), CLOSURE_TS, **tolerances, **settings).ys
        return ys[-1, 0]

    slopes = jax.vmap(derivative(final_x))(CLOSURE_OMEGAS)
    np.testing.assert_allclose(slopes, -np.sin(CLOSURE_OMEGAS), rtol=1e-8)
    np.testing.assert_allclose(derivative(final_x)(CLOSURE_OMEGAS[1]), slopes[1], rtol=1e-10)


def test_diffrax_saves_the_final_state_at_t1_and_inf_where_a_member_ran_out_of_steps():
    """The Diffrax integrator's save at `t1` is the solve's final state (not an
    interpolation). A member that runs out of steps (near t = 0.39) holds its exact state at
    the save time it reached and inf at `t1`: its final state does not take another row."""

    def oscillator(t, y, frequency):
        return jnp.stack([y[1], -(frequency**2) * y[0]])

    ts = jnp.array([0.0, 0.2, 3.0])
    frequencies = jnp.array([1.0, 40.0])

    def one(frequency):
        return simlab.simulate(
            oscillator, jnp.array([1.0, 0.0]), ts, args=frequency, integrator="diffrax",
            rtol=1e-10, atol=1e-10, max_steps=400, throw=False,
        )  # fmt: skip

    batch = jax.jit(jax.vmap(one))(frequencies)
    assert bool(batch.succeeded[0]) and not bool(batch.succeeded[1])
    phases = frequencies[:, None] * ts[None]
    exact = jnp.stack([jnp.cos(phases), -frequencies[:, None] * jnp.sin(phases)], axis=-1)
    np.testing.assert_allclose(batch.ys[0], exact[0], rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(batch.ys[1, :2], exact[1, :2], rtol=1e-7, atol=1e-8)
    assert np.isinf(batch.ys[1, 2]).all()
