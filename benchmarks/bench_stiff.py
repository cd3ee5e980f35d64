"""Stiff solvers side by side on the Test Set for IVP Solvers: simlab's Rodas5P and Radau5
against Diffrax's Kvaerno5 and SciPy's Radau, BDF and LSODA, plus a vmapped ROBER ensemble
against a SciPy BDF loop.

Accuracy is the test set's significant correct digits (scd) at the final time against its
published reference solutions (mixed-error digits for E5, whose components fall below
double-precision roundoff of the conserved total). SciPy gets the same tolerances, a jitted
right-hand side and the exact (jitted `jax.jacfwd`) Jacobian.
"""

import pathlib
import sys

import diffrax as dfx
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

RTOL = 1e-8  # the tolerance of the table rows
MAX_STEPS = 200_000
JAX_SOLVERS = {"Rodas5P": Rodas5P(), "Radau5": Radau5()}
SCIPY_METHODS = ("Radau", "BDF", "LSODA")
ENSEMBLE = 1024
SCIPY_SAMPLE = 16  # the SciPy loop is timed on a strided subset and scaled


@eqx.filter_jit
def _simlab_solve(solver, name, rtol):
    problem = PROBLEMS[name]
    ys, result, stats = solver.solve(
        problem.vector_field,
        jnp.array([0.0, problem.t1]),
        jnp.asarray(problem.y0),
        rtol=rtol,
        atol=rtol * problem.atol_over_rtol,
        max_steps=MAX_STEPS,
    )
    return ys[-1], result == simlab.RESULTS.successful, stats["num_steps"]


@eqx.filter_jit
def _kvaerno_solve(name, rtol):
    problem = PROBLEMS[name]
    sol = dfx.diffeqsolve(
        dfx.ODETerm(lambda t, y, args: problem.vector_field(t, y)),
        dfx.Kvaerno5(),
        t0=0.0,
        t1=problem.t1,
        dt0=None,
        y0=jnp.asarray(problem.y0),
        stepsize_controller=dfx.PIDController(rtol=rtol, atol=rtol * problem.atol_over_rtol),
        max_steps=MAX_STEPS,
        throw=False,
    )
    return sol.ys[-1], sol.result == dfx.RESULTS.successful, sol.stats["num_steps"]


def _scipy_solver(name, method, rtol):
    problem = PROBLEMS[name]
    field = jax.jit(problem.vector_field)
    jacobian = jax.jit(jax.jacfwd(problem.vector_field, argnums=1))
    jac = {} if method == "LSODA" else dict(jac=lambda t, y: np.asarray(jacobian(t, y)))
    field(0.0, problem.y0), jacobian(0.0, problem.y0)

    def run():
        return scipy.integrate.solve_ivp(
            lambda t, y: np.asarray(field(t, y)),
            (0.0, problem.t1),
            problem.y0,
            method=method,
            rtol=rtol,
            atol=rtol * problem.atol_over_rtol,
            **jac,
        )

    return run


def _digits(problem, y):
    return problem.mescd(y) if problem.name == "e5" else problem.scd(y)


def measure(name: str, rtol: float, repeats: int = 3) -> dict[str, tuple[float, float, int]]:
    """`{solver: (scd, seconds, steps)}` for one problem at one tolerance (scd nan on failure).

    Every solver, SciPy's included, is timed by the same statistic: its best of `repeats`
    interleaved rounds."""
    problem = PROBLEMS[name]
    rtol_arr = jnp.asarray(rtol)
    simlab_calls = {
        label: (lambda s=s: _simlab_solve(s, name, rtol_arr)) for label, s in JAX_SOLVERS.items()
    }
    simlab_calls["Kvaerno5"] = lambda: _kvaerno_solve(name, rtol_arr)
    scipy_calls = {f"SciPy {m}": _scipy_solver(name, m, rtol) for m in SCIPY_METHODS}
    seconds = best_seconds(
        {**simlab_calls, **{label: (lambda r=r: r().y) for label, r in scipy_calls.items()}},
        repeats=repeats,
    )
    out = {}
    for label, call in simlab_calls.items():
        y, succeeded, steps = call()
        digits = _digits(problem, y) if bool(succeeded) else float("nan")
        out[label] = (digits, seconds[label], int(steps))
    for label, run in scipy_calls.items():
        sol = run()
        digits = _digits(problem, sol.y[:, -1]) if sol.success else float("nan")
        out[label] = (digits, seconds[label], len(sol.t) - 1)
    return out


def _rober_ensemble(k):
    return Rodas5P().solve(
        lambda t, y: jnp.stack(
            [
                -k[0] * y[0] + k[2] * y[1] * y[2],
                k[0] * y[0] - k[2] * y[1] * y[2] - k[1] * y[1] ** 2,
                k[1] * y[1] ** 2,
            ]
        ),
        ENSEMBLE_TS,
        jnp.array([1.0, 0.0, 0.0]),
        rtol=1e-6,
        atol=1e-10,
    )[0]


ENSEMBLE_TS = jnp.array([0.0, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5])
_ensemble = jax.jit(jax.vmap(_rober_ensemble))


def _ensemble_rates():
    scale = jnp.linspace(0.5, 2.0, ENSEMBLE)
    return jnp.stack([0.04 * scale, 3e7 * scale[::-1], 1e4 * jnp.sqrt(scale)], axis=1)


def _scipy_rober(k):
    k = np.asarray(k)

    def field(t, y):
        return [
            -k[0] * y[0] + k[2] * y[1] * y[2],
            k[0] * y[0] - k[2] * y[1] * y[2] - k[1] * y[1] ** 2,
            k[1] * y[1] ** 2,
        ]

    def jac(t, y):
        return [
            [-k[0], k[2] * y[2], k[2] * y[1]],
            [k[0], -k[2] * y[2] - 2 * k[1] * y[1], -k[2] * y[1]],
            [0.0, 2 * k[1] * y[1], 0.0],
        ]

    return scipy.integrate.solve_ivp(
        field,
        (0.0, float(ENSEMBLE_TS[-1])),
        [1.0, 0.0, 0.0],
        method="BDF",
        t_eval=np.asarray(ENSEMBLE_TS),
        rtol=1e-6,
        atol=1e-10,
        jac=jac,
    ).y.T


def rows() -> list[Row]:
    out = []
    for name in ("hires", "orego", "rober", "pollu", "e5", "vdpol"):
        results = measure(name, RTOL)
        rodas, kvaerno, radau_scipy = (
            results["Rodas5P"],
            results["Kvaerno5"],
            results["SciPy Radau"],
        )
        failed = [k for k, v in results.items() if np.isnan(v[0])]
        detail = (f"failed: {', '.join(failed)}; " if failed else "") + ", ".join(
            f"{k} {v[0]:.1f} scd {v[1] * 1e3:.0f} ms {v[2]} st" for k, v in results.items()
        )
        out.append(
            Row(
                f"stiff {name.upper()} rtol {RTOL:g}: Rodas5P steps vs Kvaerno5",
                kvaerno[2] / rodas[2],
                ">= 1x",
                detail,
            )
        )
        out.append(
            Row(
                f"stiff {name.upper()} rtol {RTOL:g}: Rodas5P speed-up vs SciPy Radau",
                radau_scipy[1] / rodas[1],
                ">= 1x",
                f"{rodas[1] * 1e3:.1f} ms vs {radau_scipy[1] * 1e3:.1f} ms",
            )
        )
    rates = _ensemble_rates()
    stride = ENSEMBLE // SCIPY_SAMPLE
    seconds = best_seconds(
        {
            "batch": lambda: _ensemble(rates),
            "sample": lambda: [_scipy_rober(k) for k in rates[::stride]],
        },
        repeats=3,
    )
    batch, loop = seconds["batch"], seconds["sample"] * stride
    sample = [_scipy_rober(k) for k in rates[::stride]]
    agree = np.max(np.abs(np.asarray(_ensemble(rates))[::stride] - np.stack(sample)))
    out.append(
        Row(
            f"stiff: {ENSEMBLE} vmapped ROBER (Rodas5P) speed-up vs SciPy BDF loop",
            loop / batch,
            ">= 100x",
            f"{batch * 1e3:.0f} ms vs {loop * 1e3:.0f} ms (loop timed on {SCIPY_SAMPLE}, "
            f"scaled); max |diff| {agree:.1e}",
        )
    )
    return out
