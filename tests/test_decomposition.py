"""Domain decomposition: a grid split over 4 simulated CPU devices equals one device.

Slabs (a 4 × 1 mesh) and blocks (2 × 2), periodic and non-periodic global boundaries, the
vector field, whole `simulate` runs and gradients, and a two-process run under
`jax.distributed` against the same run in one process.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _cluster import assert_workers_succeed, start_workers, stop_workers
from helpers import GRAY_SCOTT_PARAMETERS, LORENZ, without_type_checks
from jax.sharding import NamedSharding, PartitionSpec

import simlab
from simlab.decomposition import Decomposed, HaloExchange, block_grid, decomposition_mesh

MESH_SHAPES = {"slabs": (4,), "blocks": (2, 2)}
TOLERANCE = dict(rtol=1e-12, atol=1e-12)


@pytest.fixture(scope="module", autouse=True)
def two_process_run(tmp_path_factory):
    """Starts the two-process cluster with the module's first test, so that it computes
    while the other tests run."""
    output = tmp_path_factory.mktemp("decomposition_cluster")
    processes = start_workers("_decomposition_worker.py", output)
    yield processes, output
    stop_workers(processes)


def _mixed_boundary_grid(shape):
    """Non-zero Dirichlet and Neumann sides on axis 0, periodic on the rest."""
    conditions = [(simlab.Dirichlet(1.0), simlab.Neumann(0.5))] + ["periodic"] * (len(shape) - 1)
    return simlab.Grid(shape, extent=tuple(0.1 * n for n in shape), boundary=conditions)


def _wavy_field(grid, channels=None):
    coordinates = grid.mesh()
    field = sum(jnp.sin((k + 2.0) * x + k) for k, x in enumerate(coordinates)) + coordinates[0]
    if channels is None:
        return field
    return jnp.stack([1.0 + 0.1 * (c + 1) * field for c in range(channels)])


def _heat(order=2, shape=(16, 12), impl="xla"):
    return simlab.models.Heat(
        diffusivity=0.3, grid=_mixed_boundary_grid(shape), order=order, impl=impl
    )


def _gray_scott(boundary="periodic"):
    grid = simlab.Grid((16, 12), extent=(4.0, 3.0), boundary=boundary)
    return simlab.models.GrayScott(**GRAY_SCOTT_PARAMETERS, grid=grid)


def _initial_state(model):
    channels = None if len(model.state_shape) == model.grid.ndim else model.state_shape[0]
    return _wavy_field(model.grid, channels)


@eqx.filter_jit
def _vector_field(model, y):
    return model(0.0, y, None)


VECTOR_FIELD_CASES = {
    "heat_mixed_slabs": (_heat(), (4,), None),
    "heat_mixed_blocks": (_heat(), (2, 2), None),
    "heat_order4_blocks": (_heat(order=4), (2, 2), None),
    "heat_pallas_kernel_blocks": (_heat(impl="pallas"), (2, 2), None),
    "heat_slabs_along_axis1": (_heat(), (4,), (None, "x")),
    "gray_scott_periodic_slabs": (_gray_scott(), (4,), None),
    "gray_scott_neumann_blocks": (_gray_scott("neumann"), (2, 2), None),
}


@pytest.mark.parametrize("case", VECTOR_FIELD_CASES)
def test_vector_field_equals_one_device(case):
    model, mesh_shape, mesh_axes = VECTOR_FIELD_CASES[case]
    decomposed = Decomposed(model, decomposition_mesh(mesh_shape), mesh_axes=mesh_axes)
    y = _initial_state(model)
    sharded = _vector_field(decomposed, decomposed.shard(y))
    assert sharded.sharding.is_equivalent_to(decomposed.sharding, sharded.ndim)
    assert len(sharded.addressable_shards) == 4
    np.testing.assert_allclose(sharded, model(0.0, y, None), **TOLERANCE)


@pytest.mark.parametrize(
    "model, mesh_shape",
    [
        (_heat(), (4,)),
        (_gray_scott(["periodic", (simlab.Dirichlet(0.5), simlab.Neumann(0.2))]), (2, 2)),
    ],
    ids=["heat_slabs", "gray_scott_blocks"],
)
def test_vector_field_gradients_through_the_exchange_equal_one_device(model, mesh_shape):
    """Reverse mode through `ppermute`: gradients with respect to the state and parameters."""
    decomposed = Decomposed(model, decomposition_mesh(mesh_shape))
    y = _initial_state(model)
    weights = jnp.cos(_initial_state(model))

    @eqx.filter_jit
    @eqx.filter_grad
    def weighted_sum(model_and_state):
        model, state = model_and_state
        return jnp.sum(weights * model(0.0, state, None) ** 2)

    sharded_model, sharded_state = weighted_sum((decomposed, decomposed.shard(y)))
    one_model, one_state = weighted_sum((model, y))
    np.testing.assert_allclose(sharded_state, one_state, **TOLERANCE)
    for name in model.parameter_names():
        np.testing.assert_allclose(
            getattr(sharded_model.model, name), getattr(one_model, name), **TOLERANCE
        )


@pytest.fixture(scope="module")
def gray_scott_in_one_process():
    """The worker's Gray–Scott problem on a 2 × 2 mesh of this process's 4 devices."""
    import _decomposition_worker as worker

    decomposed, y0 = worker.gray_scott_problem(decomposition_mesh(worker.MESH_SHAPE))
    ys, succeeded = worker.solve(decomposed, decomposed.shard(y0))
    assert bool(succeeded)
    return ys


def test_simulate_gray_scott_in_blocks_equals_one_device(gray_scott_in_one_process):
    import _decomposition_worker as worker

    model, y0 = worker.gray_scott_problem()
    ys_one_device, succeeded = worker.solve(model, jnp.asarray(y0))
    assert bool(succeeded)
    sharded = gray_scott_in_one_process
    assert sharded.sharding.spec == PartitionSpec(None, None, "x", "y")
    np.testing.assert_allclose(sharded, ys_one_device, **TOLERANCE)
    assert float(jnp.max(jnp.abs(ys_one_device[-1] - y0))) > 1e-2


def _final_energy(model, y0):
    """A fixed-step RK4 solve (plain reverse-mode autodiff), reduced to one number; the
    saved states come along."""
    ts = jnp.linspace(0.0, 0.04, 3)
    trajectory = simlab.simulate(
        model, y0, ts, solver="rk4", adaptive=False, dt0=0.005, throw=False
    )
    return jnp.sum(trajectory.ys[-1] ** 2), trajectory.ys


_energy_gradient_and_states = eqx.filter_jit(eqx.filter_value_and_grad(_final_energy, has_aux=True))
_energy_and_states = eqx.filter_jit(_final_energy)


def test_simulate_heat_in_slabs_equals_one_device_and_stays_sharded():
    model = _heat()
    decomposed = Decomposed(model, decomposition_mesh((4,)))
    y0 = _initial_state(model)
    sharded_energy, sharded_ys = _energy_and_states(decomposed, decomposed.shard(y0))
    energy, ys = _energy_and_states(model, y0)
    # The saved states never left their devices: whole times, split along grid axis 0.
    saved_sharding = NamedSharding(decomposed.mesh, PartitionSpec(None, "x", None))
    assert sharded_ys.sharding.is_equivalent_to(saved_sharding, sharded_ys.ndim)
    assert {shard.data.shape for shard in sharded_ys.addressable_shards} == {(3, 4, 12)}
    np.testing.assert_allclose(sharded_ys, ys, **TOLERANCE)
    np.testing.assert_allclose(sharded_energy, energy, **TOLERANCE)
    assert float(jnp.max(jnp.abs(ys[-1] - y0))) > 1e-3  # heat flowed


@pytest.mark.slow
def test_gradient_through_simulate_in_blocks_equals_one_device():
    model = _gray_scott(["neumann", "periodic"])
    decomposed = Decomposed(model, decomposition_mesh((2, 2)))
    y0 = _initial_state(model)
    (sharded_energy, sharded_ys), sharded_gradient = _energy_gradient_and_states(
        decomposed, decomposed.shard(y0)
    )
    (energy, ys), gradient = _energy_gradient_and_states(model, y0)
    # The saved states never left their devices: whole times and channels, split grid.
    saved_sharding = NamedSharding(decomposed.mesh, PartitionSpec(None, *decomposed.partition_spec))
    assert sharded_ys.sharding.is_equivalent_to(saved_sharding, sharded_ys.ndim)
    assert len(sharded_ys.addressable_shards) == 4
    np.testing.assert_allclose(sharded_ys, ys, **TOLERANCE)
    assert float(jnp.max(jnp.abs(ys[-1] - y0))) > 1e-3  # the field evolved
    np.testing.assert_allclose(sharded_energy, energy, **TOLERANCE)
    for name in model.parameter_names():
        np.testing.assert_allclose(
            getattr(sharded_gradient.model, name), getattr(gradient, name), **TOLERANCE
        )

    # And the gradient is right: central finite differences of the decomposed run, with a
    # diffusivity, which acts through the halos.
    name, step = model.parameter_names()[-1], 1e-5
    nudged = [
        eqx.tree_at(lambda m: getattr(m.model, name), decomposed, value)
        for value in (getattr(model, name) + step, getattr(model, name) - step)
    ]
    (high, _), _ = _energy_gradient_and_states(nudged[0], decomposed.shard(y0))
    (low, _), _ = _energy_gradient_and_states(nudged[1], decomposed.shard(y0))
    np.testing.assert_allclose(
        getattr(sharded_gradient.model, name), (high - low) / (2 * step), rtol=1e-6
    )


def test_two_processes_equal_one_process(two_process_run, gray_scott_in_one_process):
    """Two processes with two CPU devices each (a 2 × 2 mesh) under jax.distributed."""
    processes, output = two_process_run
    assert_workers_succeed(processes)
    for process_id in range(2):
        saved = np.load(output / f"process_{process_id}.npz", allow_pickle=False)
        assert int(saved["num_devices"]) == 4 and int(saved["num_local_blocks"]) == 2
        assert str(saved["spec"]) == str(PartitionSpec(None, None, "x", "y"))
        assert bool(saved["succeeded"])
        np.testing.assert_allclose(saved["ys"], gray_scott_in_one_process, **TOLERANCE)


def test_block_grid_exchanges_on_split_axes_only():
    grid = _mixed_boundary_grid((16, 12))
    blocks = block_grid(grid, decomposition_mesh((2, 2)), mesh_axes=("y", None))
    assert blocks.shape == (8, 12) and blocks.spacing == grid.spacing
    low, high = blocks.boundaries[0]
    assert isinstance(low, HaloExchange) and low.axis_name == "y" and low.num_blocks == 2
    assert low.boundary == simlab.Dirichlet(1.0) and high.boundary == simlab.Neumann(0.5)
    assert blocks.boundaries[1] == grid.boundaries[1]


def test_block_grid_stencils_inside_a_hand_written_shard_map():
    grid = simlab.Grid((12, 8), extent=1.0, boundary=[simlab.Dirichlet(2.0), "periodic"])
    mesh = decomposition_mesh((4,))
    blocks = block_grid(grid, mesh)
    field = _wavy_field(grid)
    laplacian_on_blocks = jax.jit(
        jax.shard_map(
            lambda block: simlab.grid.laplacian(block, blocks),
            mesh=mesh,
            in_specs=PartitionSpec("x"),
            out_specs=PartitionSpec("x"),
        )
    )
    np.testing.assert_allclose(
        laplacian_on_blocks(field), simlab.grid.laplacian(field, grid), **TOLERANCE
    )


def test_bad_input_is_refused_with_a_clear_message():
    heat, mesh = _heat(), decomposition_mesh((4,))
    uneven = simlab.models.Heat(diffusivity=0.3, grid=simlab.Grid((18, 12)))
    with pytest.raises(ValueError, match="18 cells, which do not divide evenly over the 4 "):
        Decomposed(uneven, mesh)
    with pytest.raises(ValueError, match="use a multiple of 4 cells"):
        Decomposed(uneven, mesh)
    thin = simlab.models.Heat(diffusivity=0.3, grid=simlab.Grid((8, 12)))
    with pytest.raises(ValueError, match="each block needs at least 3 cells"):
        Decomposed(thin, mesh)
    with pytest.raises(ValueError, match="cannot split a 1-D grid"):
        Decomposed(
            simlab.models.Heat(diffusivity=0.3, grid=simlab.Grid((16,))),
            decomposition_mesh((2, 2)),
        )
    with pytest.raises(ValueError, match="mesh_axes must name distinct axes"):
        Decomposed(heat, mesh, mesh_axes=("y", None))
    with pytest.raises(ValueError, match="mesh_axes must name distinct axes"):
        Decomposed(heat, decomposition_mesh((2, 2)), mesh_axes=("x", "x"))
    with pytest.raises(ValueError, match="one entry per grid axis"):
        Decomposed(heat, mesh, mesh_axes=("x",))
    with pytest.raises(TypeError, match="splits grid PDE models"), without_type_checks():
        Decomposed(LORENZ, mesh)
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh"), without_type_checks():
        Decomposed(heat, (4,))
    field_coefficient = simlab.models.Heat(
        diffusivity=jnp.full((16, 12), 0.3), grid=_mixed_boundary_grid((16, 12))
    )
    with pytest.raises(ValueError, match="supports scalar coefficients; Heat.diffusivity"):
        Decomposed(field_coefficient, mesh)
    with pytest.raises(ValueError, match=r"has shape \(16, 12\); got \(12, 16\)"):
        Decomposed(heat, mesh).shard(jnp.zeros((12, 16)))


def test_bad_mesh_requests_are_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="needs 8 devices; only 4 are available"):
        decomposition_mesh((2, 4))
    with pytest.raises(ValueError, match="1 to 3 positive integers"):
        decomposition_mesh((0, 2))
    with pytest.raises(ValueError, match="2 distinct names"):
        decomposition_mesh((2, 2), axis_names=("x", "x"))
    with pytest.raises(ValueError, match="18 cells, which do not divide evenly"):
        block_grid(simlab.Grid((18, 12)), decomposition_mesh((4,)))
    with pytest.raises(TypeError, match="must be a boundary condition"), without_type_checks():
        HaloExchange("x", 2, "periodic")
    with pytest.raises(ValueError, match="num_blocks must be a positive integer"):
        HaloExchange("x", 0, simlab.Periodic())
