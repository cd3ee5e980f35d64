"""Rodas5P: a stiffly accurate Rosenbrock method of order 5 with an embedded order-4 error
estimate and a dense output of order 4 (Steinebach 2023)."""

from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
from jaxtyping import Array

from ..._results import RESULTS
from ._loop import AbstractStiffSolver, Attempt, Tolerances, controller_factor, rms_norm
from ._lu import lu_factor, lu_solve

# Coefficients of Rodas5P in the W-transformed form (Hairer–Wanner, Solving ODEs II, IV.7:
# stage increments k_i solve (M/(h*gamma) - J) k_i = f(t + c_i h, y + sum_j a_ij k_j)
# + M sum_j (C_ij / h) k_j + h d_i df/dt, with M = I for an ODE; VI.4 for the mass matrix).
# Values from G. Steinebach, "Construction of Rosenbrock-Wanner method Rodas5P and numerical
# benchmarks within the Julia Differential Equations package", BIT Numer. Math. 63 (2023), as
# tabulated in OrdinaryDiffEq.jl (OrdinaryDiffEqRosenbrock, `Rodas5PTableau`), including the
# dense-output matrix H.
GAMMA = 0.21193756319429014
A = np.zeros((8, 8))
A[1, :1] = [3.0]
A[2, :2] = [2.849394379747939, 0.45842242204463923]
A[3, :3] = [-6.954028509809101, 2.489845061869568, -10.358996098473584]
A[4, :4] = [2.8029986275628964, 0.5072464736228206, -0.3988312541770524, -0.04721187230404641]
A[5, :5] = [
    -7.502846399306121,
    2.561846144803919,
    -11.627539656261098,
    -0.18268767659942256,
    0.030198172008377946,
]
# Stages 7 and 8 evaluate at y + sum_{j<6} a_6j k_j + k_6 (+ k_7): the method is stiffly
# accurate, so the new state is the last stage plus its increment.
A[6, :6] = [*A[5, :5], 1.0]
A[7, :7] = [*A[5, :5], 1.0, 1.0]
C = np.zeros((8, 8))
C[1, :1] = [-14.155112264123755]
C[2, :2] = [-17.97296035885952, -2.859693295451294]
C[3, :3] = [147.12150275711716, -1.41221402718213, 71.68940251302358]
C[4, :4] = [165.43517024871676, -0.4592823456491126, 42.90938336958603, -5.961986721573306]
C[5, :5] = [
    24.854864614690072,
    -3.0009227002832186,
    47.4931110020768,
    5.5814197821558125,
    -0.6610691825249471,
]
C[6, :6] = [
    30.91273214028599,
    -3.1208243349937974,
    77.79954646070892,
    34.28646028294783,
    -19.097331116725623,
    -28.087943162872662,
]
C[7, :7] = [
    37.80277123390563,
    -3.2571969029072276,
    112.26918849496327,
    66.9347231244047,
    -40.06618937091002,
    -54.66780262877968,
    -9.48861652309627,
]
NODES = np.array([0.0, 0.6358126895828704, 0.4095798393397535, 0.9769306725060716,
                  0.4288403609558664, 1.0, 1.0, 1.0])  # fmt: skip
D = np.array([0.21193756319429014, -0.42387512638858027, -0.3384627126235924,
              1.8046452872882734, 2.325825639765069, 0.0, 0.0, 0.0])  # fmt: skip
H = np.array(
    [
        [25.948786856663858, -2.5579724845846235, 10.433815404888879, -2.3679251022685204,
         0.524948541321073, 1.1241088310450404, 0.4272876194431874, -0.17202221070155493],
        [-9.91568850695171, -0.9689944594115154, 3.0438037242978453, -24.495224566215796,
         20.176138334709044, 15.98066361424651, -6.789040303419874, -6.710236069923372],
        [11.419903575922262, 2.8879645146136994, 72.92137995996029, 80.12511834622643,
         -52.072871366152654, -59.78993625266729, -0.15582684282751913, 4.883087185713722],
    ]
)  # fmt: skip


class _RodasState(eqx.Module):
    accepted_before: Array
    rejected_last: Array
    h_accepted: Array
    err_accepted: Array
    num_jacobians: Array
    num_lu: Array


def lu_or_status(matrix: Array) -> tuple[Any, Array]:
    """LU factors of `matrix` and whether they are usable (finite, no zero pivot)."""
    lu, piv = lu_factor(matrix)
    pivots = jnp.diagonal(lu)
    ok = jnp.all(jnp.isfinite(lu)) & jnp.all(pivots != 0)
    return (lu, piv), ok


class Rodas5P(AbstractStiffSolver):
    r"""Rodas5P, Steinebach's stiffly accurate Rosenbrock method of order 5.

    Each step computes the Jacobian $J = \partial f/\partial y$ (by `jax.jacfwd`) and the
    time derivative $\partial f/\partial t$ (by `jax.jvp`), factorises
    $M/(h\gamma) - J$ once, and solves eight linear systems

    $$\Big(\tfrac{1}{h\gamma} M - J\Big) k_i = f\Big(t + c_i h,\ y + \sum_{j<i} a_{ij} k_j\Big)
      + M \sum_{j<i} \frac{C_{ij}}{h} k_j + h\, d_i\, \frac{\partial f}{\partial t},$$

    with $M = I$ for an ODE and a constant, possibly singular, mass matrix for
    $M y' = f(t, y)$ (Hairer–Wanner, Solving ODEs II, VI.4): the method is stiffly
    accurate, so it solves index-1 differential-algebraic equations to full order.

    The new state is $y + \sum_{j<6} a_{6j} k_j + k_6 + k_7 + k_8$ and $k_8$ is the embedded
    error estimate (order 4). A dense output of order 4 fills the save times, which
    adaptive steps pass over rather than land on (fixed steps land on them). Steps follow
    Gustafsson's predictive controller.
    A singular or non-finite iteration matrix stops the solve with
    `RESULTS.singular_jacobian`.

    **Arguments:**

    - `linear_solver`: `None` (the default) forms $J$ by `jax.jacfwd` and solves by one LU
      factorisation per step; a Lineax iterative solver such as
      `lineax.GMRES(rtol=1e-10, atol=1e-14)` makes the step matrix-free: $J$ is never
      formed, each stage solves with Jacobian-vector products (`jax.linearize`, one
      linearisation per step), so memory is $O(n)$ and grid models of $10^4$–$10^5$
      unknowns fit. Solve the stages well below the step tolerance: Rodas5P is not a
      W-method and inexact stages lower its order. A Krylov solve that fails rejects the
      step and halves it (with fixed steps it stops the solve with the solver's status).

    !!! example

        ```python
        ys, result, stats = simlab.integrate.Rodas5P().solve(
            lambda t, y: -1e4 * (y - jnp.cos(t)), jnp.linspace(0, 1, 11), jnp.array([0.0]),
            rtol=1e-8, atol=1e-10,
        )
        ```
    """

    linear_solver: lx.AbstractLinearSolver | None = None
    order: ClassVar[int] = 5
    error_order: ClassVar[int] = 5  # the embedded order-4 solution's local error

    def init(self, vector_field, t0, y0, tols: Tolerances, mass=None):
        del vector_field, y0, tols, mass
        dtype = jnp.result_type(t0)
        zero = jnp.array(0, dtype=jnp.int32)
        return _RodasState(
            accepted_before=jnp.array(False),
            rejected_last=jnp.array(False),
            h_accepted=jnp.array(1.0, dtype),
            err_accepted=jnp.array(1.0, dtype),
            num_jacobians=zero,
            num_lu=zero,
        )

    def counters(self, state):
        return dict(num_jacobians=state.num_jacobians, num_lu=state.num_lu)

    def attempt(self, vector_field, t, y, h, state, tols, mass=None):
        f0, dfdt = jax.jvp(lambda s: vector_field(s, y), (t,), (jnp.ones_like(t),))
        solve, ok = self._stage_solver(vector_field, t, y, h, mass)
        stage_status = RESULTS.successful
        stages = []
        # The coefficients enter as Python floats, which take the state's precision.
        a, c, d, nodes = A.tolist(), C.tolist(), D.tolist(), NODES.tolist()
        for i in range(8):
            if i == 0:
                f_i = f0
            else:
                u = y + sum(a[i][j] * stages[j] for j in range(i) if a[i][j] != 0)
                f_i = vector_field(t + nodes[i] * h, u)
            rhs = f_i
            if i > 0:
                history = sum((c[i][j] / h) * stages[j] for j in range(i))
                rhs = rhs + (history if mass is None else mass @ history)
            if d[i] != 0:
                rhs = rhs + (h * d[i]) * dfdt
            stage, status = solve(rhs)
            stages.append(stage)
            stage_status = RESULTS.where(stage_status == RESULTS.successful, status, stage_status)
        solved = stage_status == RESULTS.successful
        k = jnp.stack(stages)
        y1 = y + jnp.asarray(A[7, :7], y.dtype) @ k[:7] + k[7]
        scale = tols.atol + tols.rtol * jnp.maximum(jnp.abs(y), jnp.abs(y1))
        err = rms_norm(k[7], scale)
        err = jnp.where(jnp.isfinite(err) & jnp.all(jnp.isfinite(y1)), err, jnp.inf)
        # Fixed steps take every step that could be computed, whatever its error estimate.
        accepted = ((err <= 1.0) | (not tols.adaptive)) & ok & solved
        factor = controller_factor(
            err,
            h,
            state.accepted_before,
            state.h_accepted,
            state.err_accepted,
            exponent=1 / self.error_order,
        )
        factor = jnp.where(accepted & state.rejected_last, jnp.minimum(factor, 1.0), factor)
        factor = jnp.where(solved, factor, 0.5)
        new_state = _RodasState(
            accepted_before=state.accepted_before | accepted,
            rejected_last=~accepted,
            h_accepted=jnp.where(accepted, h, state.h_accepted),
            err_accepted=jnp.where(accepted, jnp.maximum(err, 1e-2), state.err_accepted),
            num_jacobians=state.num_jacobians + 1,
            num_lu=state.num_lu + int(self.linear_solver is None),
        )
        dense = (y, y1, jnp.asarray(H, y.dtype) @ k)
        result = RESULTS.where(ok, RESULTS.successful, RESULTS.singular_jacobian)
        if not tols.adaptive:  # no smaller step to retry a failed stage solve with
            result = RESULTS.where(result == RESULTS.successful, stage_status, result)
        return Attempt(y1, accepted, h * factor, dense, new_state, result)

    def _stage_solver(self, vector_field, t, y, h, mass):
        """`(solve, ok)`: `solve(b) -> (x, status)` for (M/(h gamma) - J) x = b, and whether
        the matrix is usable. `status` is the linear solver's, or `RESULTS.singular` where
        it returned non-finite values."""
        inv = 1 / (h * GAMMA)
        if self.linear_solver is None:
            jac = jax.jacfwd(lambda z: vector_field(t, z))(y)
            identity = jnp.eye(y.shape[0], dtype=y.dtype)
            factors, ok = lu_or_status(inv * (identity if mass is None else mass) - jac)
            return (lambda b: (lu_solve(factors, b), RESULTS.successful)), ok
        _, jvp_fn = jax.linearize(lambda z: vector_field(t, z), y)

        def apply(v):
            return inv * (v if mass is None else mass @ v) - jvp_fn(v)

        operator = lx.FunctionLinearOperator(apply, jax.ShapeDtypeStruct(y.shape, y.dtype))

        def solve(b):
            sol = lx.linear_solve(operator, b, self.linear_solver, throw=False)
            status = RESULTS.promote(sol.result)
            finite = jnp.all(jnp.isfinite(sol.value))
            failed = (status == RESULTS.successful) & ~finite
            status = RESULTS.where(failed, RESULTS.singular, status)
            return sol.value, status

        return solve, jnp.array(True)

    def interpolate(self, dense, t0, h, t):
        y0, y1, (k1, k2, k3) = dense
        s = (t - t0) / h
        return (1 - s) * y0 + s * (y1 + (1 - s) * (k1 + s * (k2 + s * k3)))
