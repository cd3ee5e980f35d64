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

`stencil_p` is that launch as a primitive (made like every launch primitive, see
`simlab.kernels._primitive`): a `LinearStencil` (a frozen dataclass, the primitive's
static parameter) says which kernel to run; the primitive supplies the JVP (the launch on
the tangent, plus the stencil's own term for its coefficients), the transpose (so
`jax.grad` is JAX's linearise-and-transpose), batching, and a lowering per platform. The
transposed cotangent on the ghost cells is then carried back to the cells they copy by
JAX's derivative of the padding (the boundary condition's adjoint).
"""

from collections.abc import Sequence

from jax.interpreters import ad
from jaxtyping import Array

from ._pallas import zero_pad
from ._primitive import KernelLaunch, launch_primitive


class LinearStencil(KernelLaunch):
    """A kernel launch that is linear in its padded input, with a reflection-symmetric
    stencil; subclasses are frozen dataclasses (hashable: the primitive's parameter).

    Calling one binds `stencil_p`: `stencil(padded, *coefficients)` runs the launch, and
    is differentiable in both modes with respect to `padded` and, where the subclass
    gives `coefficient_tangent`, in forward mode with respect to the coefficients (the
    launch is not linear in those, so reverse mode reaches them through the caller's
    linearisation, never through the transpose).
    """

    def coefficient_tangent(
        self, padded: Array, coefficients: Sequence[Array], tangents: Sequence[Array]
    ) -> Array:
        """The derivative of the launch with respect to its coefficients, applied to their
        tangents (at `padded`)."""
        raise NotImplementedError(
            f"{type(self).__name__} is not differentiable with respect to its coefficients."
        )


stencil_p = launch_primitive("simlab_linear_stencil")
LinearStencil.primitive = stencil_p


def _jvp(primals, tangents, *, launch: LinearStencil):
    padded, *coefficients = primals
    padded_tangent, *coefficient_tangents = tangents
    out = launch(padded, *coefficients)
    terms = []
    if type(padded_tangent) is not ad.Zero:
        terms.append(launch(padded_tangent, *coefficients))
    if any(type(t) is not ad.Zero for t in coefficient_tangents):
        coefficient_tangents = [ad.instantiate_zeros(t) for t in coefficient_tangents]
        terms.append(launch.coefficient_tangent(padded, coefficients, coefficient_tangents))
    if not terms:
        return out, ad.Zero.from_primal_value(out)
    return out, sum(terms[1:], start=terms[0])


def _transpose(cotangent, padded, *coefficients, launch: LinearStencil):
    if any(ad.is_undefined_primal(c) for c in coefficients):
        raise NotImplementedError(
            f"{type(launch).__name__} is linear in the padded field only, not in its coefficients."
        )
    if type(cotangent) is ad.Zero:
        padded_cotangent = ad.Zero(padded.aval)
    else:
        # The symmetric stencil is its own transpose on the cotangent padded with 2w zeros.
        wide = zero_pad(cotangent, 2 * launch.width, launch.num_spatial)
        padded_cotangent = launch(wide, *coefficients)
    return [padded_cotangent, *(None for _ in coefficients)]


ad.primitive_jvps[stencil_p] = _jvp
ad.primitive_transposes[stencil_p] = _transpose
