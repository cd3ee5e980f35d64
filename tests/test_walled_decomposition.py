"""A walled channel split into slabs over 4 simulated CPU devices equals one device: the
projected vector field (with and without padded pressure modes), an RK4 rollout of a
perturbed Poiseuille flow, divergence at roundoff, gradients with respect to the viscosity,
the body force and the initial field (against one device and finite differences), and the
halo exchanges and all_to_alls of the compiled solve.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import collectives_by_loop_depth, without_type_checks

import simlab
from simlab.decomposition import Decomposed, DecomposedWalled, decomposition_mesh
from simlab.models import WalledNavierStokes2D, poiseuille_velocity

TOLERANCE = dict(rtol=1e-12, atol=1e-12)
DIVERGENCE_TOLERANCE = 1e-12
SAVE_TIMES = jnp.linspace(0.0, 0.2, 3)
STEP = 0.01  # 10 RK4 steps per save interval; max_stable_step of the flow is 0.011
NUM_STEPS = 10


@pytest.fixture(scope="module")
def slabs():
    return decomposition_mesh((4,))


@pytest.fixture(scope="module")
def channel(slabs):
    """The 16 x 8 channel, on one device and on 4 slabs, and a perturbed Poiseuille flow."""
    model = _channel()
    return model, DecomposedWalled(model, slabs), _perturbed_poiseuille(model)


def _channel(num_cells=(16, 8), viscosity=0.2, body_force=1.0):
    """Cells of 1/8 on a 2 × 1 channel; cell Reynolds number below 1."""
    model, _ = WalledNavierStokes2D.channel(
        num_cells=num_cells, viscosity=viscosity, body_force=body_force, length=2.0
    )
    return model


def _perturbed_poiseuille(model):
    """The exact Poiseuille flow plus a divergence-free random perturbation of size 0.1."""
    noise = jax.random.normal(jax.random.PRNGKey(0), model.state_shape)
    return poiseuille_velocity(model) + 0.1 * model.project(noise)


def _rollout(model, y0):
    trajectory = simlab.simulate(
        model, y0, SAVE_TIMES, solver="rk4", adaptive=False, dt0=STEP, throw=False
    )
    return trajectory.ys, trajectory.result


_rollout_jit = eqx.filter_jit(_rollout)


def _weighted_energy(model_and_y0):
    """A loss of the whole rollout: the last state's kinetic energy, weighted along x."""
    model, y0 = model_and_y0
    final = _rollout(model, y0)[0][-1]
    x, _ = _channel().grid.mesh()
    return jnp.sum((1.0 + 0.5 * jnp.sin(jnp.pi * x))[None] * final**2)


_loss_and_gradient = eqx.filter_jit(eqx.filter_value_and_grad(_weighted_energy))


def _max_divergence(model, ys):
    return float(jnp.max(jnp.abs(jax.vmap(model.divergence)(jnp.asarray(ys)))))


def test_vector_field_equals_one_device_and_is_divergence_free(slabs):
    """On 16 x 6 cells: the 6 DCT modes are padded to 8 to split over 4 devices."""
    model = _channel(num_cells=(16, 6))
    split = DecomposedWalled(model, slabs)
    y = _perturbed_poiseuille(model)
    sharded = eqx.filter_jit(lambda m, y: m(0.0, y, None))(split, split.shard(y))
    assert sharded.sharding.is_equivalent_to(split.sharding, 3)
    assert {shard.data.shape for shard in sharded.addressable_shards} == {(2, 4, 6)}
    one_device = model(0.0, y, None)
    np.testing.assert_allclose(sharded, one_device, **TOLERANCE)
    assert float(jnp.max(jnp.abs(one_device))) > 1.0  # a tendency, not zero
    assert _max_divergence(model, sharded[None]) < DIVERGENCE_TOLERANCE


def test_rk4_rollout_equals_one_device_and_stays_divergence_free(channel):
    model, split, y0 = channel
    sharded, result = _rollout_jit(split, split.shard(y0))
    assert result == simlab.RESULTS.successful
    assert {shard.data.shape for shard in sharded.addressable_shards} == {(3, 2, 4, 8)}
    one_device, _ = _rollout_jit(model, y0)
    np.testing.assert_allclose(sharded, one_device, **TOLERANCE)
    assert _max_divergence(model, sharded) < DIVERGENCE_TOLERANCE
    # The perturbation decays and moves: the flow changed well beyond the tolerance.
    assert float(jnp.max(jnp.abs(one_device[-1] - y0))) > 1e-2


@pytest.mark.slow
def test_rollout_gradients_equal_one_device_and_finite_differences(channel):
    """Gradients of a loss of the rollout with respect to the viscosity, the body force
    and the initial field, through the halo exchanges and the all_to_alls."""
    model, split, y0 = channel
    sharded_loss, (sharded_model, sharded_y0) = _loss_and_gradient((split, split.shard(y0)))
    one_loss, (one_model, one_y0) = _loss_and_gradient((model, y0))
    np.testing.assert_allclose(sharded_loss, one_loss, **TOLERANCE)
    for name in ("viscosity", "body_force"):
        np.testing.assert_allclose(
            getattr(sharded_model.model, name), getattr(one_model, name), **TOLERANCE
        )
        assert abs(float(getattr(one_model, name))) > 1e-3  # the loss depends on it
    assert sharded_y0.sharding.is_equivalent_to(split.sharding, 3)
    np.testing.assert_allclose(sharded_y0, one_y0, **TOLERANCE)
    # Central finite differences of the sharded rollout in the body force.
    step, sharded_start = 1e-6, split.shard(y0)
    losses = [
        _loss_and_gradient(
            (eqx.tree_at(lambda m: m.model.body_force, split, force), sharded_start)
        )[0]
        for force in jnp.asarray([1.0 + step, 1.0 - step])
    ]
    finite_difference = (losses[0] - losses[1]) / (2 * step)
    np.testing.assert_allclose(sharded_model.model.body_force, finite_difference, rtol=1e-7)


def test_collectives_are_halo_exchanges_and_two_all_to_alls_per_evaluation(channel):
    """Per evaluation of the vector field: 2 ppermutes pad the velocity, 1 the divergence
    and 1 the pressure gradient; 2 all_to_alls transpose the pressure solve. An RK4 step
    evaluates it 4 times: 16 collective-permutes and 8 all-to-alls in the step loop, and
    no other collective there; outside it, the all-reduces of the solve's outcome. No
    all-gather anywhere: the field is never assembled."""
    _, split, y0 = channel
    y0 = split.shard(y0)
    vector_field = jax.jit(lambda m, y: m(0.0, y, None)).lower(split, y0).compile()
    found = collectives_by_loop_depth(vector_field.as_text())
    assert {kind: len(depths) for kind, depths in found.items()} == {
        "collective-permute": 4,
        "all-to-all": 2,
    }
    found = collectives_by_loop_depth(jax.jit(_rollout).lower(split, y0).compile().as_text())
    assert sorted(found) == ["all-reduce", "all-to-all", "collective-permute"]
    step_loop = max(found["all-to-all"])
    assert found["collective-permute"].count(step_loop) == 16
    assert found["all-to-all"].count(step_loop) == 8
    assert max(found["all-reduce"]) < step_loop  # the solve's outcome, once


def test_bad_input_is_refused_with_a_clear_message(slabs):
    cavity, _ = WalledNavierStokes2D.lid_driven_cavity(num_cells=16)
    with pytest.raises(ValueError, match=r"periodic along x and walled along y.*\(False, False\)"):
        DecomposedWalled(cavity, slabs)
    walls_along_x = WalledNavierStokes2D(
        viscosity=0.1, grid=simlab.Grid((16, 16), boundary=["dirichlet", "periodic"])
    )
    with pytest.raises(ValueError, match=r"got periodic axes \(False, True\)"):
        DecomposedWalled(walls_along_x, slabs)
    with pytest.raises(ValueError, match="18 cells, which do not divide evenly over the 4"):
        DecomposedWalled(_channel(num_cells=(18, 8)), slabs)
    with pytest.raises(ValueError, match="pass axis= to name the one"):
        DecomposedWalled(_channel(), decomposition_mesh((2, 2)))
    with pytest.raises(
        TypeError, match="Split a channel with simlab.decomposition.DecomposedWalled"
    ):
        Decomposed(_channel(), slabs)
    heat = simlab.models.Heat(diffusivity=0.1, grid=simlab.Grid((16, 8)))
    with pytest.raises(TypeError, match="splits simlab.models.WalledNavierStokes2D"):
        with without_type_checks():
            DecomposedWalled(heat, slabs)
