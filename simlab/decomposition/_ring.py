"""All-pairs forces with the particles split over devices: a ring of `ppermute`s.

Each of the $n$ devices keeps its block of $N/n$ particles. The blocks of sources travel
round the ring: at step $s$ device $i$ holds block $(i - s) \\bmod n$, adds the forces it
exerts on its own particles (the Pallas pair kernel), and passes it on to device $i + 1$.
After $n$ steps every pair has met once, each device has held two blocks at a time, and
the sends overlap the kernels that follow them.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec
from jaxtyping import Array, ArrayLike

from ..kernels import pair_forces


def ring_pair_forces(
    positions: Array,
    weights: ArrayLike,
    parameters=(),
    *,
    pair_scale: Callable,
    mesh: Mesh,
    axis: str | None = None,
    cutoff: float | None = None,
    box: float | None = None,
    interpret: bool | None = None,
) -> Array:
    r"""[`simlab.kernels.pair_forces`][] with the particles split into blocks over the
    devices of `mesh` along `axis`, the sources passed round the ring.

    Each device sums the forces on its own particles block by block, its own block first,
    then those that arrive from the previous device; the result equals the one-device
    sum in that order bit for bit, and [`simlab.kernels.pair_forces`][] to roundoff.
    Differentiable in both modes (`ppermute`'s transpose sends the cotangents back round).

    **Arguments:**

    - `positions`: `(N, dims)`, `N` a multiple of the number of devices along `axis`
      (sharded along its first axis, or placed there).
    - `weights`, `parameters`, `pair_scale`, `cutoff`, `box`, `interpret`: as for
      [`simlab.kernels.pair_forces`][].
    - `mesh`, `axis`: the devices and the mesh axis the ring runs along (`None`: the
      mesh's only axis).

    **Returns:** the forces `(N, dims)`, sharded like the particles.

    !!! example

        ```python
        mesh = simlab.decomposition.decomposition_mesh((4,))
        forces = simlab.decomposition.ring_pair_forces(
            positions, masses, (1.0, 0.01), pair_scale=simlab.kernels.gravity_scale, mesh=mesh
        )
        ```
    """
    axis = _ring_axis(mesh, axis)
    size = mesh.shape[axis]
    positions = jnp.asarray(positions)
    weights = jnp.broadcast_to(jnp.asarray(weights, positions.dtype), positions.shape[:1])
    if positions.ndim != 2 or positions.shape[0] % size:
        raise ValueError(
            f"ring_pair_forces: positions must have shape (N, dims) with N a multiple of the "
            f"{size} devices along mesh axis {axis!r}; got {positions.shape}."
        )
    law = dict(pair_scale=pair_scale, cutoff=cutoff, box=box, interpret=interpret)
    forward = [(i, (i + 1) % size) for i in range(size)]

    def block_forces(own, own_weights, parameters):
        total = pair_forces(own, own_weights, parameters, **law)
        visiting, visiting_weights = own, own_weights
        for _ in range(size - 1):
            visiting, visiting_weights = jax.lax.ppermute(
                (visiting, visiting_weights), axis, forward
            )
            total = total + pair_forces(own, visiting_weights, parameters, sources=visiting, **law)
        return total

    particles = PartitionSpec(axis)
    return jax.shard_map(
        block_forces,
        mesh=mesh,
        in_specs=(particles, particles, PartitionSpec()),
        out_specs=particles,
        check_vma=False,  # Pallas calls inside do not declare how their outputs vary
    )(positions, weights, jnp.stack([jnp.asarray(p, positions.dtype) for p in parameters]))


def _ring_axis(mesh: Mesh, axis: str | None) -> str:
    if axis is None:
        if len(mesh.axis_names) != 1:
            raise ValueError(
                f"ring_pair_forces: the mesh has axes {mesh.axis_names}; pass axis= to name "
                "the one the ring runs along."
            )
        return mesh.axis_names[0]
    if axis not in mesh.axis_names:
        raise ValueError(
            f"ring_pair_forces: axis {axis!r} is not an axis of the mesh {mesh.axis_names}."
        )
    return axis
