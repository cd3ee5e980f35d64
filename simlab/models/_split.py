r"""Split grid models: a stiff linear part and a nonlinear rest, $\dot u = L u + N(t, u)$.

IMEX Runge–Kutta methods (`simlab._imex`) treat $L$ implicitly and $N$ explicitly;
exponential integrators (`simlab._etdrk`) integrate $L$ exactly in Fourier space, where a
constant-coefficient operator on a periodic grid is diagonal: $\widehat{Lu}_{\mathbf m} =
\lambda_{\mathbf m}\,\hat u_{\mathbf m}$, with $\lambda$ the operator's *symbol*.

A model declares its split in its own class, by subclassing
[`simlab.models.AbstractSplitGridModel`][] (the finite-difference models of
`simlab.models._pde` do, through `AbstractAffineSplitGridModel`) or, for pseudo-spectral
models, [`simlab.models.AbstractSpectralGridModel`][]. This module holds the spectral base
class and what the solvers ask of any split model.
"""

import abc
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ..grid._spectral import apply_symbol, fourier_transform, inverse_fourier_transform
from ._base import is_concrete
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


def require_split_model(model: Any) -> AbstractSplitGridModel:
    """`model` if it declares a split into linear and nonlinear parts (IMEX and ETDRK
    solvers need one); a ValueError naming the fix otherwise."""
    if isinstance(model, AbstractSplitGridModel):
        return model
    raise ValueError(
        f"{type(model).__name__} declares no split into a linear and a nonlinear part, which "
        "IMEX and exponential (ETDRK) solvers need; subclass "
        "simlab.models.AbstractSplitGridModel (implement linear, nonlinear and linear_symbol), "
        "or use an explicit or implicit solver such as 'tsit5' or 'kvaerno5'."
    )


def nonlinear_spectrum(model: AbstractSplitGridModel, t: Any, spectrum: Array, args: Any) -> Array:
    r"""$\widehat{N(u)}$ of a split model from $\hat u$: a spectral model's own
    `nonlinear_spectral`, or the transform of a real-space `nonlinear` (a stencil model)."""
    if isinstance(model, AbstractSpectralGridModel):
        return model.nonlinear_spectral(t, spectrum, args)
    field = inverse_fourier_transform(spectrum, model.grid)
    return fourier_transform(model.nonlinear(t, field, args), model.grid)


LINEARITY_PROBE_TOLERANCE = 1e-6  # relative; roundoff of a linear stencil is ~1e-15 in float64


def _probe_fields(y0: Array) -> Array:
    """Two random fields shaped like `y0` (numpy's generator: no PRNG kernel to compile)."""
    fields = np.random.default_rng(0).standard_normal((2, *jnp.shape(y0)))
    return jnp.asarray(fields, dtype=jnp.result_type(y0))


def _relative(difference: Array, scale: Array) -> Array:
    tiny = jnp.finfo(difference.dtype).tiny
    return jnp.max(jnp.abs(difference)) / (scale + tiny)


@eqx.filter_jit
def _linearity_residual(model: AbstractSplitGridModel, t: Any, probes: Array, args: Any) -> Array:
    u, v = probes[0], probes[1]
    a, b = 0.75, -1.25
    lu, lv = model.linear(t, u, args), model.linear(t, v, args)
    combined = model.linear(t, a * u + b * v, args)
    scale = jnp.max(jnp.abs(a * lu)) + jnp.max(jnp.abs(b * lv))
    return _relative(combined - a * lu - b * lv, scale)


@eqx.filter_jit
def _symbol_residual(model: AbstractSplitGridModel, t: Any, probes: Array, args: Any) -> Array:
    u = probes[0]
    direct = model.linear(t, u, args)
    spectrum = fourier_transform(u, model.grid)
    via_symbol = inverse_fourier_transform(
        apply_symbol(model.linear_symbol(), spectrum), model.grid
    )
    return _relative(direct - via_symbol, jnp.max(jnp.abs(direct)))


def _probe(
    residual_fn, model: AbstractSplitGridModel, t: Any, y0: Array, args: Any
) -> float | None:
    """The residual of a probe, or None while the model's parameters or `y0` are traced
    (they were checked where they were concrete, like the other value checks on models)."""
    leaves = jax.tree_util.tree_leaves((eqx.filter(model, eqx.is_array), y0, t))
    if not all(is_concrete(leaf) for leaf in leaves):
        return None
    return float(residual_fn(model, t, _probe_fields(y0), args))


def _tolerance(y0: Array) -> float:
    return max(LINEARITY_PROBE_TOLERANCE, 1e3 * float(jnp.finfo(jnp.result_type(y0)).eps))


def check_linear_part(model: AbstractSplitGridModel, t: Any, y0: Array, args: Any) -> None:
    r"""Raises a ValueError unless the declared linear part is linear on a random probe,
    $L(a u + b v) = a L u + b L v$ for random fields $u, v$ (shaped like `y0`) and scalars
    (skipped while traced)."""
    residual = _probe(_linearity_residual, model, t, y0, args)
    if residual is not None and not residual <= _tolerance(y0):
        raise ValueError(
            f"the linear part of {type(model).__name__} is not linear: on a random probe "
            f"L(a u + b v) differs from a L(u) + b L(v) by {residual:.3g} (relative). Move the "
            "nonlinear (or constant) terms from `linear` into `nonlinear`."
        )


def check_linear_symbol(model: AbstractSplitGridModel, t: Any, y0: Array, args: Any) -> None:
    r"""Raises a ValueError unless `linear_symbol()` is the Fourier multiplier of `linear`
    on a random probe, $\mathcal F^{-1}(\lambda \hat u) = L u$ (skipped while traced)."""
    residual = _probe(_symbol_residual, model, t, y0, args)
    if residual is not None and not residual <= _tolerance(y0):
        raise ValueError(
            f"linear_symbol() of {type(model).__name__} is not the Fourier multiplier of "
            f"its linear part: applied to a random field they differ by {residual:.3g} "
            "(relative). Check the symbol's signs and wavenumbers (simlab.grid.wavenumbers)."
        )
