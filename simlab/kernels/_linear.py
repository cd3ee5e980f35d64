r"""Linear stencil launches as one JAX primitive, differentiable in forward and reverse mode.

JAX cannot differentiate through a `pallas_call`. A launch that is linear in its padded
input needs no derivative of the kernel, though: its tangent is the same launch applied to
the tangent, and, when the stencil is symmetric under reflection of each axis (every
Laplacian stencil here; several heat steps, whose stencil is a power of the Laplacian's),
its transpose is the same launch applied to the cotangent zero-padded by twice the halo
width $w$:

$$
(L u)_i = \sum_{|k| \le w} c_k\, u_{i + w + k}, \qquad
(L^\top g)_j = \sum_{|k| \le w} c_k\, g_{j - w - k}
            = \sum_{|k| \le w} c_k\, \bar g_{j + w + k}
\quad\text{with } c_{-k} = c_k,\ \bar g = (0_{2w}, g, 0_{2w}).
$$

`stencil_p` is that launch as a primitive: a `LinearStencil` (a frozen dataclass, the
primitive's static parameter) says which kernel to run; the primitive supplies the JVP
(the launch on the tangent, plus the stencil's own term for its coefficients), the
transpose (so `jax.grad` is JAX's linearise-and-transpose), batching, and lowering (the
launch itself, for any platform). The transposed cotangent on the ghost cells is then
carried back to the cells they copy by JAX's derivative of the padding (the boundary
condition's adjoint).
"""

import abc
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
from jaxtyping import Array

from ._pallas import zero_pad


class LinearStencil(abc.ABC):
    """A kernel launch that is linear in its padded input, with a reflection-symmetric
    stencil; subclasses are frozen dataclasses (hashable: the primitive's parameter).

    Calling one binds `stencil_p`: `stencil(padded, *coefficients)` runs the launch, and
    is differentiable in both modes with respect to `padded` and, where the subclass
    gives `coefficient_tangent`, in forward mode with respect to the coefficients (the
    launch is not linear in those, so reverse mode reaches them through the caller's
    linearisation, never through the transpose).
    """

    @property
    @abc.abstractmethod
    def width(self) -> int:
        """The halo width $w$: each spatial axis of the result is `2 * w` shorter."""

    @property
    @abc.abstractmethod
    def num_spatial(self) -> int:
        """The number of trailing (spatial) axes the stencil runs over."""

    @abc.abstractmethod
    def run(self, padded: Array, *coefficients: Array) -> Array:
        """The Pallas launch."""

    def coefficient_tangent(
        self, padded: Array, coefficients: Sequence[Array], tangents: Sequence[Array]
    ) -> Array:
        """The derivative of the launch with respect to its coefficients, applied to their
        tangents (at `padded`)."""
        raise NotImplementedError(
            f"{type(self).__name__} is not differentiable with respect to its coefficients."
        )

    def __call__(self, padded: Array, *coefficients: Array) -> Array:
        return stencil_p.bind(padded, *coefficients, stencil=self)


stencil_p = Primitive("simlab_linear_stencil")


def _impl(padded, *coefficients, stencil: LinearStencil):
    return stencil.run(padded, *coefficients)


def _abstract_eval(padded, *coefficients, stencil: LinearStencil):
    leading = padded.shape[: padded.ndim - stencil.num_spatial]
    spatial = padded.shape[padded.ndim - stencil.num_spatial :]
    return padded.update(shape=leading + tuple(n - 2 * stencil.width for n in spatial))


def _jvp(primals, tangents, *, stencil: LinearStencil):
    padded, *coefficients = primals
    padded_tangent, *coefficient_tangents = tangents
    out = stencil(padded, *coefficients)
    terms = []
    if type(padded_tangent) is not ad.Zero:
        terms.append(stencil(padded_tangent, *coefficients))
    if any(type(t) is not ad.Zero for t in coefficient_tangents):
        coefficient_tangents = [ad.instantiate_zeros(t) for t in coefficient_tangents]
        terms.append(stencil.coefficient_tangent(padded, coefficients, coefficient_tangents))
    if not terms:
        return out, ad.Zero.from_primal_value(out)
    return out, sum(terms[1:], start=terms[0])


def _transpose(cotangent, padded, *coefficients, stencil: LinearStencil):
    if any(ad.is_undefined_primal(c) for c in coefficients):
        raise NotImplementedError(
            f"{type(stencil).__name__} is linear in the padded field only, not in its coefficients."
        )
    if type(cotangent) is ad.Zero:
        padded_cotangent = ad.Zero(padded.aval)
    else:
        # The symmetric stencil is its own transpose on the cotangent padded with 2w zeros.
        wide = zero_pad(cotangent, 2 * stencil.width, stencil.num_spatial)
        padded_cotangent = stencil(wide, *coefficients)
    return [padded_cotangent, *(None for _ in coefficients)]


def _batch(args, dims, *, stencil: LinearStencil):
    padded, *coefficients = args
    padded_dim, *coefficient_dims = dims
    if all(d is None for d in coefficient_dims):  # None: not batched
        # Leading axes of the padded field are a batch already.
        return stencil(jnp.moveaxis(padded, padded_dim, 0), *coefficients), 0
    # Coefficients that vary over the batch: one launch per member.
    size = next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not None)
    stacked = [
        jnp.broadcast_to(a, (size, *a.shape)) if d is None else jnp.moveaxis(a, d, 0)
        for a, d in zip(args, dims, strict=True)
    ]
    return jax.lax.map(lambda member: stencil(*member), stacked), 0


stencil_p.def_impl(_impl)
stencil_p.def_abstract_eval(_abstract_eval)
ad.primitive_jvps[stencil_p] = _jvp
ad.primitive_transposes[stencil_p] = _transpose
batching.primitive_batchers[stencil_p] = _batch
mlir.register_lowering(stencil_p, mlir.lower_fun(_impl, multiple_results=False))
