"""The ODE model library: construction, declared ranges, physics invariants."""

import jax.numpy as jnp
import numpy as np
import pytest
from helpers import LORENZ, LOTKA_VOLTERRA

import simlab
from simlab import models

VALID_MODELS = {
    "LotkaVolterra": LOTKA_VOLTERRA,
    "Lorenz": LORENZ,
    "SIR": models.SIR(beta=0.3, gamma=0.1, population=1000.0),
    "DampedPendulum": models.DampedPendulum(length=1.0, damping=0.2),
    "VanDerPol": models.VanDerPol(mu=1.0),
    "Robertson": models.Robertson(),
}


@pytest.mark.parametrize("name", sorted(VALID_MODELS))
def test_every_model_declares_state_and_parameters(name):
    model = VALID_MODELS[name]
    assert model.state_shape == (len(model.state_names),)
    assert set(model.parameter_names()) == set(model.parameters())
    derivative = model(0.0, jnp.ones(model.state_shape), None)
    assert derivative.shape == model.state_shape
    assert bool(jnp.all(jnp.isfinite(derivative)))


@pytest.mark.parametrize(
    ("cls", "kwargs", "bad"),
    [
        (models.LotkaVolterra, dict(alpha=-1.0, beta=0.1, gamma=0.1, delta=0.1), "alpha"),
        (models.Lorenz, dict(sigma=10.0, rho=-1.0, beta=1.0), "rho"),
        (models.SIR, dict(beta=0.3, gamma=0.1, population=-5.0), "population"),
        (models.DampedPendulum, dict(length=1.0, damping=-0.1), "damping"),
        (models.DampedPendulum, dict(length=float("nan"), damping=0.1), "length"),
        (models.VanDerPol, dict(mu=-2.0), "mu"),
        (models.Robertson, dict(k2=float("inf")), "k2"),
    ],
)
def test_out_of_range_parameters_are_refused_by_name(cls, kwargs, bad):
    with pytest.raises(ValueError, match=f"parameter '{bad}'"):
        cls(**kwargs)


def test_boundary_values_follow_the_declared_interval():
    assert float(models.DampedPendulum(length=1.0, damping=0.0).damping) == 0.0
    assert float(models.VanDerPol(mu=0.0).mu) == 0.0
    with pytest.raises(ValueError, match="'length'"):
        models.DampedPendulum(length=0.0, damping=0.1)


def test_integer_parameters_become_floats_so_gradients_work():
    model = models.Lorenz(sigma=10, rho=28, beta=3)
    assert all(jnp.issubdtype(v.dtype, jnp.floating) for v in model.parameters().values())


def test_stiffness_is_declared_by_the_class():
    assert models.Robertson().is_stiff
    assert not VALID_MODELS["Lorenz"].is_stiff
    # The declaration is static; Van der Pol's solver follows its stable step where its
    # mu is known (tests/test_stiff.py), the declaration where mu is traced.
    assert models.VanDerPol(mu=1.0).is_stiff


def test_sir_conserves_population_and_pendulum_energy_decays():
    sir = VALID_MODELS["SIR"]
    trajectory = simlab.simulate(sir, jnp.array([990.0, 10.0, 0.0]), jnp.linspace(0, 100, 21))
    np.testing.assert_allclose(trajectory.ys.sum(axis=1), 1000.0, rtol=1e-9)
    assert float(trajectory.component("R")[-1]) > 500  # R0 = 3: most are infected

    pendulum = VALID_MODELS["DampedPendulum"]
    trajectory = simlab.simulate(pendulum, jnp.array([1.0, 0.0]), jnp.linspace(0, 10, 41))
    angle, velocity = trajectory.ys[:, 0], trajectory.ys[:, 1]
    energy = 0.5 * velocity**2 + pendulum.gravity / pendulum.length * (1 - jnp.cos(angle))
    assert bool(jnp.all(jnp.diff(energy) <= 1e-9))  # damping only removes energy
    assert float(energy[-1]) < 0.2 * float(energy[0])


def test_lotka_volterra_conserves_its_first_integral():
    model = VALID_MODELS["LotkaVolterra"]
    trajectory = simlab.simulate(
        model, jnp.array([30.0, 4.0]), jnp.linspace(0, 30, 31), rtol=1e-10, atol=1e-10
    )
    prey, predator = trajectory.ys[:, 0], trajectory.ys[:, 1]
    invariant = (
        model.delta * prey
        - model.gamma * jnp.log(prey)
        + model.beta * predator
        - model.alpha * jnp.log(predator)
    )
    np.testing.assert_allclose(invariant, invariant[0], rtol=1e-7)
