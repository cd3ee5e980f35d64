"""Differential-algebraic equations: Rodas5P and Radau5 with a mass matrix.

Robertson's kinetics in DAE form (0 = y1 + y2 + y3 - 1) to t = 1e11 against the Test Set
for IVP Solvers' ROBER reference, timed against SciPy's Radau on the ODE left after
eliminating y3 = 1 - y1 - y2 (jitted right-hand side and exact Jacobian). The transistor
amplifier (`transamp`), whose algebraic equations cannot be eliminated explicitly, scored
by significant correct digits at t = 0.2 against the test set's reference at several
tolerances, with steps and time.
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


def rows() -> list[Row]:
    return [*_robertson_rows(1e-6), *_robertson_rows(1e-8), *_transamp_rows()]
