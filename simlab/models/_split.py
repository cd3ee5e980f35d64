r"""Split grid models: a stiff linear part and a nonlinear rest, $\dot u = L u + N(t, u)$.

IMEX Runge–Kutta methods (`simlab._imex`) treat $L$ implicitly and $N$ explicitly;
exponential integrators (`simlab._etdrk`) integrate $L$ exactly in Fourier space, where a
constant-coefficient operator on a periodic grid is diagonal: $\widehat{Lu}_{\mathbf m} =
\lambda_{\mathbf m}\,\hat u_{\mathbf m}$, with $\lambda$ the operator's *symbol*.

A model declares its split by subclassing [`simlab.models.AbstractSplitGridModel`][] (or,
for pseudo-spectral models, [`simlab.models.AbstractSpectralGridModel`][]).
`split_parts(model)` gives the solvers one view of any split model, including the
finite-difference models of `simlab.models._pde`, whose splits are declared here.
"""

import abc
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ..grid import Grid, advection, diffusion, laplacian
from ..grid._spectral import (
    apply_symbol,
    check_periodic,
    fourier_transform,
    inverse_fourier_transform,
)
from ._base import is_concrete
from ._pde import AbstractGridModel, AdvectionDiffusion, Burgers, GrayScott, Heat


class AbstractSplitGridModel(AbstractGridModel):
    r"""A grid model whose vector field is a linear operator plus a nonlinear rest,
    $f(t, u) = L u + N(t, u)$.

    Subclasses implement:

    - `linear(t, y, args)`: $L u$ in real space (linear in `y`; simlab checks this on a
      random probe before solving);
    - `nonlinear(t, y, args)`: $N(t, u)$, everything else (it may itself be linear, e.g.
      advection that is cheap to treat explicitly);
    - `linear_symbol()`: on a periodic grid, the Fourier multiplier $\lambda$ of $L$ on the
      half spectrum of `jnp.fft.rfftn` (shape `(*grid.shape[:-1], grid.shape[-1] // 2 + 1)`,
      with a leading channel axis where channels have different operators); raise a
      `ValueError` naming the reason where $L$ is not diagonal in Fourier space.

    `model(t, y, args)` is `linear + nonlinear`, so every explicit solver still works.
    """

    @abc.abstractmethod
    def linear(self, t: Any, y: Array, args: Any) -> Array:
        """The linear part $L u$ (treated implicitly by IMEX, exactly by ETDRK)."""

    @abc.abstractmethod
    def nonlinear(self, t: Any, y: Array, args: Any) -> Array:
        """The rest of the vector field, $N(t, u)$ (treated explicitly)."""

    @abc.abstractmethod
    def linear_symbol(self) -> Array:
        r"""The Fourier multiplier $\lambda$ of the linear part on the rfft half spectrum."""

    def __call__(self, t, y, args):
        return self.linear(t, y, args) + self.nonlinear(t, y, args)


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


class SplitParts(eqx.Module):
    """The split of one model as the solvers see it: `linear`, `nonlinear`, `linear_symbol`
    and `nonlinear_spectral`, whatever way the model declared them.

    Build it with `split_parts(model)`; the model is a field, so `jax.grad` flows into its
    parameters through every part.
    """

    model: Any
    linear_fn: Callable = eqx.field(static=True)
    nonlinear_fn: Callable = eqx.field(static=True)
    symbol_fn: Callable = eqx.field(static=True)
    spectral_fn: Callable | None = eqx.field(static=True)

    @property
    def grid(self) -> Grid:
        return self.model.grid

    def linear(self, t, y, args):
        return self.linear_fn(self.model, t, y, args)

    def nonlinear(self, t, y, args):
        return self.nonlinear_fn(self.model, t, y, args)

    def linear_symbol(self) -> Array:
        check_periodic(self.grid, f"the Fourier symbol of {type(self.model).__name__}")
        return jnp.asarray(self.symbol_fn(self.model))

    def nonlinear_spectral(self, t, spectrum, args):
        if self.spectral_fn is not None:
            return self.spectral_fn(self.model, t, spectrum, args)
        field = inverse_fourier_transform(spectrum, self.grid)
        return fourier_transform(self.nonlinear(t, field, args), self.grid)


def is_split_model(model: Any) -> bool:
    """Whether `model` declares a split into linear and nonlinear parts (IMEX and ETDRK
    solvers accept it)."""
    return isinstance(model, AbstractSplitGridModel) or type(model) in _SPLITS


def split_parts(model: Any) -> SplitParts:
    """The [`SplitParts`][simlab.models._split.SplitParts] of a split model; a ValueError
    naming the fix for any other model."""
    if isinstance(model, AbstractSplitGridModel):
        cls = type(model)
        spectral = cls.nonlinear_spectral if isinstance(model, AbstractSpectralGridModel) else None
        return SplitParts(model, cls.linear, cls.nonlinear, cls.linear_symbol, spectral)
    if type(model) in _SPLITS:
        linear_fn, nonlinear_fn, symbol_fn = _SPLITS[type(model)]
        return SplitParts(model, linear_fn, nonlinear_fn, symbol_fn, None)
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
def _linearity_residual(parts: SplitParts, t: Any, probes: Array, args: Any) -> Array:
    u, v = probes[0], probes[1]
    a, b = 0.75, -1.25
    lu, lv = parts.linear(t, u, args), parts.linear(t, v, args)
    combined = parts.linear(t, a * u + b * v, args)
    scale = jnp.max(jnp.abs(a * lu)) + jnp.max(jnp.abs(b * lv))
    return _relative(combined - a * lu - b * lv, scale)


@eqx.filter_jit
def _symbol_residual(parts: SplitParts, t: Any, probes: Array, args: Any) -> Array:
    u = probes[0]
    direct = parts.linear(t, u, args)
    spectrum = fourier_transform(u, parts.grid)
    via_symbol = inverse_fourier_transform(
        apply_symbol(parts.linear_symbol(), spectrum), parts.grid
    )
    return _relative(direct - via_symbol, jnp.max(jnp.abs(direct)))


def _probe(residual_fn, parts: SplitParts, t: Any, y0: Array, args: Any) -> float | None:
    """The residual of a probe, or None while the model's parameters or `y0` are traced
    (they were checked where they were concrete, like the other value checks on models)."""
    leaves = jax.tree_util.tree_leaves((eqx.filter(parts, eqx.is_array), y0, t))
    if not all(is_concrete(leaf) for leaf in leaves):
        return None
    return float(residual_fn(parts, t, _probe_fields(y0), args))


def _tolerance(y0: Array) -> float:
    return max(LINEARITY_PROBE_TOLERANCE, 1e3 * float(jnp.finfo(jnp.result_type(y0)).eps))


def check_linear_part(parts: SplitParts, t: Any, y0: Array, args: Any) -> None:
    r"""Raises a ValueError unless the declared linear part is linear on a random probe,
    $L(a u + b v) = a L u + b L v$ for random fields $u, v$ (shaped like `y0`) and scalars
    (skipped while traced)."""
    residual = _probe(_linearity_residual, parts, t, y0, args)
    if residual is not None and not residual <= _tolerance(y0):
        raise ValueError(
            f"the linear part of {type(parts.model).__name__} is not linear: on a random probe "
            f"L(a u + b v) differs from a L(u) + b L(v) by {residual:.3g} (relative). Move the "
            "nonlinear (or constant) terms from `linear` into `nonlinear`."
        )


def check_linear_symbol(parts: SplitParts, t: Any, y0: Array, args: Any) -> None:
    r"""Raises a ValueError unless `linear_symbol()` is the Fourier multiplier of `linear`
    on a random probe, $\mathcal F^{-1}(\lambda \hat u) = L u$ (skipped while traced)."""
    residual = _probe(_symbol_residual, parts, t, y0, args)
    if residual is not None and not residual <= _tolerance(y0):
        raise ValueError(
            f"linear_symbol() of {type(parts.model).__name__} is not the Fourier multiplier of "
            f"its linear part: applied to a random field they differ by {residual:.3g} "
            "(relative). Check the symbol's signs and wavenumbers (simlab.grid.wavenumbers)."
        )


# The splits of the finite-difference models in simlab.models._pde, keyed by class: each
# entry is (linear, nonlinear, linear_symbol), functions of the model first.


def impulse_response_symbol(linear_fn: Callable[[Array], Array], grid: Grid, shape) -> Array:
    r"""The Fourier symbol of a translation-invariant linear operator on a periodic grid,
    read off its response to a unit impulse: $\lambda = \mathcal F(L\delta)$.

    A constant-coefficient stencil is a circular convolution, $Lu = \kappa \ast u$ with
    $\kappa = L\delta$, and the DFT turns convolution into multiplication, so the symbol
    is exact to roundoff. `shape` is the state's shape (channels are not mixed).
    """
    impulse = jnp.zeros(shape).at[(...,) + (0,) * grid.ndim].set(1.0)
    return fourier_transform(linear_fn(impulse), grid)


def _require_scalar(model: Any, *names: str) -> None:
    for name in names:
        if jnp.ndim(getattr(model, name)) != 0:
            raise ValueError(
                f"{type(model).__name__}: an exponential integrator needs a constant-coefficient "
                f"linear part, but {name} is a field; use an IMEX solver such as 'kencarp4', "
                "which treats variable coefficients implicitly in real space."
            )


# A wall with a nonzero value (Dirichlet g, Neumann q, Robin g) makes a stencil affine,
# L(u) = L_0 u + L(0): the linear part is L(u) - L(0) and the constant L(0) joins the rest.


def _heat_stencil(model: Heat, t, y, args):
    return model(t, y, args)


def _advection_diffusion_stencil(model: AdvectionDiffusion, t, y, args):
    return diffusion(y, model.diffusivity, model.grid, impl=model.impl)


def _advection_diffusion_rest(model: AdvectionDiffusion, t, y, args):
    return -advection(y, model.velocity, model.grid, scheme=model.scheme, impl=model.impl)


def _burgers_stencil(model: Burgers, t, y, args):
    return model.viscosity * laplacian(y, model.grid, impl=model.impl)


def _burgers_rest(model: Burgers, t, y, args):
    velocity = y[None] if model.grid.ndim == 1 else y
    return -advection(y, velocity, model.grid, scheme=model.scheme, impl=model.impl)


def _gray_scott_stencil(model: GrayScott, t, y, args):
    u, v = y[0], y[1]
    du = diffusion(u, model.diffusivity_u, model.grid, impl=model.impl) - model.feed_rate * u
    dv = diffusion(v, model.diffusivity_v, model.grid, impl=model.impl)
    return jnp.stack([du, dv - (model.feed_rate + model.kill_rate) * v])


def _gray_scott_rest(model: GrayScott, t, y, args):
    reaction = y[0] * y[1] ** 2
    return jnp.stack([model.feed_rate - reaction, reaction])


def _no_rest(model, t, y, args):
    return jnp.zeros_like(y)


def _fd_split(stencil: Callable, rest: Callable, *scalar_names: str):
    """(linear, nonlinear, linear_symbol) of a model whose vector field is an affine
    `stencil` (its linear part and the boundary values' constant) plus `rest`."""

    def linear(model, t, y, args):
        return stencil(model, t, y, args) - stencil(model, t, jnp.zeros_like(y), args)

    def nonlinear(model, t, y, args):
        return rest(model, t, y, args) + stencil(model, t, jnp.zeros_like(y), args)

    def linear_symbol(model):
        _require_scalar(model, *scalar_names)
        return impulse_response_symbol(
            lambda y: linear(model, 0.0, y, None), model.grid, model.state_shape
        )

    return linear, nonlinear, linear_symbol


_SPLITS: dict[type, tuple[Callable, Callable, Callable]] = {
    Heat: _fd_split(_heat_stencil, _no_rest, "diffusivity"),
    AdvectionDiffusion: _fd_split(
        _advection_diffusion_stencil, _advection_diffusion_rest, "diffusivity"
    ),
    Burgers: _fd_split(_burgers_stencil, _burgers_rest),
    GrayScott: _fd_split(_gray_scott_stencil, _gray_scott_rest, "diffusivity_u", "diffusivity_v"),
}
