"""Radau5: the three-stage Radau IIA collocation method of order 5, implemented as in Hairer and
Wanner's RADAU5 (Solving ODEs II, IV.8): simplified Newton iterations on the transformed
stage system (one real and one complex linear system), Jacobian reuse across steps, Hairer's
error estimate and Gustafsson's predictive step-size controller."""

import math
from typing import ClassVar

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ..._results import RESULTS
from ._loop import AbstractStiffSolver, Attempt, Tolerances, controller_factor, rms_norm
from ._lu import lu_solve
from ._rosenbrock import lu_or_status

# Constants of RADAU5 (E. Hairer, G. Wanner, radau5.f, subroutine RADCOR): the nodes, the
# error-estimate weights DD, the eigenvalues of A^{-1} (one real, gamma = 1/U1, and the pair
# alpha +- i beta) and the transformation T with T^{-1} A^{-1} T = diag(gamma, [[a, -b], [b, a]]).
_SQ6 = math.sqrt(6.0)  # Python floats: constants take the state's precision
C1 = (4.0 - _SQ6) / 10.0
C2 = (4.0 + _SQ6) / 10.0
NODES = np.array([C1, C2, 1.0])
DD = np.array([-(13.0 + 7.0 * _SQ6) / 3.0, (-13.0 + 7.0 * _SQ6) / 3.0, -1.0 / 3.0])
_U1 = (6.0 + 81.0 ** (1 / 3) - 9.0 ** (1 / 3)) / 30.0
_ALPHA = (12.0 - 81.0 ** (1 / 3) + 9.0 ** (1 / 3)) / 60.0
_BETA = (81.0 ** (1 / 3) + 9.0 ** (1 / 3)) * math.sqrt(3.0) / 60.0
GAMMA = 1.0 / _U1
ALPHA = _ALPHA / (_ALPHA**2 + _BETA**2)
BETA = _BETA / (_ALPHA**2 + _BETA**2)
T = np.array(
    [
        [9.1232394870892942792e-02, -0.14125529502095420843, -3.0029194105147424492e-02],
        [0.24171793270710701896, 0.20412935229379993199, 0.38294211275726193779],
        [0.96604818261509293619, 1.0, 0.0],
    ]
)
TI = np.array(
    [
        [4.3255798900631553510, 0.33919925181580986954, 0.54177053993587487119],
        [-4.1787185915519047273, -0.32768282076106238708, 0.47662355450055045196],
        [-0.50287263494578687595, 2.5719269498556054292, -0.59603920482822492497],
    ]
)
NEWTON_MAX = 7  # NIT
# Fixed steps solve each step close to roundoff and have no smaller step to fall back on:
# their Newton iterations may run longer.
FIXED_STEP_NEWTON_MAX = 20
JACOBIAN_REUSE = 1e-3  # THET: keep the Jacobian while the Newton contraction is below this
SAFETY = 0.9
KEEP_STEP = (1.0, 1.2)  # QUOT1, QUOT2: keep h (and the LU factors) for ratios in this range
UROUND = float(np.finfo(np.float64).eps)


class _RadauState(eqx.Module):
    jac: Array
    lu_real: tuple
    lu_complex: tuple
    h_lu: Array  # the step size the factors were computed for
    lu_ok: Array
    need_jacobian: Array
    jacobian_current: Array  # the Jacobian was computed at the current (t, y)
    first: Array
    rejected_last: Array
    theta: Array
    faccon: Array
    cont: Array  # (4, n) collocation polynomial of the last accepted step
    h_old: Array
    f0: Array  # f(t, y) at the current point
    h_accepted: Array
    err_accepted: Array
    num_jacobians: Array
    num_lu: Array
    num_newton: Array


def _factor(jac: Array, h: Array, mass: Array | None):
    n = jac.shape[0]
    mass = jnp.eye(n, dtype=jac.dtype) if mass is None else mass
    lu_real, ok_real = lu_or_status((GAMMA / h) * mass - jac)
    complex_dtype = jnp.complex128 if jac.dtype == jnp.float64 else jnp.complex64
    shift = lax.complex(ALPHA / h, BETA / h)  # (alpha + i beta) / h, without mixing dtypes
    complex_matrix = shift * mass.astype(complex_dtype) - jac.astype(complex_dtype)
    lu_complex, ok_complex = lu_or_status(complex_matrix)
    return lu_real, lu_complex, ok_real & ok_complex


class Radau5(AbstractStiffSolver):
    r"""Radau IIA of order 5 (three stages), as in Hairer and Wanner's RADAU5.

    The stage increments $Z = (Y_i - y)_i$ solve $(I \otimes M) Z = h (A \otimes I) F(Z)$,
    with $M = I$ for an ODE and a constant, possibly singular, mass matrix for
    $M y' = f(t, y)$ (index 1; Hairer–Wanner, Solving ODEs II, VI.4 and IV.8). With
    $T^{-1} A^{-1} T = \mathrm{diag}(\gamma, [\begin{smallmatrix}\alpha & -\beta\\ \beta &
    \alpha\end{smallmatrix}])$, simplified Newton iterations on $W = (T^{-1}\otimes I) Z$
    solve one real system with $\gamma/h\, M - J$ and one complex system with
    $(\alpha + i\beta)/h\, M - J$, each factorised once per step size. The Jacobian is kept
    across steps while the iterations contract fast (rate $\theta \le 10^{-3}$), and the step
    size (hence the factorisation) is kept when the controller asks for a ratio in
    $[1, 1.2]$. The error estimate is Hairer's
    $(\gamma/h\, M - J)^{-1}\big(f(y) + M \sum_i d_i Z_i / h\big)$, re-filtered through one more
    solve after a rejection; the step size follows Gustafsson's predictive controller.
    Tolerances are transformed as RADAU5 does ($r' = 0.1\, r^{2/3}$) so that the user's
    tolerance roughly matches the global error. Dense output is the collocation polynomial
    (order 3 between steps; the steps themselves are order 5).

    With fixed steps (`solve(..., adaptive=False)`) the error estimate is skipped and every
    step whose Newton iterations converge is taken. The iterations then solve each step
    close to roundoff (RADAU5's floor, about ten machine epsilons relative to the state),
    with up to `FIXED_STEP_NEWTON_MAX` of them, so that the steps converge at order 5 whatever
    `rtol`.
    """

    order: ClassVar[int] = 5
    error_order: ClassVar[int] = 4  # Hairer's order-3 estimate: local error ~ h^4
    tolerance_exponent: ClassVar[float] = 2.0 / 3.0

    def init(self, vector_field, t0, y0, tols: Tolerances, mass=None):
        n = y0.shape[0]
        dtype = y0.dtype
        zero = jnp.array(0, dtype=jnp.int32)
        jac = jnp.zeros((n, n), dtype)
        lu_real, lu_complex, _ = _factor(jac, jnp.array(1.0, dtype), mass)
        return _RadauState(
            jac=jac,
            lu_real=lu_real,
            lu_complex=lu_complex,
            h_lu=jnp.array(jnp.nan, dtype),
            lu_ok=jnp.array(True),
            need_jacobian=jnp.array(True),
            jacobian_current=jnp.array(False),
            first=jnp.array(True),
            rejected_last=jnp.array(False),
            theta=jnp.array(JACOBIAN_REUSE, dtype),
            faccon=jnp.array(1.0, dtype),
            cont=jnp.zeros((4, n), dtype),
            h_old=jnp.array(1.0, dtype),
            f0=vector_field(t0, y0),
            h_accepted=jnp.array(1.0, dtype),
            err_accepted=jnp.array(1.0, dtype),
            num_jacobians=zero,
            num_lu=zero,
            num_newton=zero,
        )

    def counters(self, state):
        return dict(
            num_jacobians=state.num_jacobians,
            num_lu=state.num_lu,
            num_newton_iterations=state.num_newton,
        )

    def attempt(self, vector_field, t, y, h, state, tols, mass=None):
        n = y.shape[0]
        jac = jax.lax.cond(
            state.need_jacobian,
            lambda: jax.jacfwd(lambda z: vector_field(t, z))(y),
            lambda: state.jac,
        )
        jacobian_current = state.need_jacobian | state.jacobian_current
        refactor = state.need_jacobian | (h != state.h_lu)
        lu_real, lu_complex, lu_ok = jax.lax.cond(
            refactor,
            lambda: _factor(jac, h, mass),
            lambda: (state.lu_real, state.lu_complex, state.lu_ok),
        )
        scale = tols.atol + tols.rtol * jnp.abs(y)
        uround = float(jnp.finfo(y.dtype).eps)
        fnewt = jnp.maximum(10 * uround / tols.rtol, jnp.minimum(0.03, jnp.sqrt(tols.rtol)))
        fac1, alphn, betan = GAMMA / h, ALPHA / h, BETA / h
        ti, tm = jnp.asarray(TI, y.dtype), jnp.asarray(T, y.dtype)
        nodes = jnp.asarray(NODES, y.dtype)

        # Starting values: extrapolate the previous collocation polynomial.
        s = nodes * (h / state.h_old)
        c = state.cont
        z_start = s[:, None] * (
            c[1:2] + (s[:, None] - (C2 - 1)) * (c[2:3] + (s[:, None] - (C1 - 1)) * c[3:4])
        )
        z_start = jnp.where(state.first, jnp.zeros((3, n), y.dtype), z_start)

        newton_max = NEWTON_MAX if tols.adaptive else FIXED_STEP_NEWTON_MAX

        def newton_cond(carry):
            _, _, newt, _, _, _, _, status = carry
            return (status == 0) & (newt < newton_max)

        def newton_body(carry):
            z, w, newt, dynold, thqold, theta, faccon, status = carry
            f = jax.vmap(lambda ci, zi: vector_field(t + ci * h, y + zi))(nodes, z)
            tf = ti @ f
            mw = w if mass is None else w @ mass.T  # M applied to each stage
            rhs1 = tf[0] - fac1 * mw[0]
            rhs2 = tf[1] - alphn * mw[1] + betan * mw[2]
            rhs3 = tf[2] - betan * mw[1] - alphn * mw[2]
            dw1 = lu_solve(lu_real, rhs1)
            dw23 = lu_solve(lu_complex, lax.complex(rhs2, rhs3))
            dw = jnp.stack([dw1, dw23.real, dw23.imag])
            newt = newt + 1
            dyno = jnp.sqrt(jnp.mean((dw / scale[None]) ** 2))
            check = (newt > 1) & (newt < newton_max)
            thq = dyno / dynold
            theta_new = jnp.where(newt == 2, thq, jnp.sqrt(thq * thqold))
            theta = jnp.where(check, theta_new, theta)
            thqold = jnp.where(check, thq, thqold)
            contracting = theta < 0.99
            faccon = jnp.where(check & contracting, theta / (1 - theta), faccon)
            remaining = (newton_max - 1 - newt).astype(dyno.dtype)
            dyth = faccon * dyno * theta**remaining / fnewt
            too_slow = check & contracting & (dyth >= 1)
            diverging = check & ~contracting
            w = w + dw
            z = tm @ w
            converged = faccon * dyno <= fnewt
            status = jnp.where(
                too_slow | diverging | ~jnp.isfinite(dyno), 2, jnp.where(converged, 1, 0)
            ).astype(jnp.int32)
            qnewt = jnp.clip(dyth, 1e-4, 20.0)
            hhfac = jnp.where(too_slow, 0.8 * qnewt ** (-1.0 / (4.0 + remaining)), 0.5)
            carry = (z, w, newt, jnp.maximum(dyno, UROUND), thqold, theta, faccon, status)
            return carry, hhfac

        def newton_step(full):
            carry, _ = full
            return newton_body(carry)

        dtype = y.dtype
        init = (
            z_start,
            ti @ z_start,
            jnp.array(0, jnp.int32),
            jnp.array(1.0, dtype),
            jnp.array(1.0, dtype),
            jnp.array(JACOBIAN_REUSE, dtype),
            jnp.maximum(state.faccon, UROUND) ** 0.8,
            jnp.array(0, jnp.int32),
        )
        (z, _, newt, _, _, theta, faccon, status), hhfac = eqxi.while_loop(
            lambda full: newton_cond(full[0]),
            newton_step,
            (init, jnp.array(0.5, dtype)),
            max_steps=newton_max,
            kind=tols.newton_kind,
        )
        converged = (status == 1) & lu_ok

        if tols.adaptive:
            err = self._error(vector_field, t, y, h, z, state, lu_real, scale, converged, mass)
            accepted = converged & (err < 1)
        else:  # fixed steps: no error test, every converged step is taken
            err = jnp.where(converged, 1e-10, jnp.inf).astype(dtype)
            accepted = converged

        # Step size: RADAU5's safety factor shrinks with the Newton iterations used.
        safety = jnp.minimum(
            SAFETY, SAFETY * (1 + 2 * NEWTON_MAX) / (newt.astype(dtype) + 2 * NEWTON_MAX)
        )
        factor = controller_factor(
            err,
            h,
            ~state.first,
            state.h_accepted,
            state.err_accepted,
            exponent=1 / self.error_order,
            safety=safety,
            min_factor=0.2,
            max_factor=8.0,
        )
        factor = jnp.where(accepted & state.rejected_last, jnp.minimum(factor, 1.0), factor)
        keep = accepted & (theta <= JACOBIAN_REUSE) & (factor >= KEEP_STEP[0])
        keep = keep & (factor <= KEEP_STEP[1])
        factor = jnp.where(keep, 1.0, factor)
        factor = jnp.where(~converged, hhfac, factor)
        factor = jnp.where(~accepted & converged & state.first, 0.1, factor)

        y1 = y + z[2]
        cont = _collocation(y1, z)
        if tols.adaptive:  # f(t, y) serves only the error estimate
            f_new = jax.lax.cond(accepted, lambda: vector_field(t + h, y1), lambda: state.f0)
        else:
            f_new = state.f0
        new_state = _RadauState(
            jac=jac,
            lu_real=lu_real,
            lu_complex=lu_complex,
            h_lu=h,
            lu_ok=lu_ok,
            need_jacobian=jnp.where(accepted, theta > JACOBIAN_REUSE, ~jacobian_current),
            jacobian_current=jacobian_current & ~accepted,
            first=state.first & ~accepted,
            rejected_last=~accepted,
            theta=theta,
            faccon=faccon,
            cont=jnp.where(accepted, cont, state.cont),
            h_old=jnp.where(accepted, h, state.h_old),
            f0=f_new,
            h_accepted=jnp.where(accepted, h, state.h_accepted),
            err_accepted=jnp.where(accepted, jnp.maximum(err, 1e-2), state.err_accepted),
            num_jacobians=state.num_jacobians + state.need_jacobian.astype(jnp.int32),
            num_lu=state.num_lu + refactor.astype(jnp.int32),
            num_newton=state.num_newton + newt,
        )
        result = RESULTS.where(lu_ok, RESULTS.successful, RESULTS.singular_jacobian)
        if not tols.adaptive:
            # With no smaller step to fall back on, Newton iterations that fail on a fresh
            # Jacobian stop the solve; on a reused one the step is retried with a fresh one.
            newton_failure = RESULTS.where(
                status == 0, RESULTS.nonlinear_max_steps_reached, RESULTS.nonlinear_divergence
            )
            failed = lu_ok & ~converged & jacobian_current
            result = RESULTS.where(failed, newton_failure, result)
        return Attempt(y1, accepted, h * factor, cont, new_state, result)

    def _error(self, vector_field, t, y, h, z, state, lu_real, scale, converged, mass):
        """Hairer's scaled error estimate, re-filtered after a rejection (`inf` where the
        Newton iterations did not converge). Algebraic components enter unscaled, as in
        RADAU5 for index 1 (it scales only declared index-2 and index-3 components)."""
        f2 = (jnp.asarray(DD, y.dtype) / h) @ z
        f2 = f2 if mass is None else mass @ f2
        err_vec = lu_solve(lu_real, state.f0 + f2)
        err = rms_norm(err_vec, scale)

        def refine():
            f1 = vector_field(t, y + err_vec)
            return rms_norm(lu_solve(lu_real, f1 + f2), scale)

        err = jax.lax.cond(
            (err >= 1) & (state.first | state.rejected_last) & converged, refine, lambda: err
        )
        return jnp.where(converged & jnp.isfinite(err), jnp.maximum(err, 1e-10), jnp.inf)

    def interpolate(self, dense, t0, h, t):
        s = (t - (t0 + h)) / h
        return dense[0] + s * (dense[1] + (s - (C2 - 1)) * (dense[2] + (s - (C1 - 1)) * dense[3]))


def _collocation(y1: Array, z: Array) -> Array:
    """RADAU5's dense output: the collocation polynomial through the stages, in Newton form
    about the end of the step (CONT in radau5.f)."""
    z1, z2, z3 = z
    c1 = (z2 - z3) / (C2 - 1)
    ak = (z1 - z2) / (C1 - C2)
    acont3 = (ak - z1 / C1) / C2
    c2 = (ak - c1) / (C1 - 1)
    c3 = c2 - acont3
    return jnp.stack([y1, c1, c2, c3])
