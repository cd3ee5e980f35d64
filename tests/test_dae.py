"""Differential-algebraic equations M y' = f(t, y) in Rodas5P and Radau5: the Test Set for
IVP Solvers' transistor amplifier, Robertson's DAE against its ODE (SciPy), an RLC circuit
against its exact solution, the pendulum's constraint, consistent initial values,
gradients against finite differences, vmap against a loop, and the errors for bad input."""

from typing import ClassVar

import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest
from helpers import robertson_scipy_reference

import simlab
from simlab import RESULTS, SimulationError
from simlab._results import status_code, status_name
from simlab.integrate import Radau5, Rodas5P
from simlab.models import (
    AbstractDAEModel,
    PendulumDAE,
    RLCCircuit,
    RobertsonDAE,
    TransistorAmplifier,
)

SOLVERS = {"rodas5p": Rodas5P(), "radau5": Radau5()}


def significant_digits(computed, reference) -> float:
    """-log10 of the largest relative error, as the Test Set for IVP Solvers scores."""
    reference = np.asarray(reference)
    return float(-np.log10(np.max(np.abs(np.asarray(computed) - reference) / np.abs(reference))))


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_transistor_amplifier_against_the_test_set_reference(solver):
    model = TransistorAmplifier()
    digits = []
    tolerances = (1e-4, 1e-6, 1e-8)
    for rtol in tolerances:
        trajectory = simlab.simulate(
            model,
            model.initial_state(),
            jnp.array([0.0, 0.2]),
            solver=SOLVERS[solver],
            rtol=rtol,
            atol=rtol,
            max_steps=50_000,
        )
        digits.append(significant_digits(trajectory.ys[-1], model.REFERENCE_AT_0_2))
        # The test set's initial state is consistent: nothing to correct.
        assert float(jnp.max(jnp.abs(trajectory.stats["initial_correction"]))) == 0.0
    # At least the digits the tolerance asks for, less one, gaining with every tolerance.
    assert all(d >= -np.log10(rtol) - 1 for d, rtol in zip(digits, tolerances, strict=True)), digits
    assert all(np.diff(digits) > 1), digits


ROBERTSON_TIMES = np.array([0.0, 0.4, 4.0, 40.0, 400.0, 4e3, 4e4])


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_robertson_dae_agrees_with_the_ode_solved_by_scipy(solver):
    reference = robertson_scipy_reference(ROBERTSON_TIMES)
    trajectory = simlab.simulate(
        RobertsonDAE(),
        jnp.array([1.0, 0.0, 0.0]),
        jnp.asarray(ROBERTSON_TIMES),
        solver=SOLVERS[solver],
        rtol=1e-9,
        atol=1e-14,
    )
    ys = np.asarray(trajectory.ys)
    np.testing.assert_allclose(ys[1:], reference[1:], rtol=1e-6)
    # The algebraic equation holds at every save time, also between steps.
    np.testing.assert_allclose(ys.sum(axis=1), 1.0, atol=1e-12)


def rlc_exact(model: RLCCircuit, ts):
    """The series RLC circuit from rest, underdamped: capacitor voltage, current and
    inductor voltage."""
    r, ell, c, v = model.resistance, model.inductance, model.capacitance, model.voltage
    decay = r / (2 * ell)
    frequency = jnp.sqrt(1 / (ell * c) - decay**2)
    envelope = jnp.exp(-decay * ts)
    capacitor = v * (
        1 - envelope * (jnp.cos(frequency * ts) + decay / frequency * jnp.sin(frequency * ts))
    )
    current = c * v * envelope * (1 / (ell * c)) / frequency * jnp.sin(frequency * ts)
    return jnp.stack([capacitor, current, v - r * current - capacitor], axis=-1)


RLC = RLCCircuit(resistance=1.0, inductance=0.5, capacitance=0.25, voltage=2.0)
RLC_TIMES = jnp.linspace(0.0, 5.0, 26)


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_rlc_circuit_against_its_exact_solution(solver):
    trajectory = simlab.simulate(
        RLC, jnp.zeros(3), RLC_TIMES, solver=SOLVERS[solver], rtol=1e-10, atol=1e-12
    )
    exact = rlc_exact(RLC, RLC_TIMES)
    # Save times between steps come from the dense output (order 4 for Rodas5P, 3 for Radau5).
    np.testing.assert_allclose(np.asarray(trajectory.ys), np.asarray(exact), atol=1e-7)
    np.testing.assert_allclose(np.asarray(trajectory.ys[-1]), np.asarray(exact[-1]), atol=1e-9)


class _ForcedQuadratic(AbstractDAEModel):
    """Prothero–Robinson's p = sin(t), and q' = -z with 0 = z - q^2: q = 1/(1 + t),
    z = q^2 from q(0) = 1. Non-autonomous, nonlinear, with an algebraic component."""

    state_names: ClassVar[tuple[str, ...]] = ("p", "q", "z")
    algebraic_names: ClassVar[tuple[str, ...]] = ("z",)

    def __call__(self, t, y, args):
        p, q, z = y[0], y[1], y[2]
        return jnp.stack([-2.0 * (p - jnp.sin(t)) + jnp.cos(t), -z, z - q**2])


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_fixed_steps_converge_at_order_five_on_an_index_one_dae(solver):
    t1 = 2.0
    exact = np.array([np.sin(t1), 1 / (1 + t1), 1 / (1 + t1) ** 2])
    num_steps = np.array([12, 24, 48, 96])
    errors = [
        np.max(np.abs(np.asarray(
            simlab.simulate(_ForcedQuadratic(), jnp.array([0.0, 1.0, 1.0]), jnp.array([0.0, t1]),
                            solver=SOLVERS[solver], adaptive=False, dt0=t1 / n, rtol=1e-10,
                            atol=1e-12).ys[-1]) - exact))
        for n in num_steps
    ]  # fmt: skip
    slope = -np.polyfit(np.log(num_steps), np.log(errors), 1)[0]
    # Both are order 5 on index-1 DAEs, the algebraic component included (stiffly accurate).
    assert abs(slope - 5) < 0.3, (errors, slope)


def test_pendulum_constraint_holds_to_the_tolerance():
    angle, speed = 0.3, 1.0  # from the downward vertical; speed along the circle
    x, y = np.sin(angle), -np.cos(angle)
    u, v = speed * np.cos(angle), speed * np.sin(angle)
    tension_guess = 0.0
    trajectory = simlab.simulate(
        PendulumDAE(),
        jnp.array([x, y, u, v, tension_guess]),
        jnp.linspace(0.0, 3.0, 31),
        rtol=1e-8,
        atol=1e-10,
    )
    ys = np.asarray(trajectory.ys)
    # Consistent initialization recovers the tension u^2 + v^2 - g y (unit length) to the
    # Newton tolerance, and reports the change.
    tension = speed**2 - 9.81 * y
    assert abs(ys[0, 4] - tension) < 1e-10
    np.testing.assert_allclose(
        np.asarray(trajectory.stats["initial_correction"]), [0, 0, 0, 0, tension - tension_guess]
    )
    assert float(trajectory.stats["initial_residual"]) < 1e-10
    constraint = ys[:, 0] ** 2 + ys[:, 1] ** 2 - 1.0
    assert np.max(np.abs(constraint)) < 1e-6
    # Energy (unit mass and length) is conserved along the way.
    energy = 0.5 * (ys[:, 2] ** 2 + ys[:, 3] ** 2) + 9.81 * ys[:, 1]
    assert np.max(np.abs(energy - energy[0])) < 1e-5


class _IndexThreePendulum(AbstractDAEModel):
    """The pendulum with its position constraint, which does not involve the multiplier."""

    state_names: ClassVar[tuple[str, ...]] = ("x", "y", "u", "v", "multiplier")
    algebraic_names: ClassVar[tuple[str, ...]] = ("multiplier",)

    def __call__(self, t, y, args):
        x, y_, u, v, multiplier = y[0], y[1], y[2], y[3], y[4]
        return jnp.stack([u, v, -multiplier * x, -multiplier * y_ - 9.81, x**2 + y_**2 - 1.0])


def test_index_three_pendulum_fails_with_a_clear_message():
    # The check runs before the first step, in the loop both solvers share.
    y0 = jnp.array([1.0, 0.0, 0.0, 0.0, 0.0])
    with pytest.raises(SimulationError, match="not of index 1"):
        simlab.simulate(_IndexThreePendulum(), y0, jnp.array([0.0, 1.0]))
    trajectory = simlab.simulate(_IndexThreePendulum(), y0, jnp.array([0.0, 1.0]), throw=False)
    assert trajectory.result == RESULTS.singular_algebraic_jacobian
    assert np.all(np.isinf(np.asarray(trajectory.ys[1])))


class _NoRealRoot(AbstractDAEModel):
    """0 = z^2 + 1 has no real solution: no y0 is consistent."""

    state_names: ClassVar[tuple[str, ...]] = ("x", "z")
    algebraic_names: ClassVar[tuple[str, ...]] = ("z",)

    def __call__(self, t, y, args):
        return jnp.stack([-y[0], y[1] ** 2 + 1.0])


def test_inconsistent_initial_state_is_an_error_quoting_the_residual():
    with pytest.raises(
        SimulationError, match=r"residual of the algebraic equations at y0 is 1\.25"
    ):
        simlab.simulate(_NoRealRoot(), jnp.array([1.0, 0.5]), jnp.array([0.0, 1.0]))


def test_trusted_initial_state_is_kept_and_its_residual_reported():
    solver = Rodas5P(consistent_initialization=False)
    trajectory = simlab.simulate(
        RobertsonDAE(), jnp.array([1.0, 0.0, 0.25]), jnp.array([0.0, 1.0]), solver=solver
    )
    np.testing.assert_array_equal(np.asarray(trajectory.ys[0]), [1.0, 0.0, 0.25])
    assert float(trajectory.stats["initial_residual"]) == pytest.approx(0.25)
    # The stiffly accurate step lands on the algebraic equation whatever y0 was.
    assert float(jnp.sum(trajectory.ys[-1])) == pytest.approx(1.0, abs=1e-9)


def _rlc_solve(resistance, voltage, adjoint=None):
    """The RLC circuit from rest: its consistent initial state and its state at t = 1.5."""
    model = RLCCircuit(resistance=resistance, inductance=0.5, capacitance=0.25, voltage=voltage)
    ts = jnp.array([0.0, 1.5])
    return simlab.simulate(model, jnp.zeros(3), ts, rtol=1e-10, atol=1e-12, adjoint=adjoint).ys


def _rlc_final(resistance, voltage, adjoint=None):
    return _rlc_solve(resistance, voltage, adjoint)[-1]


def test_gradients_match_finite_differences_and_the_exact_derivative():
    resistance, voltage = 1.0, 2.0
    # Forward mode: the whole Jacobian of both save times.
    forward = jax.jacfwd(lambda r, v: _rlc_solve(r, v, adjoint="forward"), argnums=(0, 1))(
        resistance, voltage
    )
    # From rest the inductor takes the whole source voltage, v_L(0) = V: the consistent
    # initial value differentiates too.
    np.testing.assert_allclose(np.asarray(forward[1][0]), [0.0, 0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(np.asarray(forward[0][0]), [0.0, 0.0, 0.0], atol=1e-12)
    jacobian = (forward[0][-1], forward[1][-1])
    step = 1e-6
    for argnum, point in enumerate((resistance, voltage)):
        up = [resistance, voltage]
        down = [resistance, voltage]
        up[argnum] = point + step
        down[argnum] = point - step
        central = (_rlc_final(*up) - _rlc_final(*down)) / (2 * step)
        # The algebraic component (the inductor's voltage) included.
        np.testing.assert_allclose(np.asarray(jacobian[argnum]), np.asarray(central), atol=1e-6)

    def exact_final(resistance, voltage):
        model = RLCCircuit(resistance=resistance, inductance=0.5, capacitance=0.25, voltage=voltage)
        return rlc_exact(model, jnp.array(1.5))

    exact = jax.jacrev(exact_final, argnums=(0, 1))(resistance, voltage)
    for derivative, expected in zip(jacobian, exact, strict=True):
        np.testing.assert_allclose(np.asarray(derivative), np.asarray(expected), atol=1e-8)
    # Reverse mode (jax.grad through the checkpointed loop) on the algebraic component.
    reverse = jax.grad(lambda r, v: _rlc_final(r, v)[2], argnums=(0, 1))(resistance, voltage)
    np.testing.assert_allclose(
        np.asarray(reverse), [float(jacobian[0][2]), float(jacobian[1][2])], atol=1e-9
    )


def test_vmap_over_parameters_equals_a_loop():
    resistances = jnp.array([0.5, 1.0, 2.0])

    def final(resistance):
        return _rlc_final(resistance, 2.0)

    batched = jax.vmap(final)(resistances)
    looped = jnp.stack([final(r) for r in resistances])
    np.testing.assert_allclose(np.asarray(batched), np.asarray(looped), rtol=1e-12, atol=1e-14)


def test_sweep_over_a_dae_parameter_matches_the_exact_solutions():
    resistances = np.array([0.5, 1.0, 2.0])
    ts = jnp.linspace(0.0, 1.5, 4)
    result = simlab.sweep(RLC, {"resistance": resistances}, jnp.zeros(3), ts)
    assert bool(np.all(result.succeeded))
    for member, resistance in enumerate(resistances):
        model = RLCCircuit(resistance=resistance, inductance=0.5, capacitance=0.25, voltage=2.0)
        np.testing.assert_allclose(
            np.asarray(result.observables["trajectory"][member]),
            np.asarray(rlc_exact(model, ts)),
            atol=1e-5,
        )


def test_matrix_free_rodas_agrees_with_dense():
    solver = Rodas5P(linear_solver=lx.GMRES(rtol=1e-12, atol=1e-14))
    trajectory = simlab.simulate(
        RLC, jnp.zeros(3), RLC_TIMES, solver=solver, rtol=1e-10, atol=1e-12
    )
    exact = rlc_exact(RLC, RLC_TIMES)
    np.testing.assert_allclose(np.asarray(trajectory.ys[-1]), np.asarray(exact[-1]), atol=1e-8)


def test_a_model_with_a_mass_matrix_defaults_to_rodas5p():
    trajectory = simlab.simulate(RobertsonDAE(), jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 1.0]))
    assert trajectory.solver == "rodas5p"
    assert "mass matrix" in trajectory.solver_choice


@pytest.mark.parametrize("solver", ["tsit5", "kvaerno5", "etdrk4"])
def test_solvers_without_mass_matrices_refuse_a_dae(solver):
    with pytest.raises(ValueError, match="solver='rodas5p' or solver='radau5'"):
        simlab.simulate(RobertsonDAE(), jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 1.0]),
                        solver=solver)  # fmt: skip


class _DeclaredMass(AbstractDAEModel):
    state_names: ClassVar[tuple[str, ...]] = ("x", "z")
    declared: object = None

    @property
    def mass_matrix(self):
        return self.declared

    def __call__(self, t, y, args):
        return jnp.stack([-y[0], y[1] - y[0]])


@pytest.mark.parametrize(
    "declared, message",
    [
        (jnp.ones(3), r"shape \(2,\) \(the diagonal\) or \(2, 2\)"),
        (jnp.array([1.0, jnp.nan]), "must be finite"),
        (lambda t, y: jnp.ones(2), "constant array"),
    ],
)
def test_bad_mass_matrices_are_refused(declared, message):
    with pytest.raises(ValueError, match=message):
        simlab.simulate(_DeclaredMass(declared), jnp.ones(2), jnp.array([0.0, 1.0]))


def test_unknown_algebraic_names_are_refused():
    class Misnamed(_NoRealRoot):
        algebraic_names: ClassVar[tuple[str, ...]] = ("w",)

    with pytest.raises(ValueError, match=r"algebraic_names \['w'\] are not state components"):
        simlab.simulate(Misnamed(), jnp.ones(2), jnp.array([0.0, 1.0]))


def test_transistor_amplifier_mass_matrix_is_the_test_sets():
    # The test set stores M by bands (one above, one below the diagonal): dfddy(i - j + 2, j)
    # = M(i, j), 1-based, with these entries in its meval routine.
    c1, c2, c3, c4, c5 = 1e-6, 2e-6, 3e-6, 4e-6, 5e-6
    bands = {
        (1, 2): c1, (1, 5): c3, (1, 8): c5,
        (2, 1): -c1, (2, 2): -c1, (2, 3): -c2, (2, 4): -c3, (2, 5): -c3, (2, 6): -c4,
        (2, 7): -c5, (2, 8): -c5,
        (3, 1): c1, (3, 4): c3, (3, 7): c5,
    }  # fmt: skip
    expected = np.zeros((8, 8))
    for (band, column), value in bands.items():
        expected[band + column - 3, column - 1] = value
    model = TransistorAmplifier()
    np.testing.assert_array_equal(np.asarray(model.mass_matrix), expected)
    assert np.linalg.matrix_rank(expected) == 5


@pytest.mark.slow
def test_pendulum_dae_refuses_a_velocity_along_the_rod():
    ts = jnp.linspace(0.0, 1.0, 11)
    along = jnp.array([1.0, 0.0, 1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"x u \+ y v = 1 "):
        simlab.simulate(PendulumDAE(), along, ts)
    across = jnp.array([1.0, 0.0, 0.0, 1.0, 0.0])  # perpendicular to the rod: accepted
    ys = simlab.simulate(PendulumDAE(), across, ts, rtol=1e-8, atol=1e-10).ys
    np.testing.assert_allclose(np.asarray(ys[:, 0] ** 2 + ys[:, 1] ** 2), 1.0, atol=1e-6)
    statuses = jax.jit(
        jax.vmap(lambda y0: simlab.simulate(PendulumDAE(), y0, ts, throw=False).result)
    )(jnp.stack([along, across]))
    assert [status_name(int(code)) for code in status_code(statuses)] == [
        "invalid_initial_state",
        "successful",
    ]
