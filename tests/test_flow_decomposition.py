"""Flow split over 4 simulated CPU devices equals one device: the slab-decomposed FFT
against NumPy's, ETDRK4 rollouts of NavierStokes2D (the exact Taylor–Green decay, and a
forced flow with drag and a passive scalar against the one-device run), gradients against
one device and finite differences, and the all_to_alls in the compiled solve.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import collectives_by_loop_depth, without_type_checks
from jax.sharding import NamedSharding, PartitionSpec

import simlab
from simlab.decomposition import Decomposed, DecomposedSpectral, SlabFFT, decomposition_mesh

TOLERANCE = dict(rtol=1e-12, atol=1e-12)
GRID = simlab.Grid((32, 32), extent=2 * jnp.pi)
SAVE_TIMES = jnp.linspace(0.0, 0.4, 3)
STEP = 0.05  # 4 steps per save interval, well inside the CFL limit of these flows


@pytest.fixture(scope="module")
def slabs():
    return decomposition_mesh((4,))


def _rollout(model, y0):
    trajectory = simlab.simulate(
        model, y0, SAVE_TIMES, solver="etdrk4", adaptive=False, dt0=STEP, throw=False
    )
    return trajectory.ys


_rollout_jit = eqx.filter_jit(_rollout)


def _plain_flow(slabs, **coefficients):
    return DecomposedSpectral(simlab.models.NavierStokes2D(grid=GRID, **coefficients), slabs)


@pytest.fixture(scope="module")
def compiled_rollout(slabs):
    """The sharded rollout of a flow without forcing or scalar, compiled once: any
    viscosity and drag, any initial vorticity."""
    split = _plain_flow(slabs, viscosity=0.05)
    return jax.jit(_rollout).lower(split, split.shard(_random_vorticity())).compile()


def _final_enstrophy(model_and_y0):
    """A loss of the whole rollout: a weighted enstrophy of the last state."""
    final = _rollout(*model_and_y0)[-1]
    x, y = GRID.mesh()
    return jnp.mean((1.0 + 0.5 * jnp.sin(x + 2 * y)) * final**2)


_loss_and_gradient = eqx.filter_jit(eqx.filter_value_and_grad(_final_enstrophy))


def _random_vorticity(seed=0):
    return simlab.models.random_vorticity(jax.random.PRNGKey(seed), GRID, peak_wavenumber=3.0)


def test_slab_fft_equals_numpy_rfft2_and_inverts(slabs):
    grid = simlab.Grid((32, 24), extent=(2 * np.pi, 3.0))  # 13 half modes, padded to 16
    fft = SlabFFT(grid, slabs)
    fields = np.random.default_rng(1).standard_normal((2, *grid.shape))  # two channels
    spectrum = jax.jit(fft.forward)(jax.device_put(fields, fft.field_sharding(1)))
    assert fft.spectral_shape == (32, 16) and spectrum.shape == (2, 32, 16)
    assert spectrum.sharding.is_equivalent_to(fft.spectrum_sharding(1), 3)
    assert {shard.data.shape for shard in spectrum.addressable_shards} == {(2, 32, 4)}
    np.testing.assert_allclose(spectrum[..., :13], np.fft.rfft2(fields), **TOLERANCE)
    np.testing.assert_array_equal(spectrum[..., 13:], 0.0)
    # The inverse reads only the shared modes: junk in the padding does not reach the field.
    padded_junk = spectrum.at[..., 13:].set(1.0 + 2.0j)
    back = jax.jit(fft.inverse)(padded_junk)
    assert back.sharding.is_equivalent_to(fft.field_sharding(1), 3)
    np.testing.assert_allclose(back, fields, **TOLERANCE)
    np.testing.assert_allclose(
        fft.inverse(fft.multiplier(np.fft.rfft2(fields[0]))), fields[0], **TOLERANCE
    )


def test_sharded_taylor_green_rollout_decays_exactly(slabs, compiled_rollout):
    split = _plain_flow(slabs, viscosity=0.05, drag=0.1)
    ys = compiled_rollout(split, split.shard(simlab.models.taylor_green_vorticity(GRID)))
    assert ys.sharding.is_equivalent_to(NamedSharding(slabs, PartitionSpec(None, "x")), 3)
    exact = simlab.models.taylor_green_vorticity(
        GRID, time=SAVE_TIMES[-1], viscosity=0.05, drag=0.1
    )
    error = np.linalg.norm(split.gather(ys[-1]) - exact) / np.linalg.norm(exact)
    assert error < 1e-13


def test_forced_flow_with_scalar_equals_one_device_and_stays_split(slabs):
    model = simlab.models.NavierStokes2D(
        grid=GRID,
        viscosity=0.02,
        drag=0.05,
        forcing_amplitude=0.5,
        forcing_mode=2,
        passive_scalar=True,
        scalar_diffusivity=0.01,
    )
    split = DecomposedSpectral(model, slabs)
    x, y = GRID.mesh()
    y0 = jnp.stack([_random_vorticity(), jnp.cos(x) * jnp.sin(2 * y)])
    sharded = _rollout_jit(split, split.shard(y0))
    saved = NamedSharding(slabs, PartitionSpec(None, None, "x"))
    assert sharded.sharding.is_equivalent_to(saved, 4)
    assert {shard.data.shape for shard in sharded.addressable_shards} == {(3, 2, 8, 32)}
    one_device = _rollout_jit(model, y0)
    np.testing.assert_allclose(sharded, one_device, **TOLERANCE)
    assert float(jnp.max(jnp.abs(one_device[-1] - y0))) > 0.1  # the flow and scalar moved


@pytest.mark.slow
def test_rollout_gradients_equal_one_device_and_finite_differences(slabs):
    """Gradients of a loss of the rollout with respect to the viscosity, the forcing
    amplitude and the initial vorticity (all through the all_to_alls)."""
    model = simlab.models.NavierStokes2D(grid=GRID, viscosity=0.05, forcing_amplitude=0.3)
    split = DecomposedSpectral(model, slabs)
    w0 = _random_vorticity(seed=2)
    sharded_loss, (sharded_model, sharded_w0) = _loss_and_gradient((split, split.shard(w0)))
    one_loss, (one_model, one_w0) = _loss_and_gradient((model, w0))
    np.testing.assert_allclose(sharded_loss, one_loss, **TOLERANCE)
    for name in ("viscosity", "forcing_amplitude"):
        np.testing.assert_allclose(
            getattr(sharded_model.model, name), getattr(one_model, name), **TOLERANCE
        )
    assert sharded_w0.sharding.is_equivalent_to(split.sharding, 2)
    np.testing.assert_allclose(sharded_w0, one_w0, **TOLERANCE)
    # Central finite differences of the sharded rollout in the viscosity.
    step, sharded_w0 = 1e-6, split.shard(w0)  # as above: no new compilation
    losses = [
        _loss_and_gradient(
            (eqx.tree_at(lambda m: m.model.viscosity, split, viscosity), sharded_w0)
        )[0]
        for viscosity in jnp.asarray([0.05 + step, 0.05 - step])
    ]
    finite_difference = (losses[0] - losses[1]) / (2 * step)
    np.testing.assert_allclose(sharded_model.model.viscosity, finite_difference, rtol=1e-7)


def test_etdrk4_step_compiles_to_eight_all_to_alls_and_nothing_else(compiled_rollout):
    """Per step, ETDRK4 evaluates the nonlinear term 4 times, each with one batch of
    inverse transforms and one forward transform: 8 all_to_alls in the step loop. Outside
    it: the forward transform of y0 once, and one inverse per saved state. No all-gather:
    the field is never assembled."""
    found = collectives_by_loop_depth(compiled_rollout.as_text())
    assert list(found) == ["all-to-all"]
    depths = sorted(found["all-to-all"])
    assert depths == [0, 1] + [2] * 8  # y0; each save interval; each step


def test_bad_input_is_refused_with_a_clear_message(slabs):
    flow = simlab.models.NavierStokes2D(grid=simlab.Grid((18, 16), extent=1.0))
    with pytest.raises(ValueError, match="18 cells, which do not divide evenly over the 4"):
        DecomposedSpectral(flow, slabs)
    with pytest.raises(ValueError, match="pass axis= to name the one"):
        DecomposedSpectral(simlab.models.NavierStokes2D(grid=GRID), decomposition_mesh((2, 2)))
    with pytest.raises(ValueError, match="needs a periodic grid"):
        SlabFFT(simlab.Grid((16, 16), boundary="neumann"), slabs)
    with pytest.raises(ValueError, match="transforms 2-D grids"):
        SlabFFT(simlab.Grid((16,)), slabs)
    with pytest.raises(ValueError, match=r"trailing axes \(32, 32\)"):
        SlabFFT(GRID, slabs).forward(jnp.zeros((32, 16)))
    swift_hohenberg = simlab.models.SwiftHohenberg(grid=GRID)
    with pytest.raises(TypeError, match="nonlinear_spectral_with"), without_type_checks():
        DecomposedSpectral(swift_hohenberg, slabs)
    with pytest.raises(TypeError, match="Split it with simlab.decomposition.DecomposedSpectral"):
        Decomposed(swift_hohenberg, slabs)
    with pytest.raises(ValueError, match=r"has shape \(32, 32\); got \(2, 32, 32\)"):
        DecomposedSpectral(simlab.models.NavierStokes2D(grid=GRID), slabs).shard(
            jnp.zeros((2, 32, 32))
        )
