"""`simulate` against scipy, batched against a loop, and the cost of a gradient."""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
from _harness import Row, best_seconds

import simlab

RTOL = ATOL = 1e-8
TS = jnp.linspace(0.0, 1.0, 11)
Y0 = jnp.array([1.0, 1.0, 1.0])
BATCH = 1024
SCIPY_SAMPLE = 64  # solve_ivp loops are timed on a sample and scaled to the batch


def _lorenz(rho):
    return simlab.models.Lorenz(sigma=10.0, rho=rho, beta=8 / 3)


@jax.jit
def _solve(rho):
    return simlab.simulate(_lorenz(rho), Y0, TS, rtol=RTOL, atol=ATOL).ys


_solve_batch = jax.jit(jax.vmap(_solve))


@jax.jit
def _loss(rho):
    return jnp.sum(_solve(rho)[-1] ** 2)


_value_and_grad = jax.jit(jax.value_and_grad(_loss))


def _scipy_solve(rho: float) -> np.ndarray:
    def vector_field(t, y):
        return [10.0 * (y[1] - y[0]), y[0] * (rho - y[2]) - y[1], y[0] * y[1] - 8 / 3 * y[2]]

    return scipy.integrate.solve_ivp(
        vector_field,
        (0.0, 1.0),
        np.ones(3),
        method="RK45",
        t_eval=np.asarray(TS),
        rtol=RTOL,
        atol=ATOL,
    ).y


def rows() -> list[Row]:
    rho = jnp.asarray(28.0)
    rhos = jnp.linspace(20.0, 30.0, BATCH)
    # The SciPy loop runs on every (BATCH // SCIPY_SAMPLE)-th member, spanning the range.
    sample = [float(value) for value in np.asarray(rhos[:: BATCH // SCIPY_SAMPLE])]
    best = best_seconds(
        {
            "one simlab": lambda: _solve(rho),
            "one scipy": lambda: _scipy_solve(28.0),
            "batch simlab": lambda: _solve_batch(rhos),
            "batch scipy": lambda: [_scipy_solve(value) for value in sample],
            "forward": lambda: _loss(rho),
            "gradient": lambda: _value_and_grad(rho),
        },
        repeats=5,
    )
    one_simlab, one_scipy = best["one simlab"], best["one scipy"]
    batch_simlab = best["batch simlab"]
    batch_scipy = best["batch scipy"] * BATCH / len(sample)
    forward, gradient = best["forward"], best["gradient"]
    return [
        Row(
            "simulate: 1 Lorenz solve, speed-up vs solve_ivp RK45",
            one_scipy / one_simlab,
            ">= 1x",
            f"{one_simlab * 1e3:.2f} ms vs {one_scipy * 1e3:.2f} ms",
        ),
        Row(
            f"simulate: {BATCH} vmapped Lorenz, speed-up vs solve_ivp loop",
            batch_scipy / batch_simlab,
            ">= 100x",
            f"{batch_simlab * 1e3:.0f} ms vs {batch_scipy * 1e3:.0f} ms "
            f"(loop timed on {SCIPY_SAMPLE}, scaled)",
        ),
        Row(
            "simulate: value_and_grad / forward (reverse mode)",
            gradient / forward,
            "<= 5",
            f"{gradient * 1e3:.2f} ms vs {forward * 1e3:.2f} ms",
        ),
    ]
