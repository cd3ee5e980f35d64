r"""The real 2-D Fourier transform of a field split into slabs over devices.

A field of $N_x \times N_y$ cells lies on $P$ devices as slabs of $N_x/P$ rows. The
forward transform takes the real transform along $y$ on each slab (whole rows are local),
then trades blocks with every other device in one `jax.lax.all_to_all`, so each device
holds every $x$ for a $1/P$ share of the $k_y$ modes, and transforms along $x$ locally.
The inverse runs the same steps backwards. That is one `all_to_all` per transform (of a
whole batch of fields), and `jax.grad` goes through it: the transpose of an `all_to_all`
is the reverse `all_to_all`.

The half spectrum has $N_y/2 + 1$ modes along $k_y$, rarely a multiple of $P$: the
spectrum is padded with empty modes at the top to the next multiple, which
[`SlabFFT.multiplier`][simlab.decomposition.SlabFFT.multiplier] does to a Fourier
multiplier as well.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, ArrayLike

from ..grid import Grid
from ..grid._spectral import check_periodic
from ._halo import checked_mesh_axes, slab_axis


def multiple_of_devices(num_modes: int, num_devices: int) -> int:
    """`num_modes` rounded up to a multiple of `num_devices`: the columns of a transposed
    slab, padded with empty modes so that they divide evenly."""
    return math.ceil(num_modes / num_devices) * num_devices


def rows_to_columns(rows: Array, axis_name: str) -> Array:
    """Inside `jax.shard_map`: an array split along its axis -2 over mesh axis `axis_name`
    (slabs of rows), split along axis -1 instead (slabs of columns), by one
    `jax.lax.all_to_all`. Axis -1 must be a multiple of the devices."""
    x, y = rows.ndim - 2, rows.ndim - 1
    return jax.lax.all_to_all(rows, axis_name, split_axis=y, concat_axis=x, tiled=True)


def columns_to_rows(columns: Array, axis_name: str) -> Array:
    """The inverse of `rows_to_columns`: slabs of columns back to slabs of rows."""
    x, y = columns.ndim - 2, columns.ndim - 1
    return jax.lax.all_to_all(columns, axis_name, split_axis=x, concat_axis=y, tiled=True)


class SlabFFT(eqx.Module):
    r"""`jnp.fft.rfft2` and `irfft2` of fields split into slabs along grid axis 0, with
    `jax.shard_map` and one `jax.lax.all_to_all` per transform.

    Fields (real, trailing axes `grid.shape`, leading channel axes whole) are split along
    $x$ over the mesh axis: `PartitionSpec(..., axis, None)`. Spectra have trailing axes
    `spectral_shape`, $N_x \times$ the half spectrum padded to a multiple of the devices,
    and are split along $k_y$: `PartitionSpec(..., None, axis)`. The transforms equal
    `jnp.fft.rfft2` and `irfft2` to roundoff, on the modes they share; the padding modes
    are zero.

    **Arguments:**

    - `grid`: a periodic 2-D `simlab.Grid`, its axis 0 a multiple of the devices along
      `axis`.
    - `mesh`: the device mesh, e.g. [`simlab.decomposition.decomposition_mesh`][]`((4,))`.
    - `axis`: the mesh axis the slabs are split over (`None`: the mesh's only axis).

    !!! example

        ```python
        mesh = simlab.decomposition.decomposition_mesh((4,))
        grid = simlab.Grid((32, 32), extent=2 * jnp.pi)
        fft = simlab.decomposition.SlabFFT(grid, mesh)
        x, y = grid.mesh()
        field = jax.device_put(jnp.sin(x) * jnp.cos(2 * y), fft.field_sharding(0))
        spectrum = fft.forward(field)  # (32, 20): 17 modes of k_y, padded to 4 x 5
        fft.inverse(spectrum)  # the field again, split into slabs
        ```
    """

    grid: Grid
    mesh: Mesh = eqx.field(static=True)
    axis: str = eqx.field(static=True)

    def __init__(self, grid: Grid, mesh: Mesh, *, axis: str | None = None):
        if grid.ndim != 2:
            raise ValueError(f"SlabFFT transforms 2-D grids; got a {grid.ndim}-D grid.")
        check_periodic(grid, "SlabFFT")
        axis = slab_axis(mesh, axis, "SlabFFT")
        checked_mesh_axes(grid, mesh, (axis, None))
        self.grid, self.mesh, self.axis = grid, mesh, axis

    @property
    def num_devices(self) -> int:
        return self.mesh.shape[self.axis]

    @property
    def num_half_modes(self) -> int:
        """$N_y/2 + 1$, the modes of the real transform along $y$."""
        return self.grid.shape[1] // 2 + 1

    @property
    def spectral_shape(self) -> tuple[int, int]:
        """$N_x$ by the half spectrum padded to a multiple of the devices."""
        return (self.grid.shape[0], multiple_of_devices(self.num_half_modes, self.num_devices))

    def field_sharding(self, num_channels: int = 0) -> NamedSharding:
        """The layout of a field with `num_channels` leading axes: slabs along $x$."""
        return NamedSharding(self.mesh, self._field_spec(num_channels))

    def spectrum_sharding(self, num_channels: int = 0) -> NamedSharding:
        """The layout of a spectrum with `num_channels` leading axes: split along $k_y$."""
        return NamedSharding(self.mesh, self._spectrum_spec(num_channels))

    def _field_spec(self, num_channels: int) -> PartitionSpec:
        return PartitionSpec(*(None,) * num_channels, self.axis, None)

    def _spectrum_spec(self, num_channels: int) -> PartitionSpec:
        return PartitionSpec(*(None,) * num_channels, None, self.axis)

    def multiplier(self, symbol: ArrayLike) -> Array:
        """A Fourier multiplier on the half spectrum (trailing axes those of
        `simlab.grid.spectral_shape`), padded with zeros to `spectral_shape`."""
        symbol = jnp.asarray(symbol)
        padding = self.spectral_shape[1] - symbol.shape[-1]
        return jnp.pad(symbol, [(0, 0)] * (symbol.ndim - 1) + [(0, padding)])

    def forward(self, field: ArrayLike) -> Array:
        """The half spectrum of the real `field`, padded to `spectral_shape`, split along
        $k_y$ (`jnp.fft.rfft2` on the shared modes)."""
        field = jnp.asarray(field)
        self._check_trailing(field.shape, self.grid.shape, "field")
        x, y = field.ndim - 2, field.ndim - 1
        padding = [(0, 0)] * y + [(0, self.spectral_shape[1] - self.num_half_modes)]

        def on_slab(slab):
            rows = jnp.pad(jnp.fft.rfft(slab, axis=y), padding)
            return jnp.fft.fft(rows_to_columns(rows, self.axis), axis=x)

        return self._shard_map(on_slab, self._field_spec(x), self._spectrum_spec(x))(field)

    def inverse(self, spectrum: Array) -> Array:
        """The real field whose padded half spectrum is `spectrum`, split into slabs
        (`jnp.fft.irfft2`; the padding modes are ignored)."""
        self._check_trailing(spectrum.shape, self.spectral_shape, "spectrum")
        x, y = spectrum.ndim - 2, spectrum.ndim - 1
        num_y = self.grid.shape[1]

        def on_columns(columns):
            columns = jnp.fft.ifft(columns, axis=x)
            rows = columns_to_rows(columns, self.axis)
            half_spectrum = jax.lax.slice_in_dim(rows, 0, self.num_half_modes, axis=y)
            return jnp.fft.irfft(half_spectrum, n=num_y, axis=y)

        return self._shard_map(on_columns, self._spectrum_spec(x), self._field_spec(x))(spectrum)

    def _shard_map(self, fn, in_spec: PartitionSpec, out_spec: PartitionSpec):
        return jax.shard_map(fn, mesh=self.mesh, in_specs=in_spec, out_specs=out_spec)

    @staticmethod
    def _check_trailing(shape, expected, what: str) -> None:
        if len(shape) < 2 or tuple(shape[-2:]) != tuple(expected):
            raise ValueError(
                f"SlabFFT: a {what} needs trailing axes {tuple(expected)} (leading axes are "
                f"channels); got shape {tuple(shape)}."
            )
