r"""What IMEX and exponential integrators ask of a split vector field, $f = L u + N(t, u)$.

Integrators never import a model class: a model serves them by having these methods
(`simlab.models.AbstractSplitGridModel` does). IMEX methods need the two parts in real
space (`SplitVectorField`); exponential methods also need the Fourier symbol of $L$ and
the spectrum's transforms (`FourierSplitVectorField`). Before a solve the declared split
is checked on random probes: $L$ must be linear, and its symbol must be its multiplier.
"""

from typing import Any, Protocol, runtime_checkable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._misc import is_concrete
from ..grid._spectral import apply_symbol


@runtime_checkable
class SplitVectorField(Protocol):
    """A vector field split into a linear part and a nonlinear rest (real space)."""

    def linear(self, t: Any, y: Array, args: Any) -> Array:
        """The linear part $L u$."""

    def nonlinear(self, t: Any, y: Array, args: Any) -> Array:
        """The rest $N(t, u)$."""


@runtime_checkable
class FourierSplitVectorField(SplitVectorField, Protocol):
    r"""A split vector field whose linear part is diagonal in Fourier space."""

    def require_fourier(self, solver: str) -> None:
        """Raises a ValueError naming `solver` unless the state has a Fourier transform
        (a periodic grid on every axis)."""

    def linear_symbol(self) -> Array:
        r"""The multiplier $\lambda$ of $L$: $\widehat{Lu} = \lambda \hat u$."""

    def to_spectrum(self, y: Array) -> Array:
        """The spectrum $\\hat u$ of the real state `y`."""

    def from_spectrum(self, spectrum: Array) -> Array:
        """The real state whose spectrum is `spectrum`."""

    def nonlinear_spectral(self, t: Any, spectrum: Array, args: Any) -> Array:
        r"""$\widehat{N(u)}$ from $\hat u$."""


def require_split(model: Any, protocol: type = SplitVectorField) -> Any:
    """`model` if it declares the split `protocol` asks for; a ValueError naming the fix."""
    if isinstance(model, protocol):
        return model
    raise ValueError(
        f"{type(model).__name__} declares no split into a linear and a nonlinear part, which "
        "IMEX and exponential (ETDRK) solvers need; subclass "
        "simlab.models.AbstractSplitGridModel (implement linear, nonlinear and linear_symbol), "
        "or use an explicit or implicit solver such as 'tsit5' or 'kvaerno5'."
    )


LINEARITY_PROBE_TOLERANCE = 1e-6  # relative; roundoff of a linear stencil is ~1e-15 in float64


def _probe_fields(y0: Array) -> Array:
    """Two random fields shaped like `y0` (numpy's generator: no PRNG kernel to compile)."""
    fields = np.random.default_rng(0).standard_normal((2, *jnp.shape(y0)))
    return jnp.asarray(fields, dtype=jnp.result_type(y0))


def _relative(difference: Array, scale: Array) -> Array:
    tiny = jnp.finfo(difference.dtype).tiny
    return jnp.max(jnp.abs(difference)) / (scale + tiny)


@eqx.filter_jit
def _linearity_residual(model: SplitVectorField, t: Any, probes: Array, args: Any) -> Array:
    u, v = probes[0], probes[1]
    a, b = 0.75, -1.25
    lu, lv = model.linear(t, u, args), model.linear(t, v, args)
    combined = model.linear(t, a * u + b * v, args)
    scale = jnp.max(jnp.abs(a * lu)) + jnp.max(jnp.abs(b * lv))
    return _relative(combined - a * lu - b * lv, scale)


@eqx.filter_jit
def _symbol_residual(model: FourierSplitVectorField, t: Any, probes: Array, args: Any) -> Array:
    u = probes[0]
    direct = model.linear(t, u, args)
    spectrum = model.to_spectrum(u)
    symbol = model.linear_symbol()
    via_symbol = model.from_spectrum(apply_symbol(symbol, spectrum))
    return _relative(direct - via_symbol, jnp.max(jnp.abs(direct)))


def _probe(residual_fn, model: Any, t: Any, y0: Array, args: Any) -> float | None:
    """The residual of a probe, or None while the model's parameters or `y0` are traced
    (they were checked where they were concrete, like the other value checks on models)."""
    leaves = jax.tree_util.tree_leaves((eqx.filter(model, eqx.is_array), y0, t))
    if not all(is_concrete(leaf) for leaf in leaves):
        return None
    return float(residual_fn(model, t, _probe_fields(y0), args))


def _tolerance(y0: Array) -> float:
    return max(LINEARITY_PROBE_TOLERANCE, 1e3 * float(jnp.finfo(jnp.result_type(y0)).eps))


def check_linear_part(model: SplitVectorField, t: Any, y0: Array, args: Any) -> None:
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


def check_linear_symbol(model: FourierSplitVectorField, t: Any, y0: Array, args: Any) -> None:
    r"""Raises a ValueError unless `linear_symbol()` is the Fourier multiplier of `linear`
    on a random probe, $\mathcal F^{-1}(\lambda \hat u) = L u$ (skipped while traced)."""
    residual = _probe(_symbol_residual, model, t, y0, args)
    if residual is not None and not residual <= _tolerance(y0):
        raise ValueError(
            f"linear_symbol() of {type(model).__name__} is not the Fourier multiplier of "
            f"its linear part: applied to a random field they differ by {residual:.3g} "
            "(relative). Check the symbol's signs and wavenumbers (simlab.grid.wavenumbers)."
        )
