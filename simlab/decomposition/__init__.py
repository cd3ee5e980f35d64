"""Domain decomposition: a grid split into blocks over a device mesh, with halo exchange.

- [`simlab.decomposition.Decomposed`][] wraps a grid PDE model so that `simulate` runs it
  with the state split over a mesh (1-D slabs, 2-D blocks), shard-mapped vector field.
- [`simlab.decomposition.block_grid`][] and [`simlab.decomposition.HaloExchange`][] let
  your own `jax.shard_map` code call any `simlab.grid` operator on a block.
- [`simlab.decomposition.DecomposedSpectral`][] runs a pseudo-spectral model
  (`NavierStokes2D`) on slabs, its transforms [`simlab.decomposition.SlabFFT`][]s: 2-D
  real FFTs with one `all_to_all` each.
- [`simlab.decomposition.DecomposedWalled`][] runs a walled channel flow
  (`WalledNavierStokes2D`) on slabs along its periodic axis: halos for the stencils, a
  DCT on each slab and a distributed FFT for the pressure.
- [`simlab.decomposition.decomposition_mesh`][] builds the mesh.
- [`simlab.decomposition.ring_pair_forces`][] splits particles instead: all-pairs forces
  with the sources passed round a ring of devices.
"""

from ._decomposed import (
    Decomposed as Decomposed,
    decomposition_mesh as decomposition_mesh,
)
from ._fft import SlabFFT as SlabFFT
from ._halo import HaloExchange as HaloExchange, block_grid as block_grid
from ._ring import ring_pair_forces as ring_pair_forces
from ._spectral import DecomposedSpectral as DecomposedSpectral
from ._walled import DecomposedWalled as DecomposedWalled
