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
    values, _ = _host_eig(matrix)
    return values


@host_eigenvalues.defjvp
def _host_eigenvalues_jvp(primals, tangents):
    # For a simple eigenvalue, d(lambda_i) = (V^-1 dA V)_ii with V the right eigenvectors;
    # the tangent is linear in dA, so reverse mode transposes it.
    (matrix,), (tangent,) = primals, tangents
    values, vectors = _host_eig(matrix)
    rotated = jnp.linalg.solve(vectors, tangent.astype(vectors.dtype) @ vectors)
    return values, jnp.diagonal(rotated, axis1=-2, axis2=-1)


def _host_eig(matrix: Array) -> tuple[Array, Array]:
    """The eigenvalues and right eigenvectors of `matrix` (batched), from NumPy."""
    dtype = jnp.complex128 if jnp.finfo(matrix.dtype).bits == 64 else jnp.complex64
    shapes = (
        jax.ShapeDtypeStruct(matrix.shape[:-1], dtype),
        jax.ShapeDtypeStruct(matrix.shape, dtype),
    )

    def numpy_eig(host_matrix):
        values, vectors = np.linalg.eig(np.asarray(host_matrix))
        return values.astype(dtype), vectors.astype(dtype)

    return jax.pure_callback(numpy_eig, shapes, matrix, vmap_method="broadcast_all")
