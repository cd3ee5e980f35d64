"""Uniform grids, boundary conditions and finite-difference stencil operators.

**The contract** (shared with `simlab.kernels` and domain-decomposed runs):

- A field on a [`simlab.Grid`][] is an array whose trailing axes are `grid.shape`;
  leading axes are channels and pass through every operator.
- `pad(field, grid, width)` adds `width` ghost cells per side of each spatial axis, filled
  by the grid's boundary conditions (each condition's `ghost_cells` method).
- `<op>_interior(padded, spacing, ...)` computes a stencil from an already padded array and
  returns the interior (each spatial axis `2 * width` shorter); `stencil_width(op)` gives
  `width`. `<op>(field, grid, ...)` is `pad` followed by `<op>_interior`. A run split over
  devices fills its ghost cells by halo exchange (and `ghost_cells` on the global domain's
  own sides) and calls the same `<op>_interior`.
- `impl="auto" | "xla" | "pallas"` is resolved inside `<op>_interior`: `"xla"` is the
  pure-jnp reference; `"pallas"` calls the operator's kernel from `simlab.kernels` (a
  fixed table: the Laplacian has one), with the same arguments as `<op>_interior` minus
  `impl`; `"auto"` is Pallas where a kernel was measured faster on the platform, XLA otherwise
  ([`simlab.grid.resolve_impl`][]). Every impl differentiates in forward and reverse
  mode.
- `impl="spectral"` makes `<op>(field, grid)` differentiate in Fourier space instead
  (exact for band-limited fields; periodic grids only, refused otherwise). It has no
  padded form, so `<op>_interior` refuses it.
"""

from ._boundary import (
    AbstractBoundaryCondition as AbstractBoundaryCondition,
    Dirichlet as Dirichlet,
    Inflow as Inflow,
    Neumann as Neumann,
    Outflow as Outflow,
    Periodic as Periodic,
    Robin as Robin,
)
from ._dispatch import IMPLS as IMPLS, resolve_impl as resolve_impl
from ._grid import Grid as Grid
from ._operators import (
    advection as advection,
    advection_interior as advection_interior,
    diffusion as diffusion,
    diffusion_interior as diffusion_interior,
    divergence as divergence,
    divergence_interior as divergence_interior,
    gradient as gradient,
    gradient_interior as gradient_interior,
    laplacian as laplacian,
    laplacian_interior as laplacian_interior,
    pad as pad,
    pad_axis as pad_axis,
    pad_coefficient as pad_coefficient,
    stencil_width as stencil_width,
)
from ._spectral import (
    dealias as dealias,
    dealiased_product as dealiased_product,
    dealiasing_mask as dealiasing_mask,
    fourier_transform as fourier_transform,
    impulse_response_symbol as impulse_response_symbol,
    inverse_fourier_transform as inverse_fourier_transform,
    spectral_divergence as spectral_divergence,
    spectral_gradient as spectral_gradient,
    spectral_laplacian as spectral_laplacian,
    wavenumbers as wavenumbers,
)
from ._vorticity import (
    cfl_step as cfl_step,
    courant_number as courant_number,
    energy_spectrum as energy_spectrum,
    enstrophy as enstrophy,
    kinetic_energy as kinetic_energy,
    streamfunction as streamfunction,
    velocity as velocity,
)
