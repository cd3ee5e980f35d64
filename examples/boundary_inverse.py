"""Recover a wall's temperature history from three thermometers inside a rod.

The left end of a rod is held at a temperature that changes in time (piecewise linear
between five knots, unknown); the right end is insulated. Three sensors inside the rod
record the temperature with noise, and `simlab.fit` recovers the five knot values, with
gradients flowing through the solver into the boundary values
(`simlab.models.BoundaryDriven`).

Run: `python examples/boundary_inverse.py`
"""

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)  # float64 for a well-conditioned fit

import simlab  # noqa: E402
from simlab.models import BoundaryDriven, Heat  # noqa: E402

GRID = simlab.Grid((32,), extent=1.0, boundary=("dirichlet", "neumann"))
DIFFUSIVITY = 0.2
KNOT_TIMES = (0.0, 0.25, 0.5, 0.75, 1.0)
TRUE_WALL = np.array([0.0, 1.0, 0.4, 0.7, 0.5])
SENSORS = np.array([3, 10, 18])  # cell indices: x = 0.11, 0.33, 0.58
TS = jnp.linspace(0.0, 1.0, 41)
NOISE = 0.002
SOLVE = dict(solver="rk4", adaptive=False, dt0=0.0025)


def rod(wall) -> BoundaryDriven:
    return BoundaryDriven(
        Heat(diffusivity=DIFFUSIVITY, grid=GRID),
        values=jnp.asarray(wall)[None],
        sides=((0, "low"),),
        times=KNOT_TIMES,
    )


def observe(y):
    return y[SENSORS]


def synthetic_data(seed: int = 0):
    clean = jax.vmap(observe)(simlab.simulate(rod(TRUE_WALL), jnp.zeros(32), TS, **SOLVE).ys)
    return clean + NOISE * np.random.default_rng(seed).standard_normal(clean.shape)


def recover(observations):
    return simlab.fit(
        rod(np.full(len(KNOT_TIMES), 0.5)),
        TS,
        observations,
        y0=jnp.zeros(32),
        params=["values"],
        observe=observe,
        noise_scale=NOISE,
        simulate_options=SOLVE,
    )


def main():
    result = recover(synthetic_data())
    fitted = np.asarray(result.params["values"])[0]
    stderr = np.asarray(result.stderr["values"])[0]
    print(f"converged: {bool(result.converged)} in {int(result.num_steps)} steps")
    print(f"{'time':>5} {'true T':>7} {'fitted T':>9} {'± stderr':>9}")
    for time, true, value, error in zip(KNOT_TIMES, TRUE_WALL, fitted, stderr, strict=True):
        print(f"{time:>5.2f} {true:>7.3f} {value:>9.3f} {error:>9.3f}")
    return result


if __name__ == "__main__":
    main()
