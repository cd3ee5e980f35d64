"""Meshes, the shard_map helper, and a sweep over two real processes on 127.0.0.1."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _cluster import assert_workers_succeed, start_workers

import simlab
import simlab.parallel


def test_member_mesh_takes_every_device_by_default():
    mesh = simlab.parallel.member_mesh()
    assert mesh.axis_names == ("members",)
    assert mesh.size == len(jax.devices()) == 4


def test_shard_rows_splits_the_first_axis_over_devices():
    mesh = simlab.parallel.member_mesh()
    rows = np.arange(8.0).reshape(8, 1)
    sharded = simlab.parallel.shard_rows(rows, mesh)
    assert len(sharded.addressable_shards) == 4
    assert {shard.data.shape for shard in sharded.addressable_shards} == {(2, 1)}
    np.testing.assert_array_equal(simlab.parallel.gather_to_host(sharded), rows)


def test_shard_map_helper_runs_a_per_device_function():
    mesh = simlab.parallel.member_mesh()
    spec = jax.sharding.PartitionSpec("members")
    square = simlab.parallel.shard_map_over_members(
        lambda x: x**2, mesh, in_specs=(spec,), out_specs=spec
    )
    rows = simlab.parallel.shard_rows(np.arange(4.0), mesh)
    np.testing.assert_array_equal(np.asarray(jax.jit(square)(rows)), np.arange(4.0) ** 2)


def test_simulate_in_a_shard_map_runs_unchecked_and_says_so_when_checked():
    mesh = simlab.parallel.member_mesh()
    spec = jax.sharding.PartitionSpec("members")
    ts = jnp.linspace(0.0, 1.0, 3)

    def final_states(rates):
        def final(rate):
            decay = simlab.simulate(
                lambda t, y, k: -k * y, jnp.ones(1), ts, args=rate, rtol=1e-10, atol=1e-12
            )
            return decay.ys[-1, 0]

        return jax.vmap(final)(rates)

    rates = jnp.linspace(0.5, 2.0, 8)
    helper = simlab.parallel.shard_map_over_members(
        final_states, mesh, in_specs=(spec,), out_specs=spec
    )
    np.testing.assert_allclose(jax.jit(helper)(rates), np.exp(-np.asarray(rates)), rtol=1e-8)
    checked = jax.shard_map(final_states, mesh=mesh, in_specs=(spec,), out_specs=spec)
    with pytest.raises(ValueError, match="Pass check_vma=False to jax.shard_map"):
        jax.jit(checked)(rates)


def test_bad_input_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="at least one device"):
        simlab.parallel.member_mesh([])
    with pytest.raises(ValueError, match="cannot split 6 rows over 4 devices"):
        simlab.parallel.shard_rows(np.zeros(6), simlab.parallel.member_mesh())
    with pytest.raises(ValueError, match="process_id must be an integer in"):
        simlab.parallel.initialize_local_cluster(process_id=2, num_processes=2, port=1234)
    with pytest.raises(ValueError, match="num_processes must be a positive integer"):
        simlab.parallel.initialize_local_cluster(process_id=0, num_processes=0, port=1234)
    with pytest.raises(ValueError, match="port must be an integer"):
        simlab.parallel.initialize_local_cluster(process_id=0, num_processes=2, port=70000)


def test_two_processes_equal_one_process(tmp_path):
    """Two processes with two CPU devices each, under jax.distributed with gloo."""
    import _multihost_worker as worker

    assert_workers_succeed(start_workers("_multihost_worker.py", tmp_path))

    reference = worker.run_sweep()  # one process, four devices
    assert reference.num_failed == 0
    for i in range(2):
        saved = np.load(tmp_path / f"process_{i}.npz", allow_pickle=False)
        assert int(saved["num_devices"]) == 4 and int(saved["num_local_devices"]) == 2
        np.testing.assert_allclose(
            saved["final_state"], reference.observables["final_state"], rtol=1e-12, atol=0
        )
        np.testing.assert_array_equal(saved["status"], reference.status)
    import xarray as xr

    stored = xr.open_zarr(tmp_path / "store.zarr")
    np.testing.assert_allclose(
        stored["final_state"].values, reference.observables["final_state"], rtol=1e-12
    )
