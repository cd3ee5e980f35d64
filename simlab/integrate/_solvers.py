r"""What simlab knows about each solver: its name, order, error estimate, stability, kind.

Every other module asks here: `simulate` to resolve a name and pick the integrator, the
lean loop for the Butcher tableau, grid models for the stability function of an explicit
step, and `fit`, `sweep` and experiment files for the names they accept.

The integrators of `simlab.integrate.INTEGRATORS` run them: the lean loop every explicit
Runge–Kutta method (a *lean* solver), the stiff loop the Rosenbrock and Radau methods,
the exponential and IMEX integrators ETDRK4 and KenCarp, the symplectic integrator the
splitting methods for Hamiltonian models, and Diffrax the rest.
"""

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx
from jaxtyping import Array, ArrayLike

from ..grid._stability import as_complex
from ._exponential import ETDRK4
from ._langevin import BAOAB
from ._sde import SRA1, AbstractStochasticSolver, EulerMaruyama, Milstein, SPaRK
from ._stiff import AbstractStiffSolver, Radau5, Rodas5P
from ._symplectic import ForestRuth, McLachlan4, SymplecticEuler, Verlet, Yoshida6

_rk4_tableau = dfx.ButcherTableau(
    c=np.array([0.5, 0.5, 1.0]),
    b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
    b_error=np.zeros(4),
    a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
)


class RK4(dfx.AbstractERK):
    """The classical fourth-order Runge–Kutta method, for fixed steps only.

    It has no embedded error estimate, so `simulate` refuses it with `adaptive=True`.
    Dense output (for save times between steps) is third-order Hermite interpolation.
    """

    tableau: ClassVar[dfx.ButcherTableau] = _rk4_tableau
    interpolation_cls: ClassVar[Callable[..., dfx.ThirdOrderHermitePolynomialInterpolation]] = (
        dfx.ThirdOrderHermitePolynomialInterpolation.from_k
    )

    def order(self, terms):
        return 4


# Forward Euler as a first-same-as-last tableau: its second stage, f at the new state, is the
# next step's first, so each step costs one evaluation and the lean loop can run it.
_euler_tableau = dfx.ButcherTableau(
    c=np.array([1.0]),
    b_sol=np.array([1.0, 0.0]),
    b_error=np.zeros(2),
    a_lower=(np.array([1.0]),),
)


class Euler(dfx.AbstractERK):
    """Forward Euler, $y_{n+1} = y_n + h f(t_n, y_n)$, for fixed steps only.

    The same method as `diffrax.Euler`, written as a Runge–Kutta tableau so that the lean
    loop runs it. Dense output is third-order Hermite interpolation.
    """

    tableau: ClassVar[dfx.ButcherTableau] = _euler_tableau
    interpolation_cls: ClassVar[Callable[..., dfx.ThirdOrderHermitePolynomialInterpolation]] = (
        dfx.ThirdOrderHermitePolynomialInterpolation.from_k
    )

    def order(self, terms):
        return 1


@dataclasses.dataclass(frozen=True)
class SolverSpec:
    """One solver as simlab sees it: the name `simulate(solver=...)` accepts and what
    builds it. What it is (orders, error estimate, implicitness) is read off the solver
    itself (`solution_order`, `error_order`, `is_implicit`), so it is stated once."""

    name: str
    build: Callable[..., Any]

    @functools.cached_property
    def order(self) -> int | float:
        """The order of the solution (`solution_order`; the strong order of an SDE method)."""
        return solution_order(self.build())

    @functools.cached_property
    def error_order(self) -> int | float | None:
        """The local order of the error estimate (`error_order`); `None` without one."""
        return error_order(self.build())

    @property
    def adaptive(self) -> bool:
        """Whether it carries an error estimate (needed for adaptive steps)."""
        return self.error_order is not None

    @functools.cached_property
    def implicit(self) -> bool:
        """Whether each step solves a (non)linear system (stiff problems)."""
        return is_implicit(self.build())


SOLVERS: dict[str, SolverSpec] = {
    spec.name: spec
    for spec in (
        SolverSpec("euler", Euler),
        SolverSpec("heun", dfx.Heun),
        SolverSpec("midpoint", dfx.Midpoint),
        SolverSpec("ralston", dfx.Ralston),
        SolverSpec("bosh3", dfx.Bosh3),
        SolverSpec("rk4", RK4),
        SolverSpec("tsit5", dfx.Tsit5),
        SolverSpec("dopri5", dfx.Dopri5),
        SolverSpec("dopri8", dfx.Dopri8),
        SolverSpec("implicit_euler", dfx.ImplicitEuler),
        SolverSpec("kvaerno3", dfx.Kvaerno3),
        SolverSpec("kvaerno4", dfx.Kvaerno4),
        SolverSpec("kvaerno5", dfx.Kvaerno5),
        SolverSpec("rodas5p", Rodas5P),
        SolverSpec("radau5", Radau5),
        SolverSpec("kencarp3", dfx.KenCarp3),
        SolverSpec("kencarp4", dfx.KenCarp4),
        SolverSpec("kencarp5", dfx.KenCarp5),
        SolverSpec("etdrk4", ETDRK4),
        SolverSpec("euler_maruyama", EulerMaruyama),
        SolverSpec("milstein", Milstein),
        SolverSpec("sra1", SRA1),
        SolverSpec("baoab", BAOAB),
        SolverSpec("spark", SPaRK),
        SolverSpec("symplectic_euler", SymplecticEuler),
        SolverSpec("verlet", Verlet),
        SolverSpec("forest_ruth", ForestRuth),
        SolverSpec("mclachlan4", McLachlan4),
        SolverSpec("yoshida6", Yoshida6),
    )
}


DEFAULT_SOLVER = "tsit5"
DEFAULT_STIFF_SOLVER = "rodas5p"
# Above this many state components a dense Jacobian and its LU cost more than Krylov
# solves with Jacobian-vector products: stiff defaults turn matrix-free.
DENSE_JACOBIAN_LIMIT = 256

ADJOINTS: dict[str, Callable[[], dfx.AbstractAdjoint]] = {
    "checkpoint": dfx.RecursiveCheckpointAdjoint,
    "forward": dfx.ForwardMode,
    "direct": dfx.DirectAdjoint,
    "backsolve": dfx.BacksolveAdjoint,
}
# Adjoints that only simlab's own loops run: Diffrax 0.7 has no counterpart.
REVERSIBLE_ADJOINT = "reversible"  # the symmetric symplectic solvers, states rebuilt backwards
ADJOINT_NAMES = (*ADJOINTS, REVERSIBLE_ADJOINT)


def resolve_solver(
    solver: Any, *, stiff: bool, state_size: int, rtol: Any = 1e-6, atol: Any = 1e-9
) -> Any:
    """The solver object for `simulate(solver=...)`: a name, an instance, or `None`.

    A KenCarp IMEX method given by name gets matrix-free Newton–GMRES at the solve's
    tolerances `rtol`, `atol` (`imex_solver`).

    `None` picks from static information: Tsit5 for a model that is not `stiff`; for a
    stiff one Rodas5P (dense Jacobian, one LU per step) up to `DENSE_JACOBIAN_LIMIT` state
    components, and above it Kvaerno5 with matrix-free Newton–GMRES (`implicit_solver`).
    """
    if solver is None:
        if not stiff:
            return SOLVERS[DEFAULT_SOLVER].build()
        if state_size > DENSE_JACOBIAN_LIMIT:
            return implicit_solver()
        return SOLVERS[DEFAULT_STIFF_SOLVER].build()
    if isinstance(solver, str) and solver.lower() in IMEX_METHODS:
        known = all(isinstance(value, int | float) for value in (rtol, atol))
        tolerances = dict(rtol=rtol, atol=atol) if known else dict(rtol=1e-6, atol=1e-9)
        return imex_solver(solver.lower(), **tolerances)
    if isinstance(solver, str) and solver.lower() in SOLVERS:
        return SOLVERS[solver.lower()].build()
    if isinstance(solver, str):
        raise ValueError(f"unknown solver {solver!r}; use one of {sorted(SOLVERS)}.")
    return solver  # an instance: the integrators' registry says whether one runs it


def solver_name(solver: Any) -> str:
    """The registry name of `solver`, or its class name for a solver not in the registry."""
    class_name = type(solver).__name__
    for spec in SOLVERS.values():
        if type(solver) is spec.build or spec.name.replace("_", "") == class_name.lower():
            return spec.name
    return class_name


def is_lean_solver(solver: Any) -> bool:
    """Whether the lean loop can run `solver`: any explicit Runge–Kutta tableau."""
    return isinstance(solver, dfx.AbstractERK) and not solver.tableau.implicit


def is_stiff_solver(solver: Any) -> bool:
    """Whether simlab's stiff loop runs `solver` (Rodas5P, Radau5)."""
    return isinstance(solver, AbstractStiffSolver)


def is_exponential_solver(solver: Any) -> bool:
    """Whether `solver` is the exponential integrator ETDRK4 (split models, periodic grids)."""
    return isinstance(solver, ETDRK4)


def is_imex_solver(solver: Any) -> bool:
    """Whether `solver` is a KenCarp IMEX method (run on the split of a split model)."""
    return isinstance(solver, dfx.KenCarp3 | dfx.KenCarp4 | dfx.KenCarp5)


def is_stochastic_solver(solver: Any) -> bool:
    """Whether `solver` is one of simlab's methods for SDEs (fixed or adaptive steps)."""
    return isinstance(solver, AbstractStochasticSolver)


def has_error_estimate(solver: Any) -> bool:
    """Whether `solver` carries an embedded error estimate (needed for adaptive steps)."""
    if is_stiff_solver(solver) or is_imex_solver(solver):
        return True
    if is_stochastic_solver(solver):
        return solver.adaptive_steps
    if isinstance(solver, dfx.AbstractRungeKutta):
        return bool(np.any(np.asarray(solver.tableau.b_error) != 0))
    return isinstance(solver, dfx.AbstractAdaptiveSolver)


def is_implicit(solver: Any) -> bool:
    """Whether each step of `solver` solves a (non)linear system."""
    return is_stiff_solver(solver) or isinstance(solver, dfx.AbstractImplicitSolver)


_ODE_TERM = dfx.ODETerm(lambda t, y, args: y)


def solution_order(solver: Any) -> int | float:
    """The order $p$ of `solver`'s solution: its global error falls as $h^p$. Diffrax solvers
    state it as `order(terms)`, simlab's own (Rodas5P, Radau5, ETDRK4) as `order`, and the
    stochastic ones their strong order (error against the exact path)."""
    if isinstance(solver, dfx.AbstractSolver):
        return solver.order(_ODE_TERM)
    return solver.order


def error_order(solver: Any) -> int | float | None:
    r"""The local order $q$ of `solver`'s error estimate, $\text{err} \propto h^q$: the
    step-size controller scales the step by $\text{err}^{-1/q}$. `None` for a solver
    without an estimate (fixed steps only). For Diffrax solvers $q = p + 1$, the rule of
    Diffrax's own controller for ODEs; simlab's stiff solvers and SPaRK state theirs."""
    if not has_error_estimate(solver):
        return None
    if isinstance(solver, dfx.AbstractSolver):
        return solution_order(solver) + 1
    return solver.error_order


def resolve_adjoint(adjoint: Any) -> dfx.AbstractAdjoint:
    """The Diffrax adjoint for `simulate(adjoint=...)` (`None`: checkpointed reverse mode)."""
    if adjoint is None:
        return dfx.RecursiveCheckpointAdjoint()
    if isinstance(adjoint, dfx.AbstractAdjoint):
        return adjoint
    if isinstance(adjoint, str) and adjoint in ADJOINTS:
        return ADJOINTS[adjoint]()
    if adjoint == REVERSIBLE_ADJOINT:
        raise ValueError(
            "adjoint='reversible' runs on the symmetric symplectic solvers only ('verlet', "
            "'forest_ruth', 'yoshida6', with adaptive=False); pass adjoint=None here."
        )
    raise ValueError(
        f"unknown adjoint {adjoint!r}; use one of {sorted(ADJOINT_NAMES)} or a diffrax adjoint "
        "instance."
    )


def stability_function(solver: Any) -> Callable[[Array], Array] | None:
    r"""The stability function $R(z) = 1 + z\, b^\top (I - zA)^{-1} \mathbf 1$ of an explicit
    Runge–Kutta `solver`, or `None` when it is implicit or not a Runge–Kutta method.

    $R$ is evaluated with `jnp` on complex arrays `z` (traced or not); the tableau is static.
    """
    if isinstance(solver, dfx.Euler):
        return lambda z: 1.0 + z
    if not is_lean_solver(solver):
        return None
    tableau = solver.tableau
    rows = [()] + [tuple(float(a) for a in row) for row in tableau.a_lower]
    weights = tuple(float(b) for b in tableau.b_sol)

    def combination(coefficients: Sequence[float], stages: list[Array]) -> Array:
        terms = [c * stage for c, stage in zip(coefficients, stages, strict=False) if c != 0]
        return sum(terms[1:], terms[0]) if terms else jnp.zeros_like(stages[0])

    def evaluate(z: Array) -> Array:
        # A is strictly lower triangular, so (I - zA)^{-1} 1 is a forward substitution.
        stages = [jnp.ones_like(z)]
        for coefficients in rows[1:]:
            stages.append(1.0 + z * combination(coefficients, stages))
        return 1.0 + z * combination(weights, stages)

    return evaluate


_SCAN_POINTS = 400
_BISECTIONS = 40
_LARGEST_SCALED_STEP = 20.0  # every explicit method's stability region lies inside |z| < 20
_STABILITY_TOLERANCE = 1e-9


def largest_stable_step(solver: Any, eigenvalues: ArrayLike) -> Array | None:
    r"""The largest $\Delta t$ with $|R(\Delta t\,\lambda)| \le 1$ for all `eigenvalues`.

    A `jnp` computation, so `eigenvalues` may come from traced parameters (under `jax.jit`,
    `jax.vmap`, `jax.grad`): steps $\Delta t = \tfrac{i}{400} \cdot 20 / \max|\lambda|$ are
    scanned up to the first unstable one (a stability region need not be convex), then the
    edge is bisected. The limit is a threshold, not a differentiable quantity: no gradient
    flows through it.

    **Returns:** `None` when `solver` has no known stability polynomial (implicit solvers: no
    limit is imposed, a static decision); otherwise a scalar array: `inf` when every
    eigenvalue is zero, and `0.0` when no step is stable (e.g. forward Euler on purely
    imaginary eigenvalues).
    """
    if stability_function(solver) is None:
        return None
    return _largest_stable_step(solver, jax.lax.stop_gradient(jnp.asarray(eigenvalues)))


@eqx.filter_jit  # one compilation per solver and eigenvalue shape, also under an outer jit
def _largest_stable_step(solver: Any, eigenvalues: Array) -> Array:
    stability = stability_function(solver)
    eigenvalues = as_complex(jnp.ravel(eigenvalues))
    complex_dtype = eigenvalues.dtype
    real_dtype = jnp.real(eigenvalues).dtype
    spectral_radius = jnp.max(jnp.abs(eigenvalues))
    nonzero = spectral_radius > 0
    increment = _LARGEST_SCALED_STEP / _SCAN_POINTS / jnp.where(nonzero, spectral_radius, 1.0)

    def stable(step: Array) -> Array:
        growth = jnp.abs(stability(step.astype(complex_dtype) * eigenvalues))
        return jnp.all(growth <= 1.0 + _STABILITY_TOLERANCE)

    def scanning(index: Array) -> Array:
        return (index <= _SCAN_POINTS) & stable(jnp.asarray(index, real_dtype) * increment)

    first_unstable = jax.lax.while_loop(scanning, lambda index: index + 1, jnp.asarray(1))
    stable_below = jnp.asarray(first_unstable - 1, real_dtype) * increment
    unstable_above = jnp.asarray(first_unstable, real_dtype) * increment

    def bisect(_, bracket):
        below, above = bracket
        middle = 0.5 * (below + above)
        middle_stable = stable(middle)
        return jnp.where(middle_stable, middle, below), jnp.where(middle_stable, above, middle)

    edge, _ = jax.lax.fori_loop(0, _BISECTIONS, bisect, (stable_below, unstable_above))
    # Stable over the whole scan: the last step scanned. Unstable already at a twentieth
    # of a step per unit spectral radius: only a sliver of the region, if any, covers these
    # eigenvalues, so no useful step is stable.
    limit = jnp.where(first_unstable > _SCAN_POINTS, stable_below, edge)
    limit = jnp.where(first_unstable == 1, 0.0, limit)
    return jnp.where(nonzero, limit, jnp.inf)


IMPLICIT_METHODS = ("implicit_euler", "kvaerno3", "kvaerno4", "kvaerno5")
IMEX_METHODS = ("kencarp3", "kencarp4", "kencarp5")


def _newton_gmres(rtol: Any, atol: Any) -> optx.Newton:
    # Newton rather than diffrax's default chord method: the chord method stores a factorised
    # Jacobian, which an iterative solver does not have (and would otherwise materialise).
    linear_solver = lx.GMRES(rtol=rtol / 100, atol=atol / 100, restart=40, stagnation_iters=40)
    return optx.Newton(rtol=rtol, atol=atol, linear_solver=linear_solver)


def implicit_solver(
    method: str = "kvaerno5", *, rtol: float = 1e-6, atol: float = 1e-9
) -> dfx.AbstractSolver:
    r"""An implicit solver for stiff diffusion on large grids, whose Newton iterations solve
    their linear systems matrix-free by GMRES (Jacobian–vector products only), so no
    $N \times N$ Jacobian is ever formed and the step is not bound by the diffusion number.

    **Arguments:**

    - `method`: `"kvaerno5"` (default), `"kvaerno4"`, `"kvaerno3"` (adaptive, A-stable
      ESDIRK) or `"implicit_euler"` (first order, L-stable, cheapest to compile).
    - `rtol`, `atol`: tolerances of the Newton iteration (GMRES solves 100× tighter);
      match them to the step-size controller's (`simulate`'s `rtol`, `atol`).

    **Returns:** a Diffrax solver to pass as `simulate(..., solver=...)`.

    !!! example

        ```python
        solver = simlab.models.implicit_solver(rtol=1e-6, atol=1e-8)
        trajectory = simlab.simulate(model, y0, ts, solver=solver, rtol=1e-6, atol=1e-8)
        ```
    """
    if method not in IMPLICIT_METHODS:
        raise ValueError(f"method must be one of {sorted(IMPLICIT_METHODS)}; got {method!r}.")
    return SOLVERS[method].build(root_finder=_newton_gmres(rtol, atol))


def imex_solver(method: str = "kencarp4", *, rtol: Any, atol: Any) -> dfx.AbstractSolver:
    r"""A KenCarp IMEX solver (for split models) whose implicit stages are solved by
    matrix-free Newton–GMRES; `simulate(solver="kencarp4")` builds one at its tolerances.

    **Arguments:**

    - `method`: `"kencarp3"`, `"kencarp4"` or `"kencarp5"` (orders 3, 4, 5; adaptive).
    - `rtol`, `atol`: tolerances of the Newton iteration (GMRES solves 100× tighter);
      match them to the step-size controller's.

    **Returns:** a Diffrax solver for `MultiTerm(explicit_term, implicit_term)`.
    """
    if method not in IMEX_METHODS:
        raise ValueError(f"IMEX method must be one of {sorted(IMEX_METHODS)}; got {method!r}.")
    return SOLVERS[method].build(root_finder=_newton_gmres(rtol, atol))
