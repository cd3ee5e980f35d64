r"""Split grid models: a stiff linear part and a nonlinear rest, $\dot u = L u + N(t, u)$.

IMEX Runge–Kutta methods treat $L$ implicitly and $N$ explicitly; exponential
integrators (`simlab.integrate.ETDRK4`) integrate $L$ exactly in Fourier space, where a
constant-coefficient operator on a periodic grid is diagonal: $\widehat{Lu}_{\mathbf m} =
\lambda_{\mathbf m}\,\hat u_{\mathbf m}$, with $\lambda$ the operator's *symbol*.

A model declares its split in its own class, by subclassing
[`simlab.models.AbstractSplitGridModel`][] (the finite-difference models of
`simlab.models._pde` do, through `AbstractAffineSplitGridModel`) or, for pseudo-spectral
models, [`simlab.models.AbstractSpectralGridModel`][]. This module holds the spectral base
class; what the solvers ask of any split model is `simlab.integrate._split`'s protocol.
"""

import abc
from typing import Any

from jaxtyping import Array

from ..grid._spectral import apply_symbol, fourier_transform, inverse_fourier_transform
from ._pde import AbstractSplitGridModel


class AbstractSpectralGridModel(AbstractSplitGridModel):
    r"""A pseudo-spectral split model on a periodic grid: the linear part is its symbol,
    $\widehat{Lu} = \lambda \hat u$, and the nonlinear part is computed from the spectrum.

    Subclasses implement `linear_symbol()` and `nonlinear_spectral(t, spectrum, args)`,
    which maps $\hat u$ (`jnp.fft.rfftn` over the grid axes) to $\widehat{N(u)}$ with its
    own dealiasing. Exponential integrators step the spectrum directly, saving the
    transforms a real-space `nonlinear` would spend at every stage.
    """

    @abc.abstractmethod
    def nonlinear_spectral(self, t: Any, spectrum: Array, args: Any) -> Array:
        r"""$\widehat{N(u)}$ from $\hat u$, both on the rfft half spectrum."""

    @property
    def channel_shape(self) -> tuple[int, ...]:
        return ()  # one real field: the spectrum is its rfft over the grid axes

    def linear(self, t, y, args):
        spectrum = fourier_transform(y, self.grid)
        return inverse_fourier_transform(apply_symbol(self.linear_symbol(), spectrum), self.grid)

    def nonlinear(self, t, y, args):
        spectrum = self.nonlinear_spectral(t, fourier_transform(y, self.grid), args)
        return inverse_fourier_transform(spectrum, self.grid)

    def __call__(self, t, y, args):
        spectrum = fourier_transform(y, self.grid)
        linear = apply_symbol(self.linear_symbol(), spectrum)
        total = linear + self.nonlinear_spectral(t, spectrum, args)
        return inverse_fourier_transform(total, self.grid)
