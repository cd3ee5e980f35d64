"""`simlab.sensitivity` against SALib driving a loop of SciPy solves over the same design.

The problem: Sobol' indices (first, total and second order) of the Lotka–Volterra prey
population at t = 20 to its four rates, each varied by ±20% around (0.55, 0.028, 0.84,
0.026), from 2^13 base samples: 2^13 (2·4 + 2) = 81,920 solves, Tsit5 (SciPy: RK45, the
same Dormand–Prince family) at rtol = atol = 1e-8, float64. Both sides use SALib's design
(the same seed) and SALib's estimator; the SciPy loop is timed on a strided subset of the
design and scaled (it is linear in the number of runs). A smaller design (2^8 base samples)
is run in full on both sides to check that the indices agree within their intervals.
"""

import jax
import jax.numpy as jnp
import numpy as np
import SALib.analyze.sobol
import SALib.sample.sobol
import scipy.integrate
from _harness import Row, best_seconds

import simlab

NUM_SAMPLES = 2**13
NUM_CHECK_SAMPLES = 2**8
SCIPY_STRIDE = 128  # time SciPy on every 128th run of the design
TOLERANCE = 1e-8
END_TIME = 20.0
Y0 = np.array([30.0, 4.0])
CENTRE = {"alpha": 0.55, "beta": 0.028, "gamma": 0.84, "delta": 0.026}
RANGES = {name: [0.8 * value, 1.2 * value] for name, value in CENTRE.items()}
PROBLEM = {"num_vars": 4, "names": list(RANGES), "bounds": list(RANGES.values())}
MODEL = simlab.models.LotkaVolterra(**CENTRE)
TS = jnp.array([0.0, END_TIME])


def final_prey(trajectory):
    return {"prey": trajectory.ys[-1, 0]}


def run_simlab(num_samples, key):
    return simlab.sensitivity(
        MODEL,
        RANGES,
        jnp.asarray(Y0),
        TS,
        observable=final_prey,
        num_samples=num_samples,
        key=key,
        solver="tsit5",
        integrator="lean",
        rtol=TOLERANCE,
        atol=TOLERANCE,
        progress=False,
    )


def lotka_volterra(t, y, alpha, beta, gamma, delta):
    prey, predator = y
    return [alpha * prey - beta * prey * predator, delta * prey * predator - gamma * predator]


def scipy_outputs(design):
    return np.array(
        [
            scipy.integrate.solve_ivp(
                lotka_volterra,
                (0.0, END_TIME),
                Y0,
                method="RK45",
                rtol=TOLERANCE,
                atol=TOLERANCE,
                args=tuple(row),
            ).y[0, -1]
            for row in design
        ]
    )


def salib_with_scipy(num_samples, sample_seed, analysis_seed, stride=1):
    """SALib's design, a loop of solve_ivp over (every `stride`-th row of) it, SALib's
    estimator; returns the indices (None when strided) and the outputs."""
    design = SALib.sample.sobol.sample(PROBLEM, num_samples, seed=sample_seed)
    outputs = scipy_outputs(design[::stride])
    indices = None
    if stride == 1:
        indices = SALib.analyze.sobol.analyze(PROBLEM, outputs, seed=analysis_seed)
    return indices, outputs


def rows() -> list[Row]:
    key = jax.random.key(0)
    ours = run_simlab(NUM_SAMPLES, key)
    seeds = ours.attrs["sample_seed"], ours.attrs["analysis_seed"]
    # Both sides by the same statistic: the best of interleaved rounds after a warm-up.
    seconds = best_seconds(
        {
            "simlab": lambda: run_simlab(NUM_SAMPLES, key),
            "scipy": lambda: salib_with_scipy(NUM_SAMPLES, *seeds, stride=SCIPY_STRIDE),
        },
        repeats=2,
    )
    t_simlab, t_scipy = seconds["simlab"], seconds["scipy"] * SCIPY_STRIDE
    _, subset = salib_with_scipy(NUM_SAMPLES, *seeds, stride=SCIPY_STRIDE)
    # The same runs from simlab's sweep: the outputs of the subset, compared.
    design = ours["samples"].values[::SCIPY_STRIDE]
    swept = simlab.sweep(
        MODEL,
        {name: design[:, j] for j, name in enumerate(RANGES)},
        jnp.asarray(Y0),
        TS,
        mode="zip",
        observable=final_prey,
        solver="tsit5",
        integrator="lean",
        rtol=TOLERANCE,
        atol=TOLERANCE,
        progress=False,
    ).observables["prey"]
    output_diff = np.max(np.abs(swept - subset) / np.abs(subset))

    check = run_simlab(NUM_CHECK_SAMPLES, jax.random.key(1))
    reference, _ = salib_with_scipy(
        NUM_CHECK_SAMPLES, check.attrs["sample_seed"], check.attrs["analysis_seed"]
    )
    worst = 0.0
    for measure in ("S1", "ST"):
        difference = np.abs(check[f"prey_{measure}"].values - reference[measure])
        worst = max(worst, float(np.max(difference / reference[f"{measure}_conf"])))
    assert worst < 1.0, f"indices differ by {worst:.2g} of their intervals"
    st = ", ".join(
        f"{n} {v:.3f}±{c:.3f}"
        for n, v, c in zip(RANGES, ours["prey_ST"].values, ours["prey_ST_conf"].values, strict=True)
    )
    return [
        Row(
            "sensitivity: Sobol' 2^13, 4-rate LV vs SALib + solve_ivp",
            t_scipy / t_simlab,
            ">= 100x",
            f"{ours.attrs['num_members']} runs: {t_simlab:.1f} s vs {t_scipy:.0f} s (scaled "
            f"from every {SCIPY_STRIDE}th run); "
            f"outputs differ by {output_diff:.1e}; 2^8 check: |dS| <= {worst:.1e} x interval; "
            f"ST: {st}",
        )
    ]
