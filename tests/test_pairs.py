"""The all-pairs force kernel against an independent NumPy double loop, its derivatives
against the reference and finite differences, batches, its input checks, and the ring
that splits the particles over devices against one device."""

import functools as ft

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab.kernels as sk
from simlab.decomposition import decomposition_mesh, ring_pair_forces

GRAVITY = (1.3, 0.1)  # G, softening
LENNARD_JONES = (1.0, 0.5)  # epsilon, sigma
BOX, CUTOFF = 5.0, 2.4


def _loop_gravity(x, m, constant, softening):
    """Accelerations by a double loop over pairs, written from Newton's law."""
    acceleration = np.zeros_like(x)
    for i in range(len(x)):
        for j in range(len(x)):
            if i != j:
                d = x[j] - x[i]
                acceleration[i] += constant * m[j] * d / (d @ d + softening**2) ** 1.5
    return acceleration


def _loop_lennard_jones(x, epsilon, sigma, box, cutoff):
    """Forces by a double loop: minimum image, F = -dV/dr along the separation."""
    force = np.zeros_like(x)
    for i in range(len(x)):
        for j in range(len(x)):
            d = x[i] - x[j]
            d -= box * np.round(d / box)
            r = np.sqrt(d @ d)
            if i != j and r < cutoff:
                dv_dr = 4 * epsilon * (-12 * sigma**12 / r**13 + 6 * sigma**6 / r**7)
                force[i] += -dv_dr * d / r
    return force


@pytest.fixture(scope="module")
def particles():
    """300 particles (not a multiple of any block) in a 5-box, with masses."""
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.key(0))
        positions = jax.random.uniform(keys[0], (300, 3), jnp.float64) * BOX
        masses = jax.random.uniform(keys[1], (300,), jnp.float64) + 0.5
    return positions, masses


def _gravity(positions, masses, parameters=GRAVITY):
    return sk.pair_forces(positions, masses, parameters, pair_scale=sk.gravity_scale)


def _lennard_jones(positions):
    return sk.pair_forces(
        positions,
        1.0,
        LENNARD_JONES,
        pair_scale=sk.lennard_jones_scale,
        cutoff=CUTOFF,
        box=BOX,
    )


def test_gravity_equals_a_double_loop(particles):
    positions, masses = particles
    expected = _loop_gravity(np.asarray(positions), np.asarray(masses), *GRAVITY)
    np.testing.assert_allclose(_gravity(positions, masses), expected, rtol=1e-12, atol=1e-12)


def test_lennard_jones_in_a_periodic_box_equals_a_double_loop(particles):
    positions, _ = particles
    expected = _loop_lennard_jones(np.asarray(positions), *LENNARD_JONES, BOX, CUTOFF)
    actual = _lennard_jones(positions)
    np.testing.assert_allclose(actual, expected, rtol=1e-11, atol=1e-9 * np.abs(expected).max())
    np.testing.assert_allclose(jnp.sum(actual, axis=0), 0.0, atol=1e-9 * np.abs(expected).max())


def test_the_kernel_equals_the_reference_for_two_dimensions_and_one_particle(particles):
    positions, masses = particles
    plane = positions[:77, :2]
    reference = sk.pair_forces_reference(plane, masses[:77], GRAVITY, pair_scale=sk.gravity_scale)
    np.testing.assert_allclose(_gravity(plane, masses[:77]), reference, rtol=1e-13)
    assert np.all(_gravity(positions[:1], masses[:1]) == 0.0)


def test_gradients_match_the_reference_and_finite_differences(particles):
    positions, masses = particles
    positions, masses = positions[:40], masses[:40]

    def loss(positions, masses, constant):
        forces = _gravity(positions, masses, (constant, GRAVITY[1]))
        return jnp.sum(jnp.sin(forces))

    def reference_loss(positions, masses, constant):
        forces = sk.pair_forces_reference(
            positions, masses, (constant, GRAVITY[1]), pair_scale=sk.gravity_scale
        )
        return jnp.sum(jnp.sin(forces))

    arguments = (positions, masses, jnp.float64(GRAVITY[0]))
    gradient = jax.grad(loss, argnums=(0, 1, 2))(*arguments)
    expected = jax.grad(reference_loss, argnums=(0, 1, 2))(*arguments)
    for actual, reference in zip(gradient, expected, strict=True):
        np.testing.assert_allclose(actual, reference, rtol=1e-10, atol=1e-12)
    step = 1e-6
    shift = jnp.zeros_like(positions).at[3, 1].set(step)
    central = (
        loss(positions + shift, masses, GRAVITY[0]) - loss(positions - shift, masses, GRAVITY[0])
    ) / (2 * step)
    np.testing.assert_allclose(gradient[0][3, 1], central, rtol=1e-6)
    tangent = jax.jvp(lambda c: loss(positions, masses, c), (GRAVITY[0],), (1.0,))[1]
    np.testing.assert_allclose(tangent, gradient[2], rtol=1e-12)


def test_a_batch_of_systems_equals_one_launch_each(particles):
    positions, masses = particles
    batch = jnp.stack([positions[:50], 1.5 * positions[:50]])
    forces = _gravity(batch, masses[:50])
    for member, system in zip(forces, batch, strict=True):
        np.testing.assert_array_equal(member, _gravity(system, masses[:50]))
    per_member_masses = jax.vmap(_gravity, in_axes=(None, 0))(
        positions[:50], jnp.stack([masses[:50], 2 * masses[:50]])
    )
    np.testing.assert_allclose(per_member_masses[1], 2 * per_member_masses[0], rtol=1e-14)


def test_bad_inputs_are_refused_with_reasons(particles):
    positions, masses = particles
    with pytest.raises(ValueError, match="longer than half the box"):
        sk.pair_forces(
            positions, 1.0, LENNARD_JONES, pair_scale=sk.lennard_jones_scale, cutoff=3.0, box=BOX
        )
    with pytest.raises(ValueError, match=r"shape \(N, dims\)"):
        sk.pair_forces(positions[:, 0], masses, GRAVITY, pair_scale=sk.gravity_scale)
    with pytest.raises(ValueError, match="compiles with Triton"):
        jax.export.export(
            jax.jit(
                lambda x: sk.pair_forces(
                    x, 1.0, GRAVITY, pair_scale=sk.gravity_scale, backend="mosaic_gpu"
                )
            ),
            platforms=["cuda"],
        )(jax.ShapeDtypeStruct((64, 3), jnp.float32))


@pytest.fixture(scope="module")
def ring():
    """`ring_pair_forces` on 4 devices, jitted once: gravity with the test's parameters."""
    mesh = decomposition_mesh((4,), devices=jax.devices()[:4])

    @jax.jit
    def forces(positions, masses, constant):
        return ring_pair_forces(
            positions, masses, (constant, GRAVITY[1]), pair_scale=sk.gravity_scale, mesh=mesh
        )

    return forces


@jax.jit
def _in_the_rings_order(positions, masses):
    """One device, the same sums in the ring's order: block i's own block first, then
    blocks i - 1, i - 2, ... as they arrive (each a batch over the 4 blocks)."""
    blocks, block_masses = positions.reshape(4, 50, 3), masses.reshape(4, 50)

    def from_sources(targets, sources, source_masses):
        return sk.pair_forces(
            targets, source_masses, GRAVITY, pair_scale=sk.gravity_scale, sources=sources
        )

    total = jax.vmap(_gravity)(blocks, block_masses)
    for step in range(1, 4):
        arrived = jnp.roll(blocks, step, axis=0), jnp.roll(block_masses, step, axis=0)
        total = total + jax.vmap(from_sources)(blocks, *arrived)
    return total.reshape(-1, 3)


def test_the_ring_over_four_devices_equals_one_device_bit_for_bit(particles, ring):
    positions, masses = particles[0][:200], particles[1][:200]
    ringed = ring(positions, masses, GRAVITY[0])
    np.testing.assert_array_equal(ringed, _in_the_rings_order(positions, masses))
    np.testing.assert_allclose(ringed, _gravity(positions, masses), rtol=1e-13, atol=1e-13)


def test_gradients_flow_through_the_ring(particles, ring):
    positions, masses = particles[0][:200], particles[1][:200]

    def loss(forces_fn, positions, masses, constant):
        return jnp.sum(jnp.sin(forces_fn(positions, masses, constant)))

    def one_device(positions, masses, constant):
        return _gravity(positions, masses, (constant, GRAVITY[1]))

    arguments = (positions, masses, jnp.float64(GRAVITY[0]))
    gradient = jax.grad(ft.partial(loss, ring), argnums=(0, 1, 2))(*arguments)
    expected = jax.grad(ft.partial(loss, one_device), argnums=(0, 1, 2))(*arguments)
    for actual, reference in zip(gradient, expected, strict=True):
        np.testing.assert_allclose(actual, reference, rtol=1e-11, atol=1e-12)


def test_the_ring_refuses_a_count_that_does_not_split(particles):
    mesh = decomposition_mesh((4,), devices=jax.devices()[:4])
    with pytest.raises(ValueError, match="multiple of the 4 devices"):
        ring_pair_forces(particles[0][:201], 1.0, GRAVITY, pair_scale=sk.gravity_scale, mesh=mesh)
