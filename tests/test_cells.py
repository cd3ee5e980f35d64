"""Cell and Verlet neighbour lists: their forces against the all-pairs kernel and an
independent NumPy double loop, the skin's guarantee, overflow that is never silent,
derivatives, batches, the Lennard-Jones model's cell path, and refusals."""

import functools as ft

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_hamiltonian import _numpy_lennard_jones
from test_pairs import _loop_lennard_jones

import simlab.kernels as sk
from simlab.models import LennardJones

LENNARD_JONES = (1.0, 1.0)  # epsilon, sigma
CUTOFF = 2.5


def _jittered_lattice(side: int, spacing: float, dims: int, seed: int = 0) -> np.ndarray:
    """`side**dims` particles on a lattice, each moved by up to 0.15 in every coordinate:
    a dense fluid-like configuration without overlaps."""
    lattice = np.stack(np.meshgrid(*[np.arange(side)] * dims, indexing="ij"), -1)
    positions = (lattice.reshape(-1, dims) + 0.5) * spacing
    noise = np.random.default_rng(seed).uniform(-0.15, 0.15, positions.shape)
    return (positions + noise) % (side * spacing)


# Everything jitted: a cell list is dozens of small operations, slow to dispatch one by one.
@ft.partial(jax.jit, static_argnums=1)
def _all_pairs(positions, box):
    """The Pallas kernel (interpreted on a CPU)."""
    return sk.pair_forces(
        positions, 1.0, LENNARD_JONES, pair_scale=sk.lennard_jones_scale, cutoff=CUTOFF, box=box
    )


@ft.partial(jax.jit, static_argnums=1)
def _all_pairs_reference(positions, box):
    return sk.pair_forces_reference(
        positions,
        jnp.asarray(1.0),
        LENNARD_JONES,
        pair_scale=sk.lennard_jones_scale,
        cutoff=CUTOFF,
        box=box,
    )


def _cells(positions, box, grid=None, parameters=LENNARD_JONES):
    return sk.cell_pair_forces(
        positions,
        1.0,
        parameters,
        pair_scale=sk.lennard_jones_scale,
        cutoff=CUTOFF,
        box=box,
        grid=grid,
    )


_cells_jit = jax.jit(_cells, static_argnums=(1, 2))
_neighbour_list = jax.jit(sk.neighbour_list, static_argnums=(1, 2, 3, 4))
_candidates = jax.jit(sk.cell_candidates, static_argnums=(1, 2))


# (side, spacing, dims): two cells per side (the stencil meets each cell once), three in
# 3-D, seven in 2-D.
CONFIGURATIONS = [(6, 0.9, 3), (7, 1.1, 3), (18, 1.0, 2)]


@pytest.mark.parametrize(("side", "spacing", "dims"), CONFIGURATIONS)
def test_cell_forces_equal_all_pairs_and_a_double_loop(side, spacing, dims):
    box = side * spacing
    positions = jnp.asarray(_jittered_lattice(side, spacing, dims))
    grid = sk.cell_grid(box, CUTOFF, len(positions), dims)
    assert grid.per_side == int(box // CUTOFF)
    # Sized from the positions: a quarter more room than the fullest cell needs.
    edges = np.linspace(0.0, box, grid.per_side + 1)
    fullest = np.histogramdd(np.asarray(positions), bins=[edges] * dims)[0].max()
    sized = sk.cell_grid(box, CUTOFF, len(positions), dims, positions=positions)
    assert sized.capacity == np.ceil(1.25 * fullest) < grid.capacity
    forces = _cells_jit(positions, box, sized)
    scale = np.abs(forces).max()
    np.testing.assert_allclose(forces, _all_pairs(positions, box), rtol=0, atol=1e-13 * scale)
    expected = _loop_lennard_jones(np.asarray(positions), *LENNARD_JONES, box, CUTOFF)
    np.testing.assert_allclose(forces, expected, rtol=1e-10, atol=1e-12 * scale)


def test_a_verlet_list_serves_until_a_particle_has_moved_half_the_skin():
    side, spacing, skin = 7, 1.1, 0.4
    box = side * spacing
    positions = jnp.asarray(_jittered_lattice(side, spacing, 3))
    grid = sk.cell_grid(box, CUTOFF + skin, len(positions))
    neighbours = _neighbour_list(positions, box, grid, CUTOFF + skin, 100)
    assert not neighbours.overflow
    # Every particle moves by just under skin/2 in a random direction: no pair can cross
    # the cutoff unseen, so the old list still gives the exact forces.
    directions = np.random.default_rng(1).normal(size=positions.shape)
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    moved = (positions + 0.49 * skin * directions) % box
    forces = jax.jit(
        ft.partial(
            sk.neighbour_pair_forces,
            weights=1.0,
            parameters=LENNARD_JONES,
            pair_scale=sk.lennard_jones_scale,
            cutoff=CUTOFF,
            box=box,
        )
    )(moved, neighbours.indices)
    expected = _all_pairs_reference(moved, box)
    np.testing.assert_allclose(forces, expected, rtol=0, atol=1e-13 * np.abs(expected).max())
    # The list holds exactly the pairs nearer than the radius, each once.
    squared, pairs = jax.jit(sk.neighbour_squared_distances, static_argnums=2)(
        positions, neighbours.indices, box
    )
    counts = np.sum(np.asarray(pairs), axis=1)
    separation = np.asarray(positions)[:, None] - np.asarray(positions)[None]
    separation -= box * np.round(separation / box)
    distances = np.linalg.norm(separation, axis=-1)
    np.fill_diagonal(distances, np.inf)
    np.testing.assert_array_equal(counts, np.sum(distances < CUTOFF + skin, axis=1))
    assert np.all(np.sqrt(np.asarray(squared))[np.asarray(pairs)] < CUTOFF + skin)


def test_full_cells_and_rows_are_flagged_and_refused():
    box = 10.0
    crowd = jnp.asarray(np.random.default_rng(2).uniform(0.1, 0.9, (10, 3)))
    small = sk.CellGrid(per_side=4, capacity=4)
    assert bool(_candidates(crowd, box, small).overflow)
    with pytest.raises(Exception, match="capacity=4"):
        jax.block_until_ready(_cells_jit(crowd, box, small))
    # Ten particles within 1.4 of each other: nine neighbours each, not room for eight.
    roomy = sk.CellGrid(per_side=4, capacity=10)
    assert bool(_neighbour_list(crowd, box, roomy, 2.0, 8).overflow)
    assert not bool(_neighbour_list(crowd, box, roomy, 2.0, 9).overflow)


def test_derivatives_equal_the_all_pairs_reference_and_finite_differences():
    box = 6 * 0.9
    positions = jnp.asarray(_jittered_lattice(6, 0.9, 3))
    tangent = jnp.asarray(np.random.default_rng(3).normal(size=positions.shape))

    def tangents(forces):
        return jax.jit(lambda x, dx: jax.jvp(forces, (x,), (dx,))[1])(positions, tangent)

    derivative = tangents(lambda x: _cells(x, box))
    expected = tangents(lambda x: _all_pairs_reference(x, box))
    np.testing.assert_allclose(derivative, expected, rtol=0, atol=1e-12 * np.abs(expected).max())

    @jax.jit
    def virial(parameters):  # a scalar of the forces that depends on epsilon and sigma
        return jnp.sum(_cells(positions, box, parameters=tuple(parameters)) * positions)

    parameters = jnp.array(LENNARD_JONES)
    gradient = jax.jit(jax.grad(virial))(parameters)
    step = 1e-6
    for k in range(2):
        shift = jnp.zeros(2).at[k].set(step)
        difference = (virial(parameters + shift) - virial(parameters - shift)) / (2 * step)
        assert float(gradient[k]) == pytest.approx(float(difference), rel=1e-7)


def test_a_batch_of_systems_equals_one_call_each():
    box = 6 * 0.9
    batch = jnp.stack([jnp.asarray(_jittered_lattice(6, 0.9, 3, seed)) for seed in (4, 5)])
    batched = jax.jit(jax.vmap(lambda x: _cells(x, box)))(batch)
    for forces, positions in zip(batched, batch, strict=True):
        np.testing.assert_array_equal(forces, _cells_jit(positions, box))


@pytest.mark.parametrize("dims", [2, 3])
def test_the_lennard_jones_model_on_cells_equals_a_double_loop(dims):
    side, spacing = (12, 1.0) if dims == 2 else (5, 1.1)
    box = side * spacing
    positions = _jittered_lattice(side, spacing, dims)
    count = len(positions)
    cells = sk.cell_grid(box, CUTOFF, count, dims)
    model = LennardJones(
        num_particles=count,
        box=box,
        epsilon=1.3,
        sigma=1.1,
        cutoff=CUTOFF,
        dimension=dims,
        cells=cells,
    )
    y = model.state(positions, np.zeros_like(positions))
    energy, forces = _numpy_lennard_jones(positions, box, 1.3, 1.1, CUTOFF)
    assert float(eqx.filter_jit(model.energy)(y)) == pytest.approx(energy, rel=1e-12)
    field = eqx.filter_jit(lambda model, y: model(0.0, y, None))(model, y)
    computed = np.asarray(field)[count * dims :].reshape(count, dims)
    np.testing.assert_allclose(computed, forces, rtol=1e-10, atol=1e-12 * np.abs(forces).max())


def test_bad_inputs_are_refused_with_reasons():
    positions = jnp.asarray(_jittered_lattice(6, 0.9, 3))
    with pytest.raises(ValueError, match="box/2"):
        _cells(positions, 4.0)
    with pytest.raises(ValueError, match="narrower than the cutoff"):
        _cells(positions, 5.4, sk.CellGrid(per_side=3, capacity=50))
    with pytest.raises(ValueError, match=r"shape \(N, dims\)"):
        _cells(positions[None], 5.4)
    with pytest.raises(ValueError, match="positive"):
        sk.CellGrid(per_side=0, capacity=4)
    with pytest.raises(ValueError, match="cutoff"):
        sk.cell_grid(2.0, 3.0, 10)
    with pytest.raises(ValueError, match="need a cutoff"):
        LennardJones(num_particles=4, box=6.0, cells=sk.CellGrid(2, 4))
    with pytest.raises(ValueError, match="narrower than the cutoff"):
        LennardJones(num_particles=4, box=6.0, cutoff=2.5, cells=sk.CellGrid(3, 4))
