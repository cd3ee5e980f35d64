"""simlab.fit on the lynx–hare records against scipy, and gradient descent against least squares.

The same loss, ½ Σ (model − data)², the same start and the same ODE tolerances on both
sides: simlab's Levenberg–Marquardt with a forward-mode Jacobian through Diffrax (Tsit5),
and `scipy.optimize.least_squares` (trust-region reflective, finite-difference Jacobian)
on a `scipy.integrate.solve_ivp` model (RK45). Both optima are then judged by one tight
solve, so that neither side's discretisation error decides the comparison.
"""

import numpy as np
import optax
from _harness import Row, best_seconds
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares

import simlab

PARAMS = ["alpha", "beta", "gamma", "delta"]
START = (0.5, 0.02, 0.8, 0.02)
RTOL, ATOL = 1e-6, 1e-9  # simlab.simulate's defaults, used by both sides


def _simlab_fit(data, **settings):
    start = simlab.models.LotkaVolterra(**dict(zip(PARAMS, START, strict=True)))
    return simlab.fit(
        start,
        data.ts,
        data.observations,
        y0=data.observations[0],
        params=PARAMS,
        fit_y0=True,
        **settings,
    )


def _vector_field(t, y, alpha, beta, gamma, delta):
    prey, predator = y
    return [alpha * prey - beta * prey * predator, delta * prey * predator - gamma * predator]


def _residuals(theta, data, rtol=RTOL, atol=ATOL, method="RK45"):
    ts, observations = np.asarray(data.ts), np.asarray(data.observations)
    solution = solve_ivp(
        _vector_field,
        (ts[0], ts[-1]),
        theta[4:],
        t_eval=ts,
        args=tuple(theta[:4]),
        rtol=rtol,
        atol=atol,
        method=method,
    )
    if not solution.success:
        return np.full(observations.size, 1e8)
    return (solution.y.T - observations).ravel()


def _scipy_fit(data):
    theta0 = np.array([*START, *np.asarray(data.observations[0])])
    return least_squares(_residuals, theta0, bounds=(0, np.inf), x_scale="jac", args=(data,))


def _judged_loss(theta, data) -> float:
    """The loss at `theta` with a tight, neutral ODE solve: both optima judged alike."""
    return 0.5 * float(np.sum(_residuals(np.asarray(theta), data, 1e-12, 1e-12, "DOP853") ** 2))


def rows() -> list[Row]:
    data = simlab.datasets.lynx_hare()
    simlab_result = _simlab_fit(data)
    scipy_result = _scipy_fit(data)
    best = best_seconds(
        {"simlab": lambda: _simlab_fit(data).loss, "scipy": lambda: _scipy_fit(data)}, repeats=3
    )
    simlab_seconds, scipy_seconds = best["simlab"], best["scipy"]

    simlab_theta = [*(float(simlab_result.params[n]) for n in PARAMS), *simlab_result.y0]
    simlab_loss = _judged_loss(simlab_theta, data)
    scipy_loss = _judged_loss(scipy_result.x, data)
    gradient = _simlab_fit(
        data, method="gradient", optimiser=optax.adam(0.02), max_steps=5000, throw=False
    )
    target_loss = float(simlab_result.loss) * (1 + 1e-3)
    history = np.asarray(gradient.loss_history)
    reached = np.flatnonzero(history <= target_loss)
    gradient_steps = int(reached[0]) if reached.size else np.inf
    return [
        Row(
            "fit lynx-hare: final loss, simlab LM / scipy least_squares",
            simlab_loss / scipy_loss,
            "<= 1.0",
            f"{simlab_loss:.8g} vs {scipy_loss:.8g} (both re-solved at rtol 1e-12)",
        ),
        Row(
            "fit lynx-hare: wall time, scipy / simlab (compiled)",
            scipy_seconds / simlab_seconds,
            ">= 1x",
            f"{scipy_seconds * 1e3:.0f} ms vs {simlab_seconds * 1e3:.0f} ms; "
            f"{int(simlab_result.num_steps)} LM steps, {scipy_result.nfev} scipy evaluations",
        ),
        Row(
            "fit lynx-hare: Adam steps / LM steps to the LM loss (+0.1%)",
            gradient_steps / int(simlab_result.num_steps),
            "> 1",
            f"Adam(0.02): {gradient_steps} steps, LM: {int(simlab_result.num_steps)} steps",
        ),
    ]


if __name__ == "__main__":
    import jax

    jax.config.update("jax_enable_x64", True)
    for row in rows():
        print(row)
