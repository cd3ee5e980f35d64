"""HybridModel: physics plus a neural correction, trained jointly; per-sample gradients."""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
import pytest
from jaxtyping import Array, Float

import simlab
from simlab.models import AbstractODEModel, HybridModel, parameter

LV = dict(alpha=0.55, beta=0.028, gamma=0.84, delta=0.026)
TS = jnp.linspace(0.0, 12.0, 13)
Y0S = jnp.array([[30.0, 4.0], [20.0, 8.0], [40.0, 6.0]])


class LogisticLotkaVolterra(AbstractODEModel):
    """Lotka–Volterra with a prey carrying capacity: the term the plain physics lacks."""

    alpha: Float[Array, ""] = parameter(lower=0.0)
    beta: Float[Array, ""] = parameter(lower=0.0)
    gamma: Float[Array, ""] = parameter(lower=0.0)
    delta: Float[Array, ""] = parameter(lower=0.0)
    capacity: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("prey", "predator")

    def __call__(self, t, y, args):
        prey, predator = y
        return jnp.stack(
            [
                self.alpha * prey * (1 - prey / self.capacity) - self.beta * prey * predator,
                self.delta * prey * predator - self.gamma * predator,
            ]
        )


@pytest.fixture(scope="module")
def logistic_data():
    truth = LogisticLotkaVolterra(**LV, capacity=80.0)
    clean = jax.vmap(lambda y0: simlab.simulate(truth, y0, TS).ys)(Y0S)
    return clean * (1 + 0.01 * jr.normal(jr.key(0), clean.shape))


def test_untrained_hybrid_is_exactly_its_physics():
    physics = simlab.models.LotkaVolterra(**LV)
    model = HybridModel(physics, key=jr.key(1), state_scale=30.0)
    y = jnp.array([25.0, 7.0])
    np.testing.assert_array_equal(model(0.0, y, None), physics(0.0, y, None))
    assert model.state_names == ("prey", "predator") and model.state_shape == (2,)


def test_hybrid_beats_physics_only_on_data_with_a_missing_term(logistic_data):
    physics_names = ["alpha", "beta", "gamma", "delta"]
    physics_only = simlab.fit(
        simlab.models.LotkaVolterra(**LV),
        TS,
        logistic_data,
        y0=Y0S,
        params=physics_names,
        throw=False,
    )
    hybrid = HybridModel(
        physics_only.model, key=jr.key(2), width=8, depth=1, state_scale=40.0, correction_scale=5.0
    )
    trained = simlab.fit(
        hybrid,
        TS,
        logistic_data,
        y0=Y0S,
        method="gradient",
        params=[f"physics.{n}" for n in physics_names] + ["correction"],
        optimiser=optax.adam(1e-2),
        max_steps=60,
        throw=False,
    )
    assert float(trained.loss) < 0.1 * float(physics_only.loss)
    # Network weights are fitted, but have no entry in the covariance.
    assert trained.covariance_labels == tuple(f"physics.{n}" for n in physics_names)


def test_per_sample_gradients_average_to_the_batch_gradient(logistic_data):
    model = HybridModel(
        simlab.models.LotkaVolterra(**LV), key=jr.key(3), width=8, depth=1, state_scale=40.0
    )
    # Give the last layer weights so that every weight has a nonzero gradient.
    model = eqx.tree_at(
        lambda m: m.correction.layers[-1].weight, model, 0.1 * jr.normal(jr.key(4), (2, 8))
    )
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def loss(params, y0, observations):
        ys = simlab.simulate(eqx.combine(params, static), y0, TS, throw=False).ys
        return jnp.mean((ys - observations) ** 2)

    per_sample = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))(params, Y0S, logistic_data)

    def batch_loss(p):
        return jnp.mean(jax.vmap(loss, in_axes=(None, 0, 0))(p, Y0S, logistic_data))

    batch = jax.grad(batch_loss)(params)
    for a, b in zip(jax.tree.leaves(per_sample), jax.tree.leaves(batch), strict=True):
        assert a.shape[0] == 3
        np.testing.assert_allclose(jnp.mean(a, axis=0), b, rtol=1e-9, atol=1e-12)
    assert jnp.all(jnp.abs(per_sample.correction.layers[0].weight).sum(axis=(1, 2)) > 0)


def test_bad_hybrid_input():
    with pytest.raises(TypeError, match="physics must be a simlab model"):
        HybridModel(lambda t, y, args: -y, key=jr.key(0))
    physics = simlab.models.LotkaVolterra(**LV)
    with pytest.raises(ValueError, match="state_scale must be positive"):
        HybridModel(physics, key=jr.key(0), state_scale=-1.0)
    with pytest.raises(ValueError, match="correction_scale must be positive: a scalar or 2"):
        HybridModel(physics, key=jr.key(0), correction_scale=(1.0, 2.0, 3.0))
