"""All-pairs gravity for N = 8,192 bodies in float32: the Pallas kernel against XLA; and
a Lennard-Jones liquid of N = 4,096 through cell and Verlet lists, against all pairs and
against JAX-MD.

On a CPU the kernel runs in the Pallas interpreter, so the ratio says what interpreting
costs, not what a GPU gains; the row is "reported", without a target. The same program is
exported for a GPU (Triton) in the same run, and its size is reported: it must lower.

The Lennard-Jones rows: the liquid near its triple point (density 0.8442, temperature
0.72, cutoff 2.5 sigma) in float32, starting from a simple cubic lattice. One force from a
cell list built afresh against all pairs through XLA; and 100 velocity Verlet steps with a
Verlet list (skin 0.5, rebuilt when a particle has moved half of it) against JAX-MD's
`simulate.nve` with its neighbour list, run in the interpreter named by the environment
variable `JAXMD_PYTHON` when jax-md is not importable here (the row is skipped otherwise).
"""

import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
from _harness import Row, best_seconds

import simlab.kernels as sk

BODIES = 8192
GRAVITY = (1.0, 0.01)  # G, softening

PARTICLES, DENSITY, TEMPERATURE = 4096, 0.8442, 0.72
LENNARD_JONES = (1.0, 1.0)  # epsilon, sigma
CUTOFF, SKIN, DT, STEPS = 2.5, 0.5, 0.005, 100


def _forces(impl):
    def forces(positions, masses):
        return impl(positions, masses, GRAVITY, pair_scale=sk.gravity_scale)

    return jax.jit(forces)


def _exported_for_gpu() -> int:
    """The length of the CUDA module's text (Triton's kernel inside)."""
    arguments = (
        jax.ShapeDtypeStruct((BODIES, 3), jnp.float32),
        jax.ShapeDtypeStruct((BODIES,), jnp.float32),
    )
    allow = [jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")]
    exported = jax.export.export(_forces(sk.pair_forces), platforms=["cuda"], disabled_checks=allow)
    text = exported(*arguments).mlir_module()
    assert "xla.gpu.triton" in text
    return len(text)


def _liquid() -> tuple[float, jax.Array, jax.Array]:
    """The box, and positions on a simple cubic lattice and Maxwell velocities, float32."""
    box = (PARTICLES / DENSITY) ** (1 / 3)
    side = round(PARTICLES ** (1 / 3))
    lattice = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)
    positions = jnp.asarray((lattice + 0.5) * box / side, jnp.float32)
    velocities = math.sqrt(TEMPERATURE) * jax.random.normal(
        jax.random.key(1), positions.shape, jnp.float32
    )
    return box, positions, velocities - jnp.mean(velocities, axis=0)


def _lennard_jones_forces(box: float, grid: sk.CellGrid):
    def all_pairs(positions):
        return sk.pair_forces_reference(
            positions,
            jnp.float32(1.0),
            LENNARD_JONES,
            pair_scale=sk.lennard_jones_scale,
            cutoff=CUTOFF,
            box=box,
        )

    def cells(positions):
        return sk.cell_pair_forces(
            positions,
            1.0,
            LENNARD_JONES,
            pair_scale=sk.lennard_jones_scale,
            cutoff=CUTOFF,
            box=box,
            grid=grid,
        )

    return jax.jit(all_pairs), jax.jit(cells)


def _verlet_steps(box: float, max_neighbours: int):
    """`STEPS` velocity Verlet steps with a Verlet list kept in the loop's state."""
    radius = CUTOFF + SKIN
    grid = sk.cell_grid(box, radius, PARTICLES)

    def forces(positions, neighbours):
        return sk.neighbour_pair_forces(
            positions,
            neighbours,
            1.0,
            LENNARD_JONES,
            pair_scale=sk.lennard_jones_scale,
            cutoff=CUTOFF,
            box=box,
        )

    def rebuilt(positions, *_):
        built = sk.neighbour_list(positions, box, grid, radius, max_neighbours)
        return built.indices, positions, built.overflow, jnp.int32(1)

    def kept(positions, neighbours, reference, overflow):
        return neighbours, reference, overflow, jnp.int32(0)

    def step(carry, _):
        positions, velocities, force, neighbours, reference, overflow, rebuilds = carry
        velocities = velocities + 0.5 * DT * force
        positions = (positions + DT * velocities) % box
        moved = positions - reference
        moved = moved - box * jnp.round(moved / box)
        stale = jnp.max(jnp.sum(moved * moved, axis=1)) > (SKIN / 2) ** 2
        neighbours, reference, overflow, rebuild = jax.lax.cond(
            stale, rebuilt, kept, positions, neighbours, reference, overflow
        )
        force = forces(positions, neighbours)
        velocities = velocities + 0.5 * DT * force
        carry = (positions, velocities, force, neighbours, reference, overflow, rebuilds + rebuild)
        return carry, None

    @jax.jit
    def run(positions, velocities):
        neighbours, reference, overflow, _ = rebuilt(positions)
        carry = (positions, velocities, forces(positions, neighbours), neighbours, reference)
        carry, _ = jax.lax.scan(step, (*carry, overflow, jnp.int32(0)), length=STEPS)
        return carry

    return run


def _jaxmd_seconds_per_step(box: float, positions: jax.Array) -> float | None:
    """JAX-MD's seconds per step, or `None` where no interpreter has jax-md."""
    python = (
        sys.executable if importlib.util.find_spec("jax_md") else os.environ.get("JAXMD_PYTHON")
    )
    if python is None or not pathlib.Path(python).exists():
        return None
    with tempfile.TemporaryDirectory() as folder:
        np.save(pathlib.Path(folder) / "positions.npy", np.asarray(positions))
        settings = dict(
            positions=str(pathlib.Path(folder) / "positions.npy"),
            box=box,
            cutoff=CUTOFF,
            skin=SKIN,
            dt=DT,
            temperature=TEMPERATURE,
            steps=STEPS,
            repeats=5,
            format="OrderedSparse",  # JAX-MD's default, the faster of its formats here
        )
        (pathlib.Path(folder) / "settings.json").write_text(json.dumps(settings))
        script = pathlib.Path(__file__).with_name("_jaxmd_lennard_jones.py")
        result = subprocess.run(
            [python, str(script), str(pathlib.Path(folder) / "settings.json")],
            capture_output=True,
            text=True,
            check=True,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        )
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert not measured["overflow"], "JAX-MD's neighbour list overflowed"
    return measured["seconds_per_step"]


def _lennard_jones_rows() -> list[Row]:
    box, positions, velocities = _liquid()
    grid = sk.cell_grid(box, CUTOFF, PARTICLES, positions=positions)
    all_pairs, cells = _lennard_jones_forces(box, grid)
    np.testing.assert_allclose(cells(positions), all_pairs(positions), rtol=1e-4, atol=1e-4)
    # Room for the neighbours of the densest particle, with a quarter to spare.
    nearest = (4 / 3) * math.pi * (CUTOFF + SKIN) ** 3 * DENSITY
    run = _verlet_steps(box, math.ceil(1.25 * nearest))
    times = best_seconds(
        {
            "all pairs": lambda: all_pairs(positions),
            "cells": lambda: cells(positions),
            "verlet": lambda: run(positions, velocities),
        },
        repeats=5,
    )
    final = run(positions, velocities)
    assert not final[5], "the Verlet list overflowed"
    # The list kept through the steps still gives every pair within the cutoff.
    np.testing.assert_allclose(final[2], all_pairs(final[0]), rtol=1e-3, atol=1e-3)
    per_step = times["verlet"] / STEPS
    rows = [
        Row(
            "pairs: LJ N=4096 force, all pairs XLA / cell list time",
            times["all pairs"] / times["cells"],
            "reported",
            f"cells {times['cells'] * 1e3:.0f} ms ({grid.per_side}³ cells of "
            f"{grid.capacity}), all pairs {times['all pairs'] * 1e3:.0f} ms",
        )
    ]
    jaxmd = _jaxmd_seconds_per_step(box, positions)
    detail = f"simlab {per_step * 1e3:.2f} ms/step, {int(final[6])} rebuilds in {STEPS} steps"
    if jaxmd is None:
        print(
            "  (pairs: JAX-MD row skipped: jax-md is not importable here and "
            "JAXMD_PYTHON names no interpreter)"
        )
        return rows
    return rows + [
        Row(
            "pairs: LJ N=4096 Verlet step, JAX-MD / simlab time",
            jaxmd / per_step,
            ">= 1x",
            f"{detail}; JAX-MD {jaxmd * 1e3:.2f} ms/step",
        )
    ]


def rows() -> list[Row]:
    keys = jax.random.split(jax.random.key(0))
    positions = jax.random.normal(keys[0], (BODIES, 3), jnp.float32)
    masses = jax.random.uniform(keys[1], (BODIES,), jnp.float32) / BODIES
    pallas, xla = _forces(sk.pair_forces), _forces(sk.pair_forces_reference)
    np.testing.assert_allclose(
        pallas(positions, masses), xla(positions, masses), rtol=2e-3, atol=1e-3
    )
    times = best_seconds(
        {"pallas": lambda: pallas(positions, masses), "xla": lambda: xla(positions, masses)},
        repeats=3,
    )
    return [
        Row(
            "pairs: gravity N=8192, Pallas (interpreted) / XLA time",
            times["pallas"] / times["xla"],
            "reported",
            f"XLA {times['xla'] * 1e3:.0f} ms; exported for cuda (Triton), "
            f"{_exported_for_gpu()} characters",
        )
    ] + _lennard_jones_rows()


if __name__ == "__main__":
    for row in rows():
        print(row)
