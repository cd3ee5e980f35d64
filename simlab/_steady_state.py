"""Fixed points of a model and their stability."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx
from jaxtyping import Array, ArrayLike, Complex, Float

from ._eigenvalues import eigenvalues as eigenvalues_of
from ._misc import Integer, RealNumber, as_count
from ._results import RESULTS
from ._simulate import checked_y0
from .integrate._mass import mass_matrix_of
from .models._base import AbstractModel


class STABILITY(eqx.Enumeration):
    """The linear stability of a fixed point, read from the eigenvalues $\\lambda_i$ of the
    Jacobian there. Compare with `==` (it works under `jax.jit` and `jax.vmap`)."""

    stable = "Every eigenvalue has a negative real part: small perturbations decay."
    unstable = "A real eigenvalue is positive: a saddle or an unstable node."
    oscillatory = (
        "Only complex pairs have positive real parts: an unstable focus, from which "
        "trajectories spiral out (to a limit cycle past a supercritical Hopf point)."
    )
    zero_eigenvalue = (
        "A real eigenvalue is zero: a fold or branch point, or one of a continuum of fixed "
        "points (a conservation law)."
    )
    hopf_pair = (
        "A complex pair lies on the imaginary axis, the others in the left half-plane: a "
        "Hopf point, or the centre of a conservative system."
    )
    unknown = "The root solve failed: there is no fixed point to classify."


# The names in declaration order: `STABILITY.<name>._value` indexes this tuple.
STABILITY_LABELS = (
    "stable",
    "unstable",
    "oscillatory",
    "zero_eigenvalue",
    "hopf_pair",
    "unknown",
)


class SteadyState(eqx.Module):
    r"""A fixed point $y^\ast$ of $\dot y = f(y)$ (or $M \dot y = f(y)$), from
    [`simlab.steady_state`][].

    **Attributes:**

    - `state`: $y^\ast$ (after a failed solve, the last iterate: read `result`).
    - `jacobian`: $J = \partial f / \partial y$ at `state`, shape `(n, n)`.
    - `eigenvalues`: the eigenvalues of $J$ (complex), shape `(n,)`; for a model with a
      mass matrix those of the pencil $J v = \lambda M v$, `inf` for each algebraic
      direction (where $M$ is singular).
    - `stability`: a [`simlab.STABILITY`][] code; `.label` names it.
    - `result`: a [`simlab.RESULTS`][] status; `RESULTS[s.result]` is its message.
    - `num_steps`: Newton iterations taken.
    """

    state: Float[Array, " *state"]
    jacobian: Float[Array, "n n"]
    eigenvalues: Complex[Array, " n"]
    stability: STABILITY
    result: RESULTS
    num_steps: Array

    @property
    def succeeded(self):
        """Boolean array: did the root solve converge (one value per point under `vmap`)?"""
        return self.result == RESULTS.successful

    @property
    def label(self):
        """The stability's name (`"stable"`, `"hopf_pair"`, ...), or an array of names."""
        codes = np.asarray(self.stability._value)
        return np.asarray(STABILITY_LABELS)[codes] if codes.ndim else STABILITY_LABELS[codes]


# The defaults of rtol, atol and eigenvalue_tol by the state's precision (bytes of its float).
# Newton's method stops once its step is below atol + rtol |y| and the residual below atol,
# which float32's roundoff allows only at looser values; a double eigenvalue is perturbed by
# about the square root of the machine epsilon, relative to the largest.
ROOT_DEFAULTS = {8: (1e-10, 1e-10, 1e-8), 4: (1e-5, 1e-4, 3e-4)}


def root_defaults(dtype, rtol, atol, eigenvalue_tol) -> tuple:
    """`(rtol, atol, eigenvalue_tol)`, each `None` replaced by its default for a state of
    `dtype` (`ROOT_DEFAULTS`)."""
    defaults = ROOT_DEFAULTS.get(jnp.finfo(dtype).bits // 8, ROOT_DEFAULTS[4])
    given = (rtol, atol, eigenvalue_tol)
    return tuple(
        default if value is None else value for value, default in zip(given, defaults, strict=True)
    )


def default_root_solver(rtol: RealNumber, atol: RealNumber) -> optx.AbstractRootFinder:
    """Newton's method with an SVD linear solve, so that a singular Jacobian (a line of
    fixed points, as conservation laws make) still converges, to the nearest fixed point."""
    # Python floats: a NumPy scalar tolerance would not promote with the state's dtype.
    return optx.Newton(
        rtol=float(rtol), atol=float(atol), linear_solver=lx.AutoLinearSolver(well_posed=False)
    )


def steady_state(
    model: AbstractModel,
    y_guess: ArrayLike,
    *,
    args: Any = None,
    solver: optx.AbstractRootFinder | None = None,
    rtol: RealNumber | None = None,
    atol: RealNumber | None = None,
    max_steps: Integer = 256,
    eigenvalue_tol: float | None = None,
) -> SteadyState:
    r"""Finds a fixed point $f(y^\ast) = 0$ of `model` near `y_guess`, and its stability.

    The root is found with an Optimistix root finder (Newton's method by default); the
    eigenvalues $\lambda_i$ of the Jacobian $J = \partial f/\partial y\,(y^\ast)$ decide the
    label: `stable` when every $\operatorname{Re}\lambda_i < 0$, `hopf_pair` when a complex
    pair sits on the imaginary axis, and so on (see [`simlab.STABILITY`][]). For a
    differential-algebraic model ($M \dot y = f(y)$ with a singular mass matrix) the
    fixed point solves $f(y^\ast) = 0$, algebraic equations included, and the eigenvalues
    are those of the pencil, $J v = \lambda M v$: one per differential direction, and
    `inf` for each algebraic one, which takes no part in the label. An eigenvalue
    counts as zero (or real) when its real (or imaginary) part is below
    `eigenvalue_tol` $\cdot \max(1, \max_i|\lambda_i|)$.

    The fixed point is differentiable with respect to the model's parameters $\theta$ by the
    implicit function theorem, $\partial y^\ast/\partial\theta = -J^{-1}\,\partial f/\partial
    \theta$ (Optimistix's `ImplicitAdjoint`): `jax.grad` never differentiates the Newton
    iterations.

    A solve that does not converge is reported in `result` (with `stability` `unknown`),
    never raised, so that it can run under `jax.vmap`.

    **Arguments:**

    - `model`: a [`simlab.models.AbstractModel`][] (autonomous: it is evaluated at $t = 0$).
    - `y_guess`: the starting point of the root solve, of shape `model.state_shape`.
    - `args`: passed through to `model(t, y, args)`.
    - `solver`: an Optimistix root finder; `None` takes `optx.Newton(rtol, atol)` with an
      SVD linear solve (which copes with the singular Jacobian of a conservation law).
    - `rtol`, `atol`: tolerances of the default solver (default `1e-10` for a float64
      state, `1e-5` and `1e-4` for a float32 one, as on an accelerator: Newton's method
      stops once its step is below `atol + rtol |y|` and the residual below `atol`).
    - `max_steps`: the most iterations before the solve reports failure.
    - `eigenvalue_tol`: the relative size below which a real or imaginary part counts as zero
      (default `1e-8` in float64, `3e-4` in float32, about the square root of its epsilon).

    It runs on every platform: on a TPU, which has no nonsymmetric eigensolver, the
    Jacobian's eigenvalues are computed on the host.

    **Returns:** a [`simlab.SteadyState`][] with `.state`, `.eigenvalues`, `.stability`
    (`.label`), `.result`.

    !!! example

        ```python
        model = simlab.models.LotkaVolterra(alpha=0.55, beta=0.028, gamma=0.84, delta=0.026)
        fixed_point = simlab.steady_state(model, jnp.array([30.0, 20.0]))
        fixed_point.state  # [gamma / delta, alpha / beta]
        fixed_point.label  # 'hopf_pair': a centre, eigenvalues +-i sqrt(alpha gamma)
        ```
    """
    check_model(model)
    y_guess = checked_y0(model, y_guess)
    max_steps = as_count("max_steps", max_steps)
    rtol, atol, eigenvalue_tol = root_defaults(y_guess.dtype, rtol, atol, eigenvalue_tol)
    if solver is None:
        solver = default_root_solver(rtol, atol)
    return _steady_state(model, y_guess, args, solver, max_steps, eigenvalue_tol)


@eqx.filter_jit
def _steady_state(model, y_guess, args, solver, max_steps, eigenvalue_tol) -> SteadyState:
    solution = optx.root_find(
        residual, solver, y_guess, args=(model, args), max_steps=max_steps, throw=False
    )
    state = solution.value
    size = state.size
    jacobian = jax.jacfwd(residual)(state, (model, args)).reshape(size, size)
    mass = mass_matrix_of(model, size)
    return described(
        state, jacobian, solution.result, solution.stats["num_steps"], eigenvalue_tol, mass
    )


def described(state, jacobian, result, num_steps, eigenvalue_tol, mass=None) -> SteadyState:
    """The [`SteadyState`][simlab.SteadyState] at `state`, found by a root solve that
    ended with `result`, from the Jacobian `(n, n)` there and the mass matrix (`None`:
    the identity)."""
    if mass is None:
        eigenvalues = eigenvalues_of(jacobian)
    else:
        eigenvalues = pencil_eigenvalues(jacobian, mass)
    result = RESULTS.promote(result)
    finite = jnp.all(jnp.isfinite(state)) & jnp.all(jnp.isfinite(jacobian))
    result = RESULTS.where(
        (result == RESULTS.successful) & ~finite, RESULTS.nonfinite_state, result
    )
    stability = classify(eigenvalues, eigenvalue_tol)
    stability = STABILITY.where(result == RESULTS.successful, stability, STABILITY.unknown)
    return SteadyState(
        state=state,
        jacobian=jacobian,
        eigenvalues=eigenvalues,
        stability=stability,
        result=result,
        num_steps=num_steps,
    )


# The shift of `pencil_eigenvalues`, in units of |J| / |M|: any value that is no
# eigenvalue will do, and an irrational one is none of the round ones models tend to have.
PENCIL_SHIFT = 0.5772156649015329


def pencil_eigenvalues(jacobian: Array, mass: Array) -> Array:
    r"""The eigenvalues $\lambda$ of $J v = \lambda M v$, `inf` where $M$ is singular.

    Shift and invert: $\mu = 1 / (\lambda - \sigma)$ are the eigenvalues of
    $(J - \sigma M)^{-1} M$, and each algebraic direction gives $\mu = 0$ (to
    roundoff), that is $\lambda = \infty$. JAX has no generalised eigenvalue solver;
    this needs only the eigenvalues of one matrix and one linear solve.
    """
    scale = jnp.linalg.norm(jacobian) / jnp.linalg.norm(mass)
    shift = PENCIL_SHIFT * jnp.where(scale > 0, scale, 1.0)
    inverted = jnp.linalg.solve(jacobian - shift * mass, mass)
    mu = eigenvalues_of(inverted)
    roundoff = 100 * mass.shape[0] * jnp.finfo(inverted.dtype).eps * jnp.linalg.norm(inverted)
    infinite = jnp.abs(mu) <= roundoff
    finite = shift.astype(mu.dtype) + 1 / jnp.where(infinite, 1, mu)
    return jnp.where(infinite, jnp.inf, finite)


def residual(y, model_and_args):
    """$f(y)$ of an autonomous model: the function whose root is a fixed point."""
    model, args = model_and_args
    return model(0.0, y, args)


def eigenvalue_kinds(eigenvalues, eigenvalue_tol: float):
    """Which eigenvalues (along the last axis) are complex, have a positive real part, and
    lie on the imaginary axis, to `eigenvalue_tol` times the largest finite modulus (or 1).
    An infinite eigenvalue (an algebraic direction of a DAE) is none of these."""
    finite = jnp.isfinite(eigenvalues)
    modulus = jnp.where(finite, jnp.abs(eigenvalues), 0.0)
    largest = jnp.max(modulus, axis=-1, keepdims=True)
    tol = eigenvalue_tol * jnp.maximum(1.0, largest)
    real, imag = jnp.real(eigenvalues), jnp.abs(jnp.imag(eigenvalues))
    return finite & (imag > tol), finite & (real > tol), finite & (jnp.abs(real) <= tol)


def classify(eigenvalues: Array, eigenvalue_tol: float) -> STABILITY:
    """The [`STABILITY`][simlab.STABILITY] of a fixed point with these Jacobian eigenvalues."""
    is_complex, positive, on_axis = eigenvalue_kinds(eigenvalues, eigenvalue_tol)
    label = STABILITY.stable
    label = STABILITY.where(jnp.any(on_axis & is_complex), STABILITY.hopf_pair, label)
    label = STABILITY.where(jnp.any(on_axis & ~is_complex), STABILITY.zero_eigenvalue, label)
    label = STABILITY.where(jnp.any(positive & is_complex), STABILITY.oscillatory, label)
    return STABILITY.where(jnp.any(positive & ~is_complex), STABILITY.unstable, label)


def check_model(model) -> None:
    if not isinstance(model, AbstractModel):
        raise TypeError(
            "steady_state needs a simlab.models.AbstractModel (an autonomous vector field "
            f"with named state); got {type(model).__name__}."
        )
