"""Differential-algebraic equations: Rodas5P and Radau5 with a mass matrix.

Robertson's kinetics in DAE form (0 = y1 + y2 + y3 - 1) to t = 1e11 against the Test Set
for IVP Solvers' ROBER reference, timed against SciPy's Radau on the ODE left after
eliminating y3 = 1 - y1 - y2 (jitted right-hand side and exact Jacobian). The transistor
amplifier (`transamp`), whose algebraic equations cannot be eliminated explicitly, scored
by significant correct digits at t = 0.2 against the test set's reference at several
tolerances, with steps and time. And 1,024 transamp circuits with swept collector
resistances R8, vmapped, against a SciPy Radau loop on the reduced ODE: the differential
coordinates of M's range, with the algebraic ones solved by Newton's method inside every
right-hand side (the elimination is implicit); the loop is timed on a sample and scaled.
"""

import pathlib
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
from _harness import Row, best_seconds

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "tests"))
from stiff_problems import PROBLEMS  # noqa: E402

import simlab  # noqa: E402
from simlab.integrate import Radau5, Rodas5P  # noqa: E402

SOLVERS = {"Rodas5P": Rodas5P(), "Radau5": Radau5()}
MAX_STEPS = 100_000
ROBER = PROBLEMS["rober"]
TRANSAMP_TOLERANCES = (1e-4, 1e-6, 1e-8)
ENSEMBLE = 1024
SCIPY_SAMPLE = 16
ENSEMBLE_T1 = 0.05  # five periods of the 100 Hz input
ENSEMBLE_TOL = 1e-6
NEWTON_ITERATIONS = 12  # from the previous right-hand side's solution: to roundoff
NEWTON_STEP_LIMIT = 0.1  # volts
NEWTON_RESIDUAL = 1e-12  # amperes: a converged algebraic solve


@eqx.filter_jit
def _dae_solve(solver, model, y0, t1, rtol, atol):
    trajectory = simlab.simulate(
        model,
        y0,
        jnp.stack([jnp.zeros_like(t1), t1]),
        solver=solver,
        rtol=rtol,
        atol=atol,
        max_steps=MAX_STEPS,
        throw=False,
    )
    return trajectory.ys[-1], trajectory.succeeded, trajectory.stats["num_steps"]


def _reduced_rober(t, y):
    """ROBER with y3 = 1 - y1 - y2 eliminated."""
    y3 = 1.0 - y[0] - y[1]
    return jnp.stack(
        [-0.04 * y[0] + 1e4 * y[1] * y3, 0.04 * y[0] - 1e4 * y[1] * y3 - 3e7 * y[1] ** 2]
    )


def _scipy_reduced_rober(rtol):
    field = jax.jit(_reduced_rober)
    jacobian = jax.jit(jax.jacfwd(_reduced_rober, argnums=1))
    y0 = np.array([1.0, 0.0])
    field(0.0, y0), jacobian(0.0, y0)

    def run():
        return scipy.integrate.solve_ivp(
            lambda t, y: np.asarray(field(t, y)),
            (0.0, ROBER.t1),
            y0,
            method="Radau",
            rtol=rtol,
            atol=rtol * ROBER.atol_over_rtol,
            jac=lambda t, y: np.asarray(jacobian(t, y)),
        )

    return run


def _robertson_rows(rtol: float) -> list[Row]:
    model = simlab.models.RobertsonDAE()
    y0, t1 = jnp.array([1.0, 0.0, 0.0]), jnp.asarray(ROBER.t1)
    rtol_arr, atol_arr = jnp.asarray(rtol), jnp.asarray(rtol * ROBER.atol_over_rtol)
    calls = {
        label: (lambda s=s: _dae_solve(s, model, y0, t1, rtol_arr, atol_arr)[0])
        for label, s in SOLVERS.items()
    }
    scipy_run = _scipy_reduced_rober(rtol)
    seconds = best_seconds({**calls, "SciPy Radau": lambda: scipy_run().y}, repeats=3)
    results = {}
    for label, solver in SOLVERS.items():
        y, succeeded, steps = _dae_solve(solver, model, y0, t1, rtol_arr, atol_arr)
        digits = ROBER.scd(y) if bool(succeeded) else float("nan")
        results[label] = (digits, seconds[label], int(steps))
    solution = scipy_run()
    y1, y2 = solution.y[:, -1]
    digits = ROBER.scd(np.array([y1, y2, 1.0 - y1 - y2])) if solution.success else float("nan")
    results["SciPy Radau"] = (digits, seconds["SciPy Radau"], len(solution.t) - 1)
    detail = ", ".join(
        f"{k} {v[0]:.1f} scd {v[1] * 1e3:.0f} ms {v[2]} st" for k, v in results.items()
    )
    return [
        Row(
            f"dae ROBER rtol {rtol:g}: {label} speed-up vs SciPy Radau (reduced ODE)",
            results["SciPy Radau"][1] / results[label][1],
            ">= 1x",
            detail,
        )
        for label in SOLVERS
    ]


def _transamp_rows() -> list[Row]:
    model = simlab.models.TransistorAmplifier()
    y0, t1 = model.initial_state(), jnp.asarray(0.2)
    reference = np.asarray(model.REFERENCE_AT_0_2)
    out = []
    for rtol in TRANSAMP_TOLERANCES:
        tol = jnp.asarray(rtol)
        calls = {
            label: (lambda s=s, tol=tol: _dae_solve(s, model, y0, t1, tol, tol)[0])
            for label, s in SOLVERS.items()
        }
        seconds = best_seconds(calls, repeats=3)
        for label, solver in SOLVERS.items():
            y, succeeded, steps = _dae_solve(solver, model, y0, t1, tol, tol)
            error = np.max(np.abs(np.asarray(y) - reference) / np.abs(reference))
            digits = -np.log10(error) if bool(succeeded) else float("nan")
            out.append(
                Row(
                    f"dae TRANSAMP rtol {rtol:g}: {label} significant digits",
                    float(digits),
                    f">= {-np.log10(rtol) - 1:g}",
                    f"{int(steps)} steps, {seconds[label] * 1e3:.0f} ms",
                )
            )
    return out


def _collector_resistances():
    return jnp.linspace(6000.0, 12000.0, ENSEMBLE)


@jax.jit
@jax.vmap
def _transamp_ensemble(r8):
    model = simlab.models.TransistorAmplifier(r8=r8)
    trajectory = simlab.simulate(
        model,
        model.initial_state(),
        jnp.array([0.0, ENSEMBLE_T1]),
        solver=Rodas5P(),
        rtol=ENSEMBLE_TOL,
        atol=ENSEMBLE_TOL,
        max_steps=MAX_STEPS,
    )
    return trajectory.ys[-1]


def _reduced_transamp_functions():
    """The reduced ODE's jitted pieces, compiled once for every R8 (an argument)."""
    mass = np.asarray(simlab.models.TransistorAmplifier().mass_matrix)  # independent of R8
    u, singular, vt = np.linalg.svd(mass)
    rank = int(np.sum(singular > singular[0] * 1e-12))
    u_d, u_a, v_d, v_a = u[:, :rank], u[:, rank:], vt[:rank].T, vt[rank:].T

    def algebraic(z_a, t, z_d, r8):
        model = simlab.models.TransistorAmplifier(r8=r8)
        return u_a.T @ model(t, v_d @ z_d + v_a @ z_a, None)

    def solved(t, z_d, z_a, r8):
        def newton(_, z):
            jacobian = jax.jacfwd(algebraic)(z, t, z_d, r8)
            step = jnp.linalg.solve(jacobian, algebraic(z, t, z_d, r8))
            # Limit each step, as circuit simulators do: the transistors' exponentials
            # send a full Newton step from a poor guess far off.
            return z - jnp.clip(step, -NEWTON_STEP_LIMIT, NEWTON_STEP_LIMIT)

        return jax.lax.fori_loop(0, NEWTON_ITERATIONS, newton, z_a)

    def rate(t, z_d, z_a, r8):
        model = simlab.models.TransistorAmplifier(r8=r8)
        y = v_d @ z_d + v_a @ solved(t, z_d, z_a, r8)
        return (u_d.T @ model(t, y, None)) / singular[:rank]

    jitted = {
        "rate": jax.jit(rate),
        "jacobian": jax.jit(jax.jacfwd(rate, argnums=1)),
        "solved": jax.jit(solved),
        "residual": jax.jit(algebraic),
    }
    return jitted, v_d, v_a


_REDUCED = None


class _ReducedTransamp:
    """transamp as an ODE for SciPy: with M = U S V^T, the coordinates z_d = V_d^T y on
    M's range obey S_d z_d' = U_d^T f(t, y); the algebraic ones z_a = V_a^T y solve
    U_a^T f(t, V_d z_d + V_a z_a) = 0, by Newton's method from the last solution."""

    def __init__(self, r8: float):
        global _REDUCED
        if _REDUCED is None:
            _REDUCED = _reduced_transamp_functions()
        self._fns, self._v_d, self._v_a = _REDUCED
        self._r8 = jnp.asarray(r8)
        y0 = np.asarray(simlab.models.TransistorAmplifier(r8=r8).initial_state())
        self.z_d0, self.z_a = self._v_d.T @ y0, self._v_a.T @ y0

    def field(self, t, z_d):
        z_a = np.asarray(self._fns["solved"](t, z_d, self.z_a, self._r8))
        residual = self._fns["residual"](z_a, t, z_d, self._r8)
        if np.max(np.abs(residual)) <= NEWTON_RESIDUAL:
            self.z_a = z_a  # where Newton failed (a wild trial state) keep the warm start
        return np.asarray(self._fns["rate"](t, z_d, self.z_a, self._r8))

    def jacobian(self, t, z_d):
        return np.asarray(self._fns["jacobian"](t, z_d, self.z_a, self._r8))

    def state(self, t, z_d):
        z_a = np.asarray(self._fns["solved"](t, z_d, self.z_a, self._r8))
        return self._v_d @ z_d + self._v_a @ z_a


def _scipy_reduced_transamp(r8) -> np.ndarray:
    reduced = _ReducedTransamp(float(r8))
    solution = scipy.integrate.solve_ivp(
        reduced.field,
        (0.0, ENSEMBLE_T1),
        reduced.z_d0,
        method="Radau",
        rtol=ENSEMBLE_TOL,
        atol=ENSEMBLE_TOL,
        jac=reduced.jacobian,
    )
    assert solution.success, solution.message
    return reduced.state(ENSEMBLE_T1, solution.y[:, -1])


def _transamp_ensemble_row() -> Row:
    resistances = _collector_resistances()
    stride = ENSEMBLE // SCIPY_SAMPLE
    sample = resistances[::stride]
    seconds = best_seconds(
        {
            "batch": lambda: _transamp_ensemble(resistances),
            "sample": lambda: [_scipy_reduced_transamp(r) for r in sample],
        },
        repeats=3,
    )
    batch, loop = seconds["batch"], seconds["sample"] * stride
    reference = np.stack([_scipy_reduced_transamp(r) for r in sample])
    agree = np.max(np.abs(np.asarray(_transamp_ensemble(resistances))[::stride] - reference))
    return Row(
        f"dae: {ENSEMBLE} vmapped TRANSAMP (Rodas5P, swept R8) speed-up vs SciPy Radau loop "
        "on the reduced ODE",
        loop / batch,
        ">= 100x",
        f"{batch * 1e3:.0f} ms vs {loop * 1e3:.0f} ms (loop timed on {SCIPY_SAMPLE}, scaled; "
        f"algebraic part by Newton in each right-hand side); t1 {ENSEMBLE_T1:g}, tol "
        f"{ENSEMBLE_TOL:g}, max |diff| {agree:.1e} V",
    )


def rows() -> list[Row]:
    return [
        *_robertson_rows(1e-6),
        *_robertson_rows(1e-8),
        *_transamp_rows(),
        _transamp_ensemble_row(),
    ]
