"""PhiFlow's lid-driven cavity on its staggered grid, the scheme of its fluid demos:
`advect.semi_lagrangian` (first order), `diffuse.explicit` in substeps within its stable
bound, and `fluid.make_incompressible` (a conjugate-gradient pressure solve warm-started
from the last pressure), on the jax backend (`phi.jax.flow`) in float64, each step
`math.jit_compile`d.

Run by bench_walled_flow.py in an interpreter that has phiflow, which need not be
simlab's: `python _phiflow_cavity.py SETTINGS_JSON` prints as JSON the seconds of the march
from rest to `end` (after two compiling steps), the first call's seconds, the step, and
the u-velocity on the vertical centreline at `end` and at `end - 5`.
"""

import json
import math as builtin_math
import sys
import time

import numpy as np
from phi.jax.flow import (
    Box,
    CenteredGrid,
    Solve,
    StaggeredGrid,
    advect,
    diffuse,
    extrapolation,
    fluid,
    jit_compile,
    math,
    vec,
)

EXPLICIT_DIFFUSION_BOUND = 0.25  # nu dt / dx² of forward Euler on the 5-point Laplacian


def _stepper(viscosity: float, dt: float, substeps: int, tolerance: float):
    @jit_compile
    def step(velocity, pressure):
        velocity = advect.semi_lagrangian(velocity, velocity, dt)
        velocity = diffuse.explicit(velocity, viscosity, dt, substeps=substeps)
        solve = Solve("CG", tolerance, tolerance, x0=pressure, max_iterations=100_000)
        return fluid.make_incompressible(velocity, (), solve)

    return step


def _centreline_u(velocity, size: int) -> list[float]:
    """u on the faces at x = 1/2 (face column size/2 - 1 of the interior faces), against y."""
    return velocity.vector["x"].values.numpy("x,y")[size // 2 - 1].tolist()


def main(settings: dict) -> None:
    math.set_global_precision(64)
    size, reynolds, end = settings["size"], settings["reynolds"], settings["end"]
    spacing, viscosity = 1.0 / size, 1.0 / reynolds  # unit box, unit lid speed
    dt = settings["courant"] * spacing
    substeps = builtin_math.ceil(viscosity * dt / spacing**2 / EXPLICIT_DIFFUSION_BOUND)
    steps = builtin_math.ceil(end / dt)
    walls = {"x": 0, "y-": 0, "y+": vec(x=1.0, y=0.0)}
    velocity0 = StaggeredGrid(0, walls, x=size, y=size, bounds=Box(x=1, y=1))
    pressure0 = CenteredGrid(0, extrapolation.BOUNDARY, x=size, y=size, bounds=Box(x=1, y=1))
    step = _stepper(viscosity, dt, substeps, settings["tolerance"])

    start = time.perf_counter()
    step(*step(velocity0, pressure0))  # compiles for both pressure layouts it will see
    compiled = time.perf_counter()
    velocity, pressure = velocity0, pressure0
    for n in range(1, steps + 1):
        velocity, pressure = step(velocity, pressure)
        if n == steps - round(5.0 / dt):
            earlier = _centreline_u(velocity, size)
    final = _centreline_u(velocity, size)  # copying to NumPy waits for the device
    seconds = time.perf_counter() - compiled
    y = ((0.5 + np.arange(size)) * spacing).tolist()
    print(
        json.dumps(
            dict(
                seconds=seconds,
                first_call=compiled - start,
                dt=dt,
                steps=steps,
                substeps=substeps,
                y=y,
                u=final,
                u_earlier=earlier,
            )
        )
    )


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
