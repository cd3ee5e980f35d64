"""A 1000-start fit of the lynx–hare records: simlab's one vmapped loop against a loop of
`scipy.optimize.least_squares` from the same starts.

Same loss (½ Σ (model − data)², y0 fixed at the first record), same starts (simlab's Latin
hypercube, log-uniform in the bounds), same ODE tolerances: simlab's Levenberg–Marquardt
with forward-mode Jacobians through its Tsit5 loop, all starts vmapped (every 25 steps the
unfinished ones are gathered into a smaller batch); SciPy's trust-region reflective with
finite differences on `solve_ivp` (RK45), one start after another. SciPy is timed on every
`STRIDE`-th start and scaled to all of them. Both stop by their own tests (simlab's
relative 1e-8 on the step and the loss, SciPy's default 1e-8 `ftol`/`xtol`/`gtol`), at
most 200 steps for simlab; the detail compares the losses each side ends at.
"""

import time

import jax.random as jr
import numpy as np
from _harness import Row, best_seconds
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares

import simlab

PARAMS = ["alpha", "beta", "gamma", "delta"]
BOUNDS = {"alpha": (0.1, 2.0), "beta": (0.005, 0.1), "gamma": (0.1, 2.0), "delta": (0.005, 0.1)}
NUM_STARTS, STRIDE = 1000, 50
RTOL, ATOL = 1e-6, 1e-9


def _simlab_multistart(data):
    start = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02)
    return simlab.fit(
        start,
        data.ts,
        data.observations,
        y0=data.observations[0],
        params=PARAMS,
        starts=NUM_STARTS,
        bounds=BOUNDS,
        key=jr.key(0),
        throw=False,
    )


def _residuals(theta, ts, observations):
    alpha, beta, gamma, delta = theta

    def field(t, y):
        prey, predator = y
        return [alpha * prey - beta * prey * predator, delta * prey * predator - gamma * predator]

    solution = solve_ivp(
        field, (ts[0], ts[-1]), observations[0], t_eval=ts, rtol=RTOL, atol=ATOL, method="RK45"
    )
    if not solution.success or solution.y.shape[1] != ts.size:
        return np.full(observations.size, 1e8)
    return (solution.y.T - observations).ravel()


def _scipy_fit(theta0, ts, observations):
    lower = [BOUNDS[p][0] for p in PARAMS]
    upper = [BOUNDS[p][1] for p in PARAMS]
    return least_squares(
        _residuals, theta0, bounds=(lower, upper), x_scale="jac", args=(ts, observations)
    )


def rows() -> list[Row]:
    data = simlab.datasets.lynx_hare()
    ts, observations = np.asarray(data.ts), np.asarray(data.observations)
    start = time.perf_counter()
    result = _simlab_multistart(data)
    first_seconds = time.perf_counter() - start
    initial = np.stack([np.asarray(result.starts.initial[p]) for p in PARAMS], axis=1)
    subset = initial[::STRIDE]
    scipy_results = []

    def scipy_loop():
        scipy_results[:] = [_scipy_fit(theta0, ts, observations) for theta0 in subset]

    # Interleaved rounds (one warm-up each: simlab's first call compiled already).
    best = best_seconds(
        {"simlab": lambda: _simlab_multistart(data).loss, "scipy": scipy_loop}, repeats=2
    )
    simlab_seconds = best["simlab"]
    scipy_seconds = best["scipy"] * NUM_STARTS / len(subset)
    scipy_losses = np.asarray([r.cost for r in scipy_results])
    simlab_losses = np.asarray(result.starts.loss)[::STRIDE]
    best = float(result.loss)
    found = int(np.sum(np.asarray(result.starts.loss) <= best * (1 + 1e-4)))
    agree = int(np.sum(np.abs(simlab_losses - scipy_losses) <= 1e-3 * best))
    no_worse = int(np.sum(simlab_losses <= scipy_losses + 1e-3 * best))
    return [
        Row(
            f"fit multi-start, {NUM_STARTS} starts: scipy loop / simlab vmapped",
            scipy_seconds / simlab_seconds,
            ">= 50x",
            f"{scipy_seconds:.1f} s (from {len(subset)} starts, scaled) vs {simlab_seconds:.1f} s "
            f"(first call {first_seconds:.0f} s); "
            f"best loss {best:.6g} found by {found} starts; {agree}/{len(subset)} subset starts "
            f"end at the same loss on both sides, {no_worse}/{len(subset)} no higher on simlab's; "
            f"subset medians {np.median(simlab_losses):.6g} vs {np.median(scipy_losses):.6g}",
        ),
    ]


if __name__ == "__main__":
    import jax

    jax.config.update("jax_enable_x64", True)
    for row in rows():
        print(row)
