"""A one-axis device mesh for batches of independent members, and how to lay data on it."""

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MEMBER_AXIS = "members"


def member_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A one-dimensional mesh whose axis, `"members"`, splits a batch over devices.

    **Arguments:**

    - `devices`: the devices to use; `None` takes every device of every process
      (`jax.devices()`), so the same call works on one machine and under `jax.distributed`.

    **Returns:** a `jax.sharding.Mesh` with the single axis `"members"`.

    !!! example

        ```python
        mesh = simlab.parallel.member_mesh(jax.devices()[:2])
        ```
    """
    devices = tuple(jax.devices() if devices is None else devices)
    if len(devices) == 0:
        raise ValueError("member_mesh needs at least one device; got an empty list.")
    return _mesh_over(devices)


@functools.lru_cache(maxsize=16)
def _mesh_over(devices: tuple[jax.Device, ...]) -> Mesh:
    return Mesh(np.asarray(devices), (MEMBER_AXIS,))


def shard_map_over_members(fn: Callable, mesh: Mesh, *, in_specs: Any, out_specs: Any) -> Callable:
    """`jax.shard_map` over a member mesh, with the type check that Diffrax cannot pass.

    Diffrax's while loops mix values that vary over the mesh axis with ones that do not,
    which fails `shard_map`'s varying-manual-axes check ("manual axis types do not match").
    Members are independent, so no collective is involved and turning the check off
    (`check_vma=False`) is safe; this is the one place that does it.
    """
    return jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)


def shard_rows(array: np.ndarray, mesh: Mesh) -> jax.Array:
    """Lays a host array on `mesh`, split along its first axis.

    Each process supplies only the rows of its own devices, so under `jax.distributed`
    every process computes its share. The first axis must divide by the mesh size.
    """
    array = np.asarray(array)
    if array.shape[0] % mesh.size != 0:
        raise ValueError(
            f"cannot split {array.shape[0]} rows over {mesh.size} devices evenly; pad the "
            "batch to a multiple of the number of devices."
        )
    return _put(array, NamedSharding(mesh, PartitionSpec(MEMBER_AXIS)))


def replicate(tree: Any, mesh: Mesh) -> Any:
    """Copies every array leaf of `tree` to every device of `mesh` (each process its own)."""
    sharding = NamedSharding(mesh, PartitionSpec())
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)  # one batched transfer
    return jax.tree.map(lambda leaf: _put(leaf, sharding), tree)


def _put(value: Any, sharding: NamedSharding) -> jax.Array:
    if jax.process_count() == 1:
        return jax.device_put(value, sharding)
    # Under jax.distributed each process can only place data on its own devices.
    host = np.asarray(value)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def gather_to_host(tree: Any) -> Any:
    """The full value of every (possibly multi-process) array in `tree`, as NumPy arrays."""
    if jax.process_count() == 1:
        return jax.tree.map(np.asarray, tree)
    return multihost_utils.process_allgather(tree, tiled=True)
