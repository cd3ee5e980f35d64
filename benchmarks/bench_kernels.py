"""Pallas kernels on the CPU, in interpret mode, against the XLA reference.

The Pallas interpreter exists for correctness: on a CPU it runs each tile as one
iteration of an XLA loop, so these ratios say what the CPU path costs, not what the
kernels gain on a GPU (that is `benchmarks/gpu.sh`). Ratio = XLA time / Pallas time
(above 1: Pallas faster); all float32, timed side by side in this run.
"""

import functools as ft

import jax
import jax.numpy as jnp
from _harness import Row, best_seconds

import simlab
import simlab.kernels as sk

SIZE_2D = 512
SIZE_3D = 64
STEPS = 16
# Gray–Scott through the fused kernel: (D_u, D_v), (F, k) and the model's reaction.
GRAY_SCOTT = dict(
    diffusivities=(0.2, 0.1),
    parameters=(0.035, 0.065),
    reaction_fn=simlab.models.GrayScott.reaction,
)
TARGET = "none (CPU)"


def _field(shape):
    return jax.random.uniform(jax.random.key(0), shape, dtype=jnp.float32)


def _row(name, baseline_fn, pallas_fn, cells, *, baseline="XLA", pallas="Pallas-interpret"):
    """Ratio baseline time / Pallas time, with both rates in the detail."""
    best = best_seconds({"baseline": baseline_fn, "pallas": pallas_fn}, repeats=5)
    baseline_seconds, pallas_seconds = best["baseline"], best["pallas"]
    detail = (
        f"{baseline} {cells / baseline_seconds / 1e9:.3f}, "
        f"{pallas} {cells / pallas_seconds / 1e9:.3f} Gcell/s"
    )
    return Row(name, baseline_seconds / pallas_seconds, TARGET, detail)


def rows() -> list[Row]:
    padded2d = _field((SIZE_2D + 2, SIZE_2D + 2))
    padded3d = _field((SIZE_3D + 2,) * 3)
    state = _field((2, SIZE_2D + 2, SIZE_2D + 2))
    spacing2d, spacing3d = (1.0, 1.0), (1.0, 1.0, 1.0)
    lap2d = jax.jit(lambda p: sk.laplacian2d(p, spacing2d))
    lap2d_xla = jax.jit(lambda p: sk.laplacian2d_reference(p, spacing2d))
    lap3d = jax.jit(lambda p: sk.laplacian3d(p, spacing3d))
    lap3d_xla = jax.jit(lambda p: sk.laplacian3d_reference(p, spacing3d))
    gs = jax.jit(ft.partial(sk.reaction_diffusion, spacing=spacing2d, **GRAY_SCOTT))
    gs_xla = jax.jit(ft.partial(sk.reaction_diffusion_reference, spacing=spacing2d, **GRAY_SCOTT))
    grid = simlab.Grid((SIZE_2D, SIZE_2D), boundary="periodic")
    heat = dict(
        spacing=grid.spacing,
        pad_fn=lambda u, width: simlab.grid.pad(u, grid, width),
        diffusivity=0.2,
        dt=1.0,
        num_steps=STEPS,
    )
    heat_blocked = jax.jit(ft.partial(sk.heat_steps, steps_per_launch=8, **heat))
    heat_single = jax.jit(ft.partial(sk.heat_steps, steps_per_launch=1, **heat))
    heat_xla = jax.jit(ft.partial(sk.heat_steps_reference, **heat))
    field = padded2d[1:-1, 1:-1]
    cells2d, cells3d = SIZE_2D**2, SIZE_3D**3
    return [
        _row(
            f"kernels: laplacian2d {SIZE_2D}² XLA/Pallas-interpret",
            lambda: lap2d_xla(padded2d),
            lambda: lap2d(padded2d),
            cells2d,
        ),
        _row(
            f"kernels: laplacian3d {SIZE_3D}³ XLA/Pallas-interpret",
            lambda: lap3d_xla(padded3d),
            lambda: lap3d(padded3d),
            cells3d,
        ),
        _row(
            f"kernels: gray-scott fused {SIZE_2D}² XLA/Pallas-interpret",
            lambda: gs_xla(state),
            lambda: gs(state),
            cells2d,
        ),
        _row(
            f"kernels: heat {STEPS} steps XLA/Pallas-interpret 8 per launch",
            lambda: heat_xla(field),
            lambda: heat_blocked(field),
            cells2d * STEPS,
            baseline="XLA pad+step",
            pallas="8/launch",
        ),
        _row(
            f"kernels: heat {STEPS} steps, interpret 1/8 per launch",
            lambda: heat_single(field),
            lambda: heat_blocked(field),
            cells2d * STEPS,
            baseline="1/launch",
            pallas="8/launch",
        ),
    ]
