"""Models that many test files build, with the parameters they share, a small experiment
file for the tests of the `simlab` command, and a count of the collectives in compiled HLO."""

import contextlib
import re

import equinox as eqx
import jax
import jaxtyping
import numpy as np
import scipy.integrate

import simlab

LOTKA_VOLTERRA_PARAMETERS = dict(alpha=0.55, beta=0.028, gamma=0.84, delta=0.026)
LOTKA_VOLTERRA = simlab.models.LotkaVolterra(**LOTKA_VOLTERRA_PARAMETERS)

GRAY_SCOTT_PARAMETERS = dict(feed_rate=0.035, kill_rate=0.065, diffusivity_u=0.2, diffusivity_v=0.1)


def robertson_scipy_reference(ts) -> np.ndarray:
    """Robertson's reaction (simlab.models.Robertson's default rates) from [1, 0, 0] at
    `ts[0]`, by SciPy's Radau at rtol 1e-12: the states at `ts`, shape `(len(ts), 3)`."""

    def rober(t, y):
        return [
            -0.04 * y[0] + 1e4 * y[1] * y[2],
            0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
            3e7 * y[1] ** 2,
        ]

    ts = np.asarray(ts)
    solution = scipy.integrate.solve_ivp(
        rober, (ts[0], ts[-1]), [1.0, 0.0, 0.0], method="Radau", t_eval=ts,
        rtol=1e-12, atol=1e-20,
    )  # fmt: skip
    assert solution.success
    return solution.y.T


def lorenz(rho: float = 28.0) -> simlab.models.Lorenz:
    """Lorenz's system with $\\sigma = 10$, $\\beta = 8/3$; the default $\\rho = 28$ is chaotic."""
    return simlab.models.Lorenz(sigma=10.0, rho=rho, beta=8 / 3)


LORENZ = lorenz()


def with_dtype(model, dtype):
    """`model` with its floating-point parameters cast to `dtype`.

    Under strict dtype promotion a float32 state needs float32 parameters.
    """
    return jax.tree.map(lambda x: x.astype(dtype) if eqx.is_inexact_array(x) else x, model)


@contextlib.contextmanager
def without_type_checks():
    """Switches off jaxtyping's runtime checks, to reach the library's own validation of wrongly
    typed input, which is what callers who do not run those checks meet."""
    previous = jaxtyping.config.jaxtyping_disable
    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        jaxtyping.config.update("jaxtyping_disable", previous)


# A small pendulum sweep: one simulation, a two-member sweep, two figures.
SMALL_TOML = """
description = "a small pendulum sweep"

[model]
name = "DampedPendulum"
parameters = { length = 1.0, damping = 0.5 }

[initial_state]
angle = 0.0
angular_velocity = 3.0

[time]
stop = 5.0
num_points = 11

[sweep]
parameters.damping = { values = [0.5, 1.0] }

[[figures]]
kind = "sweep_lines"
variable = "final_angle"

[[figures]]
kind = "phase_portrait"
"""


def collectives_by_loop_depth(hlo_text: str) -> dict[str, list[int]]:
    """Each collective's kind and how many loops enclose it (JAX names an operation of a
    loop body `.../while/body/...`)."""
    found: dict[str, list[int]] = {}
    kinds = "all-to-all|collective-permute|all-reduce|all-gather|reduce-scatter"
    for line in hlo_text.splitlines():
        kind = re.search(rf" ({kinds})\(", line)
        if kind:
            name = re.search(r'op_name="([^"]*)"', line)
            found.setdefault(kind.group(1), []).append(name.group(1).count("while/body"))
    return found
