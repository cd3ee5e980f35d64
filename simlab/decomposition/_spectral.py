"""`DecomposedSpectral`: a pseudo-spectral model stepped on a field split into slabs."""

from jax.sharding import Mesh, NamedSharding
from jaxtyping import Array

from ..models._split import AbstractSpectralGridModel
from ._fft import SlabFFT
from ._sharded import AbstractSplitModel


class DecomposedSpectral(AbstractSplitModel):
    r"""A pseudo-spectral model (e.g. [`simlab.models.NavierStokes2D`][]) whose field is
    split into slabs along grid axis 0 over a device mesh, its transforms distributed.

    Every transform between the field and its spectrum is a
    [`simlab.decomposition.SlabFFT`][]: the field lies in slabs of rows, the spectrum in
    slabs of $k_y$ columns, and one `jax.lax.all_to_all` turns one into the other. The
    model's own `nonlinear_spectral_with` computes the nonlinear term with those
    transforms, so a right-hand side costs two `all_to_all`s (one batch of inverse
    transforms, one forward transform) and everything else stays on its device.

    Solve it with `simulate(..., solver="etdrk4", adaptive=False, dt0=...)` (or any fixed-
    or adaptive-step solver), a sharded `y0` (`decomposed.shard(y0)`) and `throw=False`;
    the solver's spectra, stages and saved states stay split. The result equals the
    one-device run to roundoff, and `jax.grad` flows through the `all_to_all`s.

    **Arguments:**

    - `model`: a 2-D `simlab.models.AbstractSpectralGridModel` with a
      `nonlinear_spectral_with` method (`NavierStokes2D`).
    - `mesh`: the device mesh, e.g. [`simlab.decomposition.decomposition_mesh`][]`((4,))`.
    - `axis`: the mesh axis the slabs are split over (`None`: the mesh's only axis).

    !!! example

        ```python
        mesh = simlab.decomposition.decomposition_mesh((4,))
        grid = simlab.Grid((32, 32), extent=2 * jnp.pi)
        flow = simlab.models.NavierStokes2D(grid=grid, viscosity=0.05)
        split = simlab.decomposition.DecomposedSpectral(flow, mesh)
        w0 = simlab.models.random_vorticity(jax.random.PRNGKey(0), grid)
        trajectory = simlab.simulate(
            split, split.shard(w0), jnp.linspace(0.0, 0.5, 3), solver="etdrk4",
            adaptive=False, dt0=0.05, throw=False,
        )
        final_field = split.gather(trajectory.ys[-1])  # NumPy, (32, 32)
        ```
    """

    model: AbstractSpectralGridModel
    fft: SlabFFT

    state_names = ()

    def __init__(self, model: AbstractSpectralGridModel, mesh: Mesh, *, axis: str | None = None):
        if not hasattr(model, "nonlinear_spectral_with"):
            raise TypeError(
                "DecomposedSpectral splits pseudo-spectral models whose nonlinear term takes "
                "its transforms as an argument (nonlinear_spectral_with), such as "
                f"simlab.models.NavierStokes2D; got {type(model).__name__}. For "
                "finite-difference models use simlab.decomposition.Decomposed."
            )
        self.model = model
        self.fft = SlabFFT(model.grid, mesh, axis=axis)

    @property
    def mesh(self) -> Mesh:
        return self.fft.mesh

    @property
    def _num_channels(self) -> int:
        return len(self.state_shape) - self.grid.ndim

    @property
    def sharding(self) -> NamedSharding:
        """The sharding of the state (and of each saved time): slabs along grid axis 0."""
        return self.fft.field_sharding(self._num_channels)

    # The split of the vector field, in the slab layout: what ETDRK4 and IMEX solvers ask.

    def require_fourier(self, solver: str) -> None:
        self.model.require_fourier(solver)

    def linear_symbol(self) -> Array:
        return self.fft.multiplier(self.model.linear_symbol())

    def to_spectrum(self, y: Array) -> Array:
        return self.fft.forward(y)

    def from_spectrum(self, spectrum: Array) -> Array:
        return self.fft.inverse(spectrum)

    def nonlinear_spectral(self, t, spectrum, args):
        return self.model.nonlinear_spectral_with(self.fft, t, spectrum, args)

    def linear(self, t, y, args):
        return self.from_spectrum(self._apply_linear_symbol(self.to_spectrum(y)))

    def nonlinear(self, t, y, args):
        return self.from_spectrum(self.nonlinear_spectral(t, self.to_spectrum(y), args))

    def __call__(self, t, y, args):
        spectrum = self.to_spectrum(y)
        total = self._apply_linear_symbol(spectrum) + self.nonlinear_spectral(t, spectrum, args)
        return self.from_spectrum(total)

    def _apply_linear_symbol(self, spectrum: Array) -> Array:
        return self.linear_symbol().astype(spectrum.dtype) * spectrum
