"""Eigenvalues of a general real square matrix on every platform.

XLA's nonsymmetric eigensolver (`jnp.linalg.eigvals`) lowers for a CPU and a GPU, not a TPU
("MLIR translation rule for primitive 'eig' not found for platform tpu"). On a TPU the
matrices go to the host, where NumPy (LAPACK's `geev`) takes them: a fixed point's Jacobian
is small, and its stability is read once per point, not once per step.
"""

import jax
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, Float


def eigenvalues(matrix: Float[Array, "*batch n n"]) -> Complex[Array, "*batch n"]:
    """The eigenvalues of `matrix` (complex, in no particular order), differentiable."""
    return lax.platform_dependent(matrix, tpu=host_eigenvalues, default=jnp.linalg.eigvals)


@jax.custom_jvp
def host_eigenvalues(matrix: Float[Array, "*batch n n"]) -> Complex[Array, "*batch n"]:
    """`jnp.linalg.eigvals` computed by NumPy on the host."""
    values, _, _ = _host_eig(matrix)
    return values


@host_eigenvalues.defjvp
def _host_eigenvalues_jvp(primals, tangents):
    # For a simple eigenvalue, d(lambda_i) = (V^-1 dA V)_ii with V the right eigenvectors:
    # linear in dA, so reverse mode transposes it. V^-1 comes from the host too, and the
    # contraction asks for full precision, which a TPU's matrix unit otherwise rounds to
    # bfloat16 passes (a 1e-3 relative error in the derivative).
    (matrix,), (tangent,) = primals, tangents
    values, vectors, inverse = _host_eig(matrix)
    derivative = jnp.einsum(
        "...ij,...jk,...ki->...i",
        inverse,
        tangent.astype(vectors.dtype),
        vectors,
        precision=lax.Precision.HIGHEST,
    )
    return values, derivative


def _host_eig(matrix: Array) -> tuple[Array, Array, Array]:
    """The eigenvalues, the right eigenvectors and their inverse, of `matrix` (batched),
    from NumPy."""
    dtype = jnp.complex128 if jnp.finfo(matrix.dtype).bits == 64 else jnp.complex64
    shapes = (
        jax.ShapeDtypeStruct(matrix.shape[:-1], dtype),
        jax.ShapeDtypeStruct(matrix.shape, dtype),
        jax.ShapeDtypeStruct(matrix.shape, dtype),
    )

    def numpy_eig(host_matrix):
        values, vectors = np.linalg.eig(np.asarray(host_matrix, np.float64))
        inverse = np.linalg.inv(vectors)
        return values.astype(dtype), vectors.astype(dtype), inverse.astype(dtype)

    return jax.pure_callback(numpy_eig, shapes, matrix, vmap_method="broadcast_all")
