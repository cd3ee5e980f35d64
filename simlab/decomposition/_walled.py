r"""`DecomposedWalled`: a walled channel flow stepped on slabs along its periodic axis.

The projected tendency of [`simlab.models.WalledNavierStokes2D`][] needs three things from
beyond a slab: the neighbouring faces of its stencils (advection, viscosity, divergence,
pressure gradient), which the halo exchange brings, and the pressure, which solves a
Poisson equation over the whole channel. Along the walled $y$ axis every slab holds whole
rows, so the DCT-II that diagonalises the Laplacian there is local; the FFT along the
periodic $x$ axis needs whole columns, which one `all_to_all` provides (the transposition
of [`simlab.decomposition.SlabFFT`][]), and a second one brings the pressure back to rows.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.fft import dct, idct
from jax.sharding import Mesh, PartitionSpec
from jaxtyping import Array

from .. import kernels
from ..grid import Grid, pad_axis, resolve_impl
from ..models import WalledNavierStokes2D
from ._decomposed import Decomposed
from ._fft import columns_to_rows, multiple_of_devices, rows_to_columns
from ._halo import block_grid, checked_mesh_axes, slab_axis


class DecomposedWalled(Decomposed):
    r"""A channel of [`simlab.models.WalledNavierStokes2D`][] (periodic along $x$, walls
    along $y$) whose face velocities are split into slabs of rows along $x$ over a mesh.

    On each slab, one evaluation of the vector field:

    - pads the velocity with the walls' ghost values along $y$ (local) and the
      neighbouring slabs' rows along $x$ (a halo exchange, one `ppermute` per side for
      both components), and computes the momentum tendency on it with the model's path
      (XLA or the fused Pallas kernel);
    - projects it: the divergence takes $u$ on the row below (one `ppermute`), the
      pressure solve is a DCT-II along $y$ on the slab, one `all_to_all` to columns, the
      FFT along $x$ and its inverse with the inverse Laplacian in between, and one
      `all_to_all` back to rows; the pressure gradient takes $p$ on the row above (one
      `ppermute`).

    That is four `ppermute`s and two `all_to_all`s per evaluation, and no gather. The
    result equals the model's vector field on one device to roundoff, divergence-free to
    roundoff, and `jax.grad` flows through every collective.

    Solve it with `simulate(..., solver="rk4", adaptive=False, dt0=...)` (or any explicit
    solver), a sharded `y0` (`decomposed.shard(y0)`) and `throw=False`, as for
    [`simlab.decomposition.Decomposed`][]; the time-step limit and the check that `y0` is
    divergence-free are the model's.

    The slabs lie along the periodic axis. Slabs along the walled axis would work the
    same way with the two transforms' roles swapped; they are not built.

    **Arguments:**

    - `model`: a `WalledNavierStokes2D` on a grid periodic along $x$ and walled along $y$
      (e.g. `WalledNavierStokes2D.channel`). $N_x$ must divide evenly over the devices;
      $N_y$ need not ($y$-modes are padded to a multiple of the devices for the
      transposition).
    - `mesh`: the device mesh, e.g. [`simlab.decomposition.decomposition_mesh`][]`((4,))`.
    - `axis`: the mesh axis the slabs are split over (`None`: the mesh's only axis).

    !!! example

        ```python
        mesh = simlab.decomposition.decomposition_mesh((4,))
        channel, y0 = simlab.models.WalledNavierStokes2D.channel(num_cells=(16, 8))
        split = simlab.decomposition.DecomposedWalled(channel, mesh)
        trajectory = simlab.simulate(
            split, split.shard(y0), jnp.linspace(0.0, 0.1, 3), solver="rk4",
            adaptive=False, dt0=1e-3, throw=False,
        )
        final_velocity = split.gather(trajectory.ys[-1])  # NumPy, (2, 16, 8)
        ```
    """

    def __init__(self, model: WalledNavierStokes2D, mesh: Mesh, *, axis: str | None = None):
        if not isinstance(model, WalledNavierStokes2D):
            raise TypeError(
                "DecomposedWalled splits simlab.models.WalledNavierStokes2D channels; got "
                f"{type(model).__name__}. Split other grid models with "
                "simlab.decomposition.Decomposed."
            )
        if model.grid.is_periodic != (True, False):
            raise ValueError(
                "DecomposedWalled: the grid must be periodic along x and walled along y (a "
                "channel, WalledNavierStokes2D.channel), the slabs lying along the periodic x "
                f"axis; got periodic axes {model.grid.is_periodic}. Run walled boxes such as "
                "the lid-driven cavity on one device."
            )
        axis = slab_axis(mesh, axis, "DecomposedWalled")
        self.mesh_axes = checked_mesh_axes(model.grid, mesh, (axis, None))
        self.mesh = mesh
        self.model = model

    @property
    def axis(self) -> str:
        """The mesh axis the slabs are split over."""
        return self.mesh_axes[0]

    @property
    def step_limit(self) -> str:
        return self.model.step_limit

    def describe_blow_up(self, solver: Any, y: Array, dt0: Array) -> str:
        return self.model.describe_blow_up(solver, y, dt0)

    def __call__(self, t, y, args):
        block = block_grid(self.grid, self.mesh, mesh_axes=self.mesh_axes)
        momentum = (
            kernels.mac_momentum
            if resolve_impl(self.model.impl, "mac_momentum") == "pallas"
            else kernels.mac_momentum_reference
        )

        def on_slab(viscosity, body_force, velocity, open_faces, inverse_laplacian):
            padded = _padded_slab(velocity, block)
            tendency = momentum(padded, block.spacing, viscosity, body_force) * open_faces
            source = _divergence_on_slab(tendency, block)
            pressure = self._solve_pressure_on_slab(source, inverse_laplacian)
            return tendency - _gradient_on_slab(pressure, block) * open_faces

        slabs = self.partition_spec
        replicated = PartitionSpec()
        columns = PartitionSpec(None, self.axis)
        # check_vma=False: a Pallas kernel's output carries no varying-mesh-axes annotation
        # (as in Decomposed); the tests check values and gradients against one device.
        return jax.shard_map(
            on_slab,
            mesh=self.mesh,
            in_specs=(replicated, replicated, slabs, slabs, columns),
            out_specs=slabs,
            check_vma=False,
        )(
            self.model.viscosity,
            self.model.body_force,
            y,
            self.model._open_faces(y.dtype),
            self._inverse_laplacian_columns(y.dtype),
        )

    def _inverse_laplacian_columns(self, dtype: Any) -> Array:
        """The model's inverse Laplacian per (k_x, DCT mode), zero-padded along the modes
        to a multiple of the devices: split over them, each device's share of columns."""
        symbol = self.model._inverse_laplacian_symbol(constant_mode=0.0)  # zero-mean pressure
        num_modes = symbol.shape[1]
        padding = multiple_of_devices(num_modes, self.mesh.shape[self.axis]) - num_modes
        return jnp.asarray(np.pad(symbol, ((0, 0), (0, padding))), dtype)

    def _solve_pressure_on_slab(self, source: Array, inverse_laplacian: Array) -> Array:
        """The model's `solve_pressure` on a slab: the DCT along y on the rows, the FFT
        along x on the columns (between two all_to_alls)."""
        num_y = source.shape[1]
        num_padded = inverse_laplacian.shape[1] * self.mesh.shape[self.axis]
        rows = jnp.pad(dct(source, type=2, norm="ortho", axis=1), ((0, 0), (0, num_padded - num_y)))
        spectrum = jnp.fft.fft(rows_to_columns(rows, self.axis), axis=0)
        spectrum = spectrum * inverse_laplacian.astype(spectrum.dtype)
        rows = columns_to_rows(jnp.fft.ifft(spectrum, axis=0).real, self.axis)
        return idct(rows[:, :num_y], type=2, norm="ortho", axis=1)


def _padded_slab(velocity: Array, block: Grid) -> Array:
    """The model's `_padded_velocity` on a slab: along y (local), the walls' tangential
    ghosts for u, and for v the wrapped faces (the face beyond the last is the wall face,
    zero); along x, the neighbouring slabs' rows of both, by halo exchange."""
    u = pad_axis(velocity[0], block, 1, 1)
    v = jnp.pad(velocity[1], ((0, 0), (1, 1)), mode="wrap")
    return pad_axis(jnp.stack([u, v]), block, 0, 1)


def _neighbouring_rows(field: Array, block: Grid, side: str) -> Array:
    """`jnp.roll(field, ±1, 0)` of the whole field, on a slab: the row beyond `side`
    comes from the neighbouring slab (one `ppermute`)."""
    beyond = block.boundary(0, side).ghost_cells(field, 0, side, 1, block.spacing[0])
    if side == "low":
        return jnp.concatenate([beyond, field[:-1]])
    return jnp.concatenate([field[1:], beyond])


def _divergence_on_slab(velocity: Array, block: Grid) -> Array:
    """The model's `divergence` on a slab (backward differences)."""
    hx, hy = block.spacing
    u, v = velocity[0], velocity[1]
    return (u - _neighbouring_rows(u, block, "low")) / hx + (v - jnp.roll(v, 1, 1)) / hy


def _gradient_on_slab(pressure: Array, block: Grid) -> Array:
    """The model's pressure gradient on a slab (forward differences), before the mask."""
    hx, hy = block.spacing
    return jnp.stack(
        [
            (_neighbouring_rows(pressure, block, "high") - pressure) / hx,
            (jnp.roll(pressure, -1, 1) - pressure) / hy,
        ]
    )
