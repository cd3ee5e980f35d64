"""`simulate` against scipy, batched against a loop, and the cost of a gradient."""

import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
from _harness import Row, median_seconds

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
    one_simlab = median_seconds(lambda: _solve(rho), repeats=20)
    one_scipy = median_seconds(lambda: _scipy_solve(28.0), repeats=5)
    batch_simlab = median_seconds(lambda: _solve_batch(rhos), repeats=3)
    start = time.perf_counter()
    for value in np.asarray(rhos[:SCIPY_SAMPLE]):
        _scipy_solve(float(value))
    batch_scipy = (time.perf_counter() - start) * BATCH / SCIPY_SAMPLE
    forward = median_seconds(lambda: _loss(rho), repeats=20)
    gradient = median_seconds(lambda: _value_and_grad(rho), repeats=20)
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
