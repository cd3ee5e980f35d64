"""Devices and processes: meshes, the shard_map helper, and `jax.distributed` start-up."""

from ._distributed import (
    find_free_port as find_free_port,
    initialize_local_cluster as initialize_local_cluster,
)
from ._mesh import (
    gather_to_host as gather_to_host,
    member_mesh as member_mesh,
    replicate as replicate,
    shard_map_over_members as shard_map_over_members,
    shard_rows as shard_rows,
)
