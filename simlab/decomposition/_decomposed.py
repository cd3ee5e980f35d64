"""`Decomposed`: a grid PDE model whose vector field runs shard-mapped over a device mesh."""

import dataclasses
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ..models import WalledNavierStokes2D
from ..models._pde import AbstractGridModel
from ..models._split import AbstractSpectralGridModel
from ._halo import block_grid, checked_mesh_axes
from ._sharded import AbstractSplitModel

DEFAULT_AXIS_NAMES = ("x", "y", "z")


def decomposition_mesh(
    shape: int | Sequence[int],
    *,
    devices: Sequence[jax.Device] | None = None,
    axis_names: Sequence[str] | None = None,
) -> Mesh:
    """A device mesh of `shape` for splitting a grid: `(4,)` cuts slabs, `(2, 2)` blocks.

    **Arguments:**

    - `shape`: devices along each mesh axis; their product is the number of devices used.
    - `devices`: the devices, in order (default: the first of `jax.devices()`, which under
      `jax.distributed` lists every process's devices).
    - `axis_names`: one name per mesh axis (default `"x"`, `"y"`, `"z"`).

    **Returns:** a `jax.sharding.Mesh`.

    !!! example

        ```python
        mesh = simlab.decomposition.decomposition_mesh((2, 2))
        mesh.shape  # {'x': 2, 'y': 2}
        ```
    """
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if not 1 <= len(shape) <= 3 or not all(isinstance(n, int) and n >= 1 for n in shape):
        raise ValueError(
            f"mesh shape must be 1 to 3 positive integers, e.g. (2, 2); got {shape!r}."
        )
    names = DEFAULT_AXIS_NAMES[: len(shape)] if axis_names is None else tuple(axis_names)
    if len(names) != len(shape) or len(set(names)) != len(names):
        raise ValueError(
            f"axis_names needs {len(shape)} distinct names, one per mesh axis; got {names!r}."
        )
    devices = jax.devices() if devices is None else list(devices)
    needed = int(np.prod(shape))
    if needed > len(devices):
        raise ValueError(
            f"a mesh of shape {shape} needs {needed} devices; only {len(devices)} are available."
            " On CPU, simulate more with jax.config.update('jax_num_cpu_devices', N)."
        )
    return Mesh(np.asarray(devices[:needed], dtype=object).reshape(shape), names)


class Decomposed(AbstractSplitModel):
    r"""A grid PDE model whose field is split into blocks over a device mesh.

    Each device holds one block of the state. Every evaluation of the vector field runs
    the wrapped model's own `__call__` on the blocks inside `jax.shard_map`, on the
    [`simlab.decomposition.block_grid`][], so its stencils fill their ghost cells by halo
    exchange with the neighbouring blocks (`jax.lax.ppermute`) and by the grid's boundary
    conditions on the sides of the global domain. The result equals the single-device
    vector field to roundoff, and `jax.grad` flows through the exchange.

    Pass it to [`simlab.simulate`][] like any model, with a sharded `y0`
    (`decomposed.shard(y0)`) and `throw=False` (read `.result` instead: the error check of
    `throw=True` gathers the saved trajectory onto one device). The solver's state and the
    saved trajectory then stay split over the mesh, and the only collectives are the halo
    exchanges and the all-reduce of the adaptive step's error norm. `args` reaches every
    block whole.

    **Arguments:**

    - `model`: a `simlab.models.AbstractGridModel` (e.g. `Heat`, `GrayScott`) with
      scalar coefficients.
    - `mesh`: the device mesh, e.g. [`simlab.decomposition.decomposition_mesh`][]`((2, 2))`.
    - `mesh_axes`: the mesh axis splitting each grid axis, `None` for an unsplit one;
      default: the mesh's axes split the leading grid axes in order, so a one-axis mesh
      cuts a 2-D grid into slabs along axis 0. Every split axis must divide evenly, at
      least 3 cells per block.

    !!! example

        ```python
        mesh = simlab.decomposition.decomposition_mesh((2, 2))
        grid = simlab.Grid((64, 64), extent=1.0)
        model = simlab.decomposition.Decomposed(
            simlab.models.Heat(diffusivity=0.01, grid=grid), mesh
        )
        x, y = grid.mesh()
        y0 = model.shard(jnp.sin(2 * jnp.pi * x) * jnp.cos(2 * jnp.pi * y))
        trajectory = simlab.simulate(model, y0, jnp.linspace(0.0, 0.5, 6), throw=False)
        trajectory.ys.sharding  # NamedSharding: P(None, 'x', 'y')
        final_field = model.gather(trajectory.ys[-1])  # NumPy, (64, 64)
        ```
    """

    model: AbstractGridModel
    mesh: Mesh = eqx.field(static=True)
    mesh_axes: tuple[str | None, ...] = eqx.field(static=True)

    state_names = ()

    def __init__(
        self,
        model: AbstractGridModel,
        mesh: Mesh,
        *,
        mesh_axes: Sequence[str | None] | None = None,
    ):
        if not isinstance(model, AbstractGridModel):
            raise TypeError(
                "Decomposed splits grid PDE models (simlab.models.AbstractGridModel, e.g. Heat, "
                f"GrayScott); got {type(model).__name__}."
            )
        if isinstance(model, AbstractSpectralGridModel):
            raise TypeError(
                f"{type(model).__name__} is pseudo-spectral: its transforms need the whole "
                "field, not halos. Split it with simlab.decomposition.DecomposedSpectral "
                "(distributed FFTs), where the model supports it."
            )
        if isinstance(model, WalledNavierStokes2D):
            raise TypeError(
                "WalledNavierStokes2D projects its tendency with a pressure solve over the "
                "whole domain, which halos alone cannot split. Split a channel with "
                "simlab.decomposition.DecomposedWalled."
            )
        self.mesh_axes = checked_mesh_axes(model.grid, mesh, mesh_axes)
        self.mesh = mesh
        self.model = model
        _check_scalar_coefficients(model)

    @property
    def partition_spec(self) -> PartitionSpec:
        """How the state is split: channel axes whole, grid axes over `mesh_axes`."""
        num_channels = len(self.state_shape) - self.grid.ndim
        return PartitionSpec(*(None,) * num_channels, *self.mesh_axes)

    @property
    def sharding(self) -> NamedSharding:
        """The sharding of the state (and of each saved time of a trajectory)."""
        return NamedSharding(self.mesh, self.partition_spec)

    def __call__(self, t, y, args):
        block_model = dataclasses.replace(
            self.model, grid=block_grid(self.grid, self.mesh, mesh_axes=self.mesh_axes)
        )
        parameters, structure = eqx.partition(block_model, eqx.is_array)

        def block_vector_field(parameters, t, y, args):
            return eqx.combine(parameters, structure)(t, y, args)

        state = self.partition_spec
        replicated = PartitionSpec()
        # check_vma=False: a Pallas kernel's output type (pallas_call's out_shape) carries no
        # varying-mesh-axes annotation, which the check requires. The tests check that values
        # and gradients (the psum of replicated parameters' cotangents) equal one device.
        return jax.shard_map(
            block_vector_field,
            mesh=self.mesh,
            in_specs=(replicated, replicated, state, replicated),
            out_specs=state,
            check_vma=False,
        )(parameters, t, y, args)


def _check_scalar_coefficients(model: AbstractGridModel) -> None:
    """Refuses coefficient fields: their padding at block edges is not a halo exchange."""
    grid_shape = model.grid.shape
    for name, value in model.parameters().items():
        shape = jnp.shape(value)
        if len(shape) >= len(grid_shape) and shape[len(shape) - len(grid_shape) :] == grid_shape:
            raise ValueError(
                f"Decomposed supports scalar coefficients; {type(model).__name__}.{name} is a "
                f"field of shape {shape}. Use a scalar {name}, or run on one device."
            )
