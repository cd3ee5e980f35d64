"""The rest of simlab on differential-algebraic models: fits recover an RLC circuit's
parameters, events on the index-1 pendulum agree with the ODE pendulum and the elliptic
integral, steady states and their pencil eigenvalues against the analytic operating point
and SciPy's generalised eigensolver, hybrid models keep the mass matrix, and the shipped
RLC experiment's overshoot against its exact value."""

import tomllib

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
import scipy.special

import simlab
import simlab.experiment as experiments
from simlab import cli
from simlab.models import HybridModel, Pendulum, PendulumDAE, RLCCircuit, TransistorAmplifier

GRAVITY = 9.81
RLC = RLCCircuit(resistance=1.0, inductance=0.5, capacitance=0.25, voltage=2.0)


def _rlc_from_rest(t):
    """`RLC` from rest (decay 1, angular frequency sqrt(7)): capacitor voltage and current."""
    frequency = np.sqrt(7.0)
    envelope = np.exp(-t)
    capacitor = 2.0 * (1 - envelope * (np.cos(frequency * t) + np.sin(frequency * t) / frequency))
    current = 2.0 * 0.25 * 8.0 / frequency * envelope * np.sin(frequency * t)
    return capacitor, current


def test_fit_recovers_the_circuit_parameters_within_their_confidence_intervals():
    ts = np.linspace(0.0, 5.0, 26)
    clean = np.stack(_rlc_from_rest(ts), axis=-1)
    noise = 0.01
    observed = clean + noise * jr.normal(jr.key(0), clean.shape)
    start = RLCCircuit(resistance=2.0, inductance=0.8, capacitance=0.25, voltage=2.0)
    result = simlab.fit(
        start,
        ts,
        observed,
        y0=jnp.zeros(3),
        params=["resistance", "inductance"],
        observe=["capacitor_voltage", "current"],
        noise_scale=noise,
    )
    for name, true in (("resistance", 1.0), ("inductance", 0.5)):
        estimate, stderr = float(result.params[name]), float(result.stderr[name])
        assert 0 < stderr < 0.05 * true, (name, stderr)
        assert abs(estimate - true) < 3 * stderr, (name, estimate, stderr)


def _crosses_vertical(t, y, args):
    return y[0]  # x of the DAE pendulum, the angle of the ODE one: zero at the vertical


def _dae_quarter_period(gravity, adjoint=None):
    y0 = jnp.array([1.0, 0.0, 0.0, 0.0, 0.0])  # horizontal, at rest; tension solved
    return simlab.simulate(
        PendulumDAE(gravity=gravity),
        y0,
        jnp.linspace(0.0, 1.0, 5),
        event=simlab.Event(_crosses_vertical),
        rtol=1e-10,
        atol=1e-12,
        adjoint=adjoint,
    )


def test_dae_pendulum_reaches_the_vertical_with_the_ode_pendulum():
    # From the horizontal the first passage through the vertical takes a quarter period,
    # K(m = 1/2) / sqrt(g / L) for a unit rod.
    exact = scipy.special.ellipk(0.5) / np.sqrt(GRAVITY)
    dae = _dae_quarter_period(GRAVITY)
    assert dae.solver == "rodas5p"
    ode = simlab.simulate(
        Pendulum(length=1.0, gravity=GRAVITY),
        jnp.array([np.pi / 2, 0.0]),
        jnp.linspace(0.0, 1.0, 5),
        event=simlab.Event(_crosses_vertical),
        rtol=1e-10,
        atol=1e-12,
    )
    assert abs(float(dae.event_time) - exact) < 1e-8
    assert abs(float(dae.event_time) - float(ode.event_time)) < 1e-8
    # At the bottom all the potential energy is kinetic: speed sqrt(2 g), tension 3 g.
    bottom = [0.0, -1.0, -np.sqrt(2 * GRAVITY), 0.0, 3 * GRAVITY]
    np.testing.assert_allclose(np.asarray(dae.event_state), bottom, atol=1e-6)
    # Save times past a terminating event are never reached.
    reached = np.asarray(dae.ts) <= float(dae.event_time)
    assert np.all(np.isfinite(np.asarray(dae.ys)[reached]))
    assert np.all(np.isnan(np.asarray(dae.ys)[~reached]))
    # The event time scales as g^(-1/2): d tau / d g = -tau / (2 g).
    # Forward mode: it compiles faster than reverse mode through the checkpointed loop.
    slope = jax.jacfwd(lambda g: _dae_quarter_period(g, "forward").event_time)(GRAVITY)
    np.testing.assert_allclose(float(slope), -exact / (2 * GRAVITY), rtol=1e-6)


def test_rlc_operating_point_and_its_eigenvalues():
    steady = simlab.steady_state(RLC, jnp.array([1.0, 0.1, 0.1]))
    assert bool(steady.succeeded)
    # DC: no current, the capacitor holds the source voltage, the inductor none.
    np.testing.assert_allclose(np.asarray(steady.state), [2.0, 0.0, 0.0], atol=1e-12)
    r, ell, c = 1.0, 0.5, 0.25
    decay, frequency = r / (2 * ell), np.sqrt(1 / (ell * c) - (r / (2 * ell)) ** 2)
    eigenvalues = np.asarray(steady.eigenvalues)
    finite = np.sort_complex(eigenvalues[np.isfinite(eigenvalues)])
    np.testing.assert_allclose(finite, [-decay - 1j * frequency, -decay + 1j * frequency],
                               rtol=1e-12)  # fmt: skip
    assert np.sum(~np.isfinite(eigenvalues)) == 1  # Kirchhoff's law: one algebraic direction
    assert steady.label == "stable"


def test_transistor_amplifier_operating_point_against_scipy():
    # With the source off (t = 0) both transistors conduct at the operating point; SciPy's
    # hybrid Powell method finds the same root from the test set's initial state.
    model = TransistorAmplifier()
    steady = simlab.steady_state(model, jnp.full(8, 3.0))
    assert bool(steady.succeeded)
    field = jax.jit(lambda y: model(0.0, y, None))
    reference = scipy.optimize.root(lambda y: np.asarray(field(jnp.asarray(y))) * 1e4,
                                    np.asarray(model.initial_state()), tol=1e-10)  # fmt: skip
    assert reference.success
    np.testing.assert_allclose(np.asarray(steady.state), reference.x, atol=1e-9)
    eigenvalues = np.asarray(steady.eigenvalues)
    pencil = scipy.linalg.eigvals(np.asarray(steady.jacobian), np.asarray(model.mass_matrix))
    expected = np.sort_complex(pencil[np.isfinite(pencil)])
    finite = np.sort_complex(eigenvalues[np.isfinite(eigenvalues)])
    assert finite.size == 5  # the rank of M
    np.testing.assert_allclose(finite, expected, rtol=1e-8)
    assert steady.label == "stable"


def test_hybrid_of_a_dae_keeps_its_mass_matrix():
    hybrid = HybridModel(RLC, key=jr.key(0), width=4, depth=1)
    np.testing.assert_array_equal(np.asarray(hybrid.mass_matrix), np.asarray(RLC.mass_matrix))
    ts = jnp.linspace(0.0, 2.0, 5)
    trajectory = simlab.simulate(hybrid, jnp.zeros(3), ts, rtol=1e-10, atol=1e-12)
    assert trajectory.solver == "rodas5p"
    # Untrained, the hybrid is its physics: the circuit from rest.
    exact = np.stack(_rlc_from_rest(np.asarray(ts)), axis=-1)
    np.testing.assert_allclose(np.asarray(trajectory.ys[:, :2]), exact, atol=1e-8)
    with pytest.raises(ValueError, match="solver='rodas5p' or solver='radau5'"):
        simlab.simulate(hybrid, jnp.zeros(3), ts, solver="tsit5")


@pytest.mark.slow
def test_rlc_experiment_overshoot_against_the_exact_peak(tmp_path):
    out = tmp_path / "run"
    assert cli.main(["run", "rlc_overshoot", "--quick", "--quiet", "--out", str(out)]) == 0
    stored = experiments._folder.read_run(out)
    assert {"overshoot.png", "peak_time.png", "phase_portrait.png"} <= {
        path.name for path in (out / "figures").iterdir()
    }
    sweep = experiments.load_sweep(stored)
    assert sweep.num_failed == 0
    resistance = sweep.parameter("resistance")
    ell, c, v = 0.5, 0.25, 2.0
    damped = np.sqrt(1 / (ell * c) - (resistance / (2 * ell)) ** 2)
    np.testing.assert_allclose(sweep.observables["event_time"], np.pi / damped, rtol=1e-7)
    peak = v * (1 + np.exp(-np.pi * resistance / (2 * ell * damped)))
    np.testing.assert_allclose(sweep.observables["event_capacitor_voltage"], peak, rtol=1e-7)


def test_an_extremum_of_an_algebraic_component_is_refused(tmp_path):
    # Where M_ii = 0 the rate f_i is an algebraic residual, not the derivative.
    config = tomllib.loads(experiments.find("rlc_overshoot").read_text())
    config["event"] = {"state": "inductor_voltage", "extremum": "maximum"}
    with pytest.raises(experiments.ExperimentError, match=r"event.extremum.*threshold"):
        experiments.parse(config, tmp_path / "rlc.toml")
