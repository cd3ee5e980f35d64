"""What every split model shares: laying a global field out over the mesh and back."""

import abc
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from ..models._wrapped import AbstractWrappedModel
from ..parallel import gather_to_host


class AbstractSplitModel(AbstractWrappedModel):
    """A model whose state lies split over a device mesh as `sharding` says."""

    @property
    @abc.abstractmethod
    def sharding(self) -> NamedSharding:
        """The sharding of the state (and of each saved time of a trajectory)."""

    def shard(self, field: Any) -> jax.Array:
        """Lays a global field (of shape `state_shape`) out over the mesh, block by block.

        Under `jax.distributed` every process passes the same global field (a NumPy array
        is fine) and only its own devices' blocks are copied.
        """
        if jnp.shape(field) != self.state_shape:
            raise ValueError(
                f"a state of this model has shape {self.state_shape}; got {jnp.shape(field)}."
            )
        if self.sharding.is_fully_addressable:  # all blocks on this process's devices
            return jax.device_put(field, self.sharding)
        host = np.asarray(field)
        return jax.make_array_from_callback(host.shape, self.sharding, lambda index: host[index])

    def gather(self, array: jax.Array) -> np.ndarray:
        """The whole of a (possibly multi-process) sharded array as a NumPy array, on every
        process: the one place the global field is assembled."""
        return gather_to_host(array)
