"""LU factorisation of the stiff solvers' step matrices, on every backend.

XLA's LU decomposition on a TPU implements only float32 and complex64: a float64 solve
there stops at compile time with `UNIMPLEMENTED: Only F32 and C64 types are implemented in
LuDecomposition`. A real float64 step matrix is therefore factorised by platform: by XLA
(LAPACK on a CPU) everywhere but a TPU, and on a TPU by Gaussian elimination with partial
pivoting written in elementwise operations, which a TPU runs in float64 (emulated: on a
TPU v5e one float64 Robertson solve with Rodas5P took 740 ms, against 1.2 ms on a CPU core).
Both return LAPACK's layout of the factors (`jax.scipy.linalg.lu_factor`'s). Rodas5P's
and Radau5's step matrices and the Newton steps of a DAE's consistent initialisation are
factorised here. Complex128
matrices (Radau5's complex pair) keep XLA's LU: a TPU has no complex128 arithmetic.
"""

import jax.lax as lax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jaxtyping import Array


def lu_factor(matrix: Array) -> tuple[Array, Array]:
    """`(lu, pivots)` of a square `matrix`, as `jax.scipy.linalg.lu_factor` returns them."""
    if not _needs_elimination(matrix):
        return jsl.lu_factor(matrix)
    return lax.platform_dependent(matrix, tpu=eliminate, default=jsl.lu_factor)


def lu_solve(factors: tuple[Array, Array], b: Array) -> Array:
    """The solution `x` of `matrix @ x = b` from `lu_factor(matrix)`; `b` of shape `(n,)` or
    `(n, k)`."""
    lu, _ = factors
    if not _needs_elimination(lu):
        return jsl.lu_solve(factors, b)
    return lax.platform_dependent(factors, b, tpu=substitute, default=jsl.lu_solve)


def _needs_elimination(matrix: Array) -> bool:
    return jnp.dtype(matrix.dtype) == jnp.float64


def eliminate(matrix: Array) -> tuple[Array, Array]:
    """Gaussian elimination with partial pivoting: LAPACK's `getrf` factors (unit-lower `L`
    below the diagonal, `U` on and above it, and the row swapped with row `k` at step `k`),
    in elementwise operations and one loop over the columns."""
    n = matrix.shape[-1]
    index = jnp.arange(n)

    def column(k, carry):
        a, pivots = carry
        pivot_row = jnp.argmax(jnp.where(index >= k, jnp.abs(a[:, k]), -1.0))
        row_k, row_pivot = a[k], a[pivot_row]
        a = a.at[k].set(row_pivot).at[pivot_row].set(row_k)
        below = index > k
        multipliers = jnp.where(below, a[:, k] / a[k, k], 0.0)
        a = a - multipliers[:, None] * jnp.where(below, a[k], 0.0)[None, :]
        a = a.at[:, k].set(jnp.where(below, multipliers, a[:, k]))
        return a, pivots.at[k].set(pivot_row.astype(jnp.int32))

    return lax.fori_loop(0, n, column, (matrix, jnp.zeros(n, jnp.int32)))


def substitute(factors: tuple[Array, Array], b: Array) -> Array:
    """`lu_solve` from `eliminate`'s factors: the row swaps, then forward substitution with
    the unit-lower factor and back substitution with the upper one."""
    lu, pivots = factors
    n = lu.shape[-1]
    index = jnp.arange(n)
    b = b.astype(jnp.result_type(lu, b))

    def swap(k, x):
        x_k, x_pivot = x[k], x[pivots[k]]
        return x.at[k].set(x_pivot).at[pivots[k]].set(x_k)

    def forward(i, x):
        return x.at[i].set(x[i] - jnp.where(index < i, lu[i], 0) @ x)

    def backward(j, x):
        i = n - 1 - j
        return x.at[i].set((x[i] - jnp.where(index > i, lu[i], 0) @ x) / lu[i, i])

    x = lax.fori_loop(0, n, swap, b)
    x = lax.fori_loop(0, n, forward, x)
    return lax.fori_loop(0, n, backward, x)
