r"""Linear stability of explicit Runge–Kutta steps on grids (von Neumann analysis).

A method of lines $\dot u = L u$ stepped with an explicit Runge–Kutta method multiplies each
Fourier mode by $R(\Delta t\,\lambda)$, where $R$ is the method's stability polynomial and
$\lambda$ the mode's eigenvalue (the operator's *symbol*). The step is stable when
$|R(\Delta t\,\lambda)| \le 1$ for every mode. This module gives the symbols; the
stability functions of the solvers live with the other solver knowledge in
`simlab.integrate._solvers`.

The wavenumbers and the Laplacian's symbol depend on the grid only (static, NumPy); the
advection symbol takes the speeds, which may be traced parameters (`jnp`).
"""

import jax.lax as lax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

# Enough wavenumbers per axis to resolve the symbol's extremes (reached at theta = 0 or pi,
# which are always sampled) and its shape in between, without costly 3-D sample sets.
_WAVENUMBERS_PER_AXIS = {1: 257, 2: 33, 3: 13}


def as_complex(value: ArrayLike) -> Array:
    """`value` as a complex array of matching precision (an explicit cast, which strict
    dtype promotion asks for: real and complex arrays never mix implicitly)."""
    value = jnp.asarray(value)
    if jnp.iscomplexobj(value):
        return value
    if not jnp.issubdtype(value.dtype, jnp.floating):
        value = value.astype(jnp.result_type(float))  # integers to the default float
    return lax.complex(value, jnp.zeros_like(value))


def wavenumbers(ndim: int) -> list[np.ndarray]:
    r"""Dimensionless wavenumbers $\theta_i = k_i h_i \in [0, \pi]$ on a mesh, one per axis."""
    theta = np.linspace(0.0, np.pi, _WAVENUMBERS_PER_AXIS[ndim])
    return list(np.meshgrid(*([theta] * ndim), indexing="ij"))


def laplacian_symbol(spacing: tuple[float, ...], order: int, impl: str = "xla") -> np.ndarray:
    r"""Eigenvalues of the discrete Laplacian on the wavenumber mesh (real, non-positive):
    the stencil's of `order`, or $-|\mathbf k|^2$ up to the Nyquist wavenumbers $\pi / h_i$
    for Fourier derivatives (`impl="spectral"`)."""
    total = 0.0
    for theta, h in zip(wavenumbers(len(spacing)), spacing, strict=True):
        if impl == "spectral":
            total = total - (theta / h) ** 2
        elif order == 2:
            total = total + (2.0 * np.cos(theta) - 2.0) / h**2
        else:
            total = total + (-2.0 * np.cos(2 * theta) + 32.0 * np.cos(theta) - 30.0) / (12 * h**2)
    return total


def diffusion_symbol(
    coefficient: ArrayLike, spacing: tuple[float, ...], order: int, impl: str = "xla"
) -> Array:
    """`coefficient` times `laplacian_symbol`, in the coefficient's precision (strict dtype
    promotion never mixes a float32 parameter with the float64 symbol)."""
    coefficient = jnp.asarray(coefficient)
    return coefficient * jnp.asarray(laplacian_symbol(spacing, order, impl), coefficient.dtype)


def advection_symbol(
    spacing: tuple[float, ...], speeds: ArrayLike, scheme: str, impl: str = "xla"
) -> Array:
    r"""Eigenvalues of $-\mathbf v \cdot \nabla$ on the wavenumber mesh for speeds $|v_i|$
    (an array of shape `(len(spacing),)`, possibly traced): the `scheme`'s stencil, or
    $-i\,\mathbf v \cdot \mathbf k$ for Fourier derivatives (`impl="spectral"`)."""
    speeds = as_complex(speeds)
    total = jnp.zeros((), speeds.dtype)
    for axis, (theta, h) in enumerate(zip(wavenumbers(len(spacing)), spacing, strict=True)):
        if impl == "spectral":
            shape = -1j * theta / h
        elif scheme == "central":
            shape = -1j * np.sin(theta) / h
        else:
            shape = -(1.0 - np.exp(-1j * theta)) / h
        total = total + speeds[axis] * jnp.asarray(shape, speeds.dtype)
    return total
