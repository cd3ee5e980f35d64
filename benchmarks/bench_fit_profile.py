"""Profile likelihoods of the four lynx–hare rates, 50 refits each: simlab's vmapped refits
against a loop of `scipy.optimize.least_squares` with the profiled rate fixed.

Same fit (½ Σ (model − data)², y0 fixed at the first record, a fitted noise scale, so the
profile is $\\tfrac N2 \\log(2\\,\\mathrm{loss})$ relative to the optimum), same grid (simlab's,
±4 standard errors in log), same warm start (every refit starts from simlab's optimum),
same ODE tolerances: simlab's Levenberg–Marquardt with forward-mode Jacobians through
its Tsit5 loop, all of a parameter's refits in one compiled program; SciPy's
trust-region reflective with finite differences on `solve_ivp` (RK45), one refit after
another, on every `STRIDE`-th grid point, scaled to all of them.
"""

import numpy as np
from _harness import Row, best_seconds
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares

import simlab

PARAMS = ["alpha", "beta", "gamma", "delta"]
START = (0.5, 0.02, 0.8, 0.02)
NUM_POINTS = 51  # the estimate and 50 refits
STRIDE = 5
RTOL, ATOL = 1e-6, 1e-9  # simlab.simulate's defaults, used by both sides


def _simlab_fit(data):
    start = simlab.models.LotkaVolterra(**dict(zip(PARAMS, START, strict=True)))
    return simlab.fit(start, data.ts, data.observations, y0=data.observations[0], params=PARAMS)


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


def _scipy_profile_point(index, value, optimum, ts, observations):
    """The least loss with parameter `index` fixed at `value`, from the optimum."""
    free = [i for i in range(len(PARAMS)) if i != index]

    def residuals(x):
        theta = np.array(optimum, dtype=float)
        theta[free] = x
        theta[index] = value
        return _residuals(theta, ts, observations)

    found = least_squares(residuals, np.asarray(optimum)[free], bounds=(0, np.inf), x_scale="jac")
    return found.cost


def rows() -> list[Row]:
    data = simlab.datasets.lynx_hare()
    ts, observations = np.asarray(data.ts), np.asarray(data.observations)
    result = _simlab_fit(data)
    optimum = [float(result.params[p]) for p in PARAMS]
    profiles = result.profile(PARAMS, num_points=NUM_POINTS)
    grids = {p: np.asarray(profiles[p].values) for p in PARAMS}
    subset = {
        p: [i for i in range(NUM_POINTS) if i % STRIDE == 0 and i != NUM_POINTS // 2]
        for p in PARAMS
    }
    scipy_costs: dict[str, list[float]] = {}

    def scipy_profiles():
        for k, p in enumerate(PARAMS):
            scipy_costs[p] = [
                _scipy_profile_point(k, grids[p][i], optimum, ts, observations) for i in subset[p]
            ]

    def simlab_profiles():
        return [profile.nll for profile in result.profile(PARAMS, num_points=NUM_POINTS).values()]

    best = best_seconds({"simlab": simlab_profiles, "scipy": scipy_profiles}, repeats=2)
    num_scipy = sum(len(s) for s in subset.values())
    scipy_seconds = best["scipy"] * len(PARAMS) * (NUM_POINTS - 1) / num_scipy
    # The profile N/2·log(2·loss) − its value at the optimum, on both sides.
    half_n = 0.5 * int(result.num_observed)
    loss_hat = float(result.loss)
    worst, converged = 0.0, 0
    for p in PARAMS:
        simlab_nll = np.asarray(profiles[p].nll)[subset[p]]
        scipy_nll = half_n * np.log(np.asarray(scipy_costs[p]) / loss_hat)
        worst = max(worst, float(np.max(np.abs(simlab_nll - scipy_nll))))
        converged += int(np.sum(np.asarray(profiles[p].converged)))
    threshold = float(profiles[PARAMS[0]].threshold)
    return [
        Row(
            f"fit profiles, {len(PARAMS)} params x {NUM_POINTS - 1} points: scipy loop / simlab",
            scipy_seconds / best["simlab"],
            ">= 50x",
            f"{scipy_seconds:.1f} s (from {num_scipy} refits, scaled) vs "
            f"{best['simlab']:.2f} s; profile values agree within {worst:.2g} "
            f"(threshold {threshold:.3g}) on the {num_scipy} shared points; "
            f"{converged}/{len(PARAMS) * NUM_POINTS} simlab refits converged",
        ),
    ]


if __name__ == "__main__":
    import jax

    jax.config.update("jax_enable_x64", True)
    for row in rows():
        print(row)
