r"""Linear stability of explicit Runge–Kutta steps on grids (von Neumann analysis).

A method of lines $\dot u = L u$ stepped with an explicit Runge–Kutta method multiplies each
Fourier mode by $R(\Delta t\,\lambda)$, where $R$ is the method's stability polynomial and
$\lambda$ the mode's eigenvalue (the operator's *symbol*). The step is stable when
$|R(\Delta t\,\lambda)| \le 1$ for every mode.
"""

from collections.abc import Callable

import diffrax as dfx
import numpy as np

# Enough wavenumbers per axis to resolve the symbol's extremes (reached at theta = 0 or pi,
# which are always sampled) and its shape in between, without costly 3-D sample sets.
_WAVENUMBERS_PER_AXIS = {1: 257, 2: 33, 3: 13}
_SCAN_POINTS = 400
_LARGEST_SCALED_STEP = 20.0  # every explicit method's stability region lies inside |z| < 20
_TOLERANCE = 1e-9


def stability_function(solver: dfx.AbstractSolver) -> Callable[[np.ndarray], np.ndarray] | None:
    r"""The stability function $R(z) = 1 + z\, b^\top (I - zA)^{-1} \mathbf 1$ of an explicit
    Runge–Kutta `solver`, or `None` when it is implicit or not a Runge–Kutta method."""
    if isinstance(solver, dfx.Euler):
        return lambda z: 1.0 + z
    if not isinstance(solver, dfx.AbstractERK):
        return None
    tableau = solver.tableau
    num_stages = len(tableau.b_sol)
    matrix = np.zeros((num_stages, num_stages))
    for row, coefficients in enumerate(tableau.a_lower, start=1):
        matrix[row, : len(coefficients)] = coefficients
    weights = np.asarray(tableau.b_sol, dtype=float)

    def evaluate(z: np.ndarray) -> np.ndarray:
        # A is strictly lower triangular, so (I - zA)^{-1} 1 is a forward substitution.
        z = np.asarray(z, dtype=complex)
        stages = np.empty((num_stages, *z.shape), dtype=complex)
        for i in range(num_stages):
            stages[i] = 1.0 + z * np.tensordot(matrix[i, :i], stages[:i], axes=1)
        return 1.0 + z * np.tensordot(weights, stages, axes=1)

    return evaluate


def largest_stable_step(solver: dfx.AbstractSolver, eigenvalues: np.ndarray) -> float | None:
    """The largest $\\Delta t$ with $|R(\\Delta t\\,\\lambda)| \\le 1$ for all `eigenvalues`.

    Returns `None` when `solver` has no known stability polynomial (implicit solvers: no
    limit is imposed) or every eigenvalue is zero, and `0.0` when no step is stable (e.g.
    forward Euler on purely imaginary eigenvalues).
    """
    stability = stability_function(solver)
    eigenvalues = np.asarray(eigenvalues, dtype=complex).ravel()
    spectral_radius = float(np.max(np.abs(eigenvalues), initial=0.0))
    if stability is None or spectral_radius == 0.0:
        return None

    def stable(step: float) -> bool:
        return bool(np.all(np.abs(stability(step * eigenvalues)) <= 1.0 + _TOLERANCE))

    steps = np.linspace(0.0, _LARGEST_SCALED_STEP / spectral_radius, _SCAN_POINTS + 1)[1:]
    stable_below, unstable_above = 0.0, None
    for step in steps:  # scan first: a stability region need not be convex
        if not stable(step):
            unstable_above = step
            break
        stable_below = step
    if unstable_above is None:
        return stable_below
    if stable_below == 0.0:
        # Unstable already at a twentieth of a step per unit spectral radius: only a sliver
        # of the region, if any, covers these eigenvalues, so no useful step is stable.
        return 0.0
    for _ in range(40):
        middle = 0.5 * (stable_below + unstable_above)
        stable_below, unstable_above = (
            (middle, unstable_above) if stable(middle) else (stable_below, middle)
        )
    return stable_below


def wavenumbers(ndim: int) -> list[np.ndarray]:
    r"""Dimensionless wavenumbers $\theta_i = k_i h_i \in [0, \pi]$ on a mesh, one per axis."""
    theta = np.linspace(0.0, np.pi, _WAVENUMBERS_PER_AXIS[ndim])
    return list(np.meshgrid(*([theta] * ndim), indexing="ij"))


def laplacian_symbol(spacing: tuple[float, ...], order: int) -> np.ndarray:
    """Eigenvalues of the discrete Laplacian on the wavenumber mesh (real, non-positive)."""
    total = 0.0
    for theta, h in zip(wavenumbers(len(spacing)), spacing, strict=True):
        if order == 2:
            total = total + (2.0 * np.cos(theta) - 2.0) / h**2
        else:
            total = total + (-2.0 * np.cos(2 * theta) + 32.0 * np.cos(theta) - 30.0) / (12 * h**2)
    return total


def advection_symbol(spacing: tuple[float, ...], speeds: np.ndarray, scheme: str) -> np.ndarray:
    r"""Eigenvalues of $-\mathbf v \cdot \nabla$ on the wavenumber mesh for speeds $|v_i|$."""
    total = 0.0
    for theta, h, speed in zip(wavenumbers(len(spacing)), spacing, speeds, strict=True):
        if scheme == "central":
            total = total - 1j * speed * np.sin(theta) / h
        else:
            total = total - speed * (1.0 - np.exp(-1j * theta)) / h
    return total
