"""The scaling report's HLO parser finds the halo exchanges a decomposed solve compiles to.

A heat equation on a 16 x 8 grid, periodic, split into 2 slabs along axis 0: each
evaluation of the right-hand side fills the low and the high ghost row of each slab by
one collective-permute each (with 2 devices both send to the other, the pairs
{0->1, 1->0} in both). Fixed-step RK4 on simlab's lean loop evaluates the right-hand side
once before the step loop (the first stage, carried from step to step) and 4 times per
step (3 stages and f at the step's end), so its HLO has 2 permutes outside the loop and 8
inside.
"""

import pathlib
import sys

import jax
import jax.numpy as jnp
import pytest

import simlab
from simlab.decomposition import Decomposed, decomposition_mesh

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks"))

from _scaling_model import (  # noqa: E402
    HARDWARE,
    Collective,
    collectives,
    efficiency,
    projected_step_seconds,
    split_by_loop,
)

SHAPE = (16, 8)
ROW_BYTES = SHAPE[1] * 8  # one ghost row of float64


def _halo_model():
    grid = simlab.Grid(SHAPE, extent=1.0, boundary="periodic")
    mesh = decomposition_mesh((2,), devices=jax.devices()[:2])
    model = Decomposed(simlab.models.Heat(diffusivity=0.1, grid=grid), mesh)
    x, y = grid.mesh()
    return model, model.shard(jnp.sin(2 * jnp.pi * x) * jnp.cos(2 * jnp.pi * y))


def _hlo(fn, *args) -> str:
    return jax.jit(fn).lower(*args).compile().as_text()


def test_one_right_hand_side_has_two_permutes_of_one_row():
    model, y0 = _halo_model()
    found = collectives(_hlo(lambda y: model(0.0, y, None), y0))
    assert [c.kind for c in found] == ["collective-permute"] * 2
    assert all(c.num_bytes == ROW_BYTES and not c.in_loop for c in found)


def test_rk4_solve_has_eight_permutes_per_step_and_two_before_the_loop():
    model, y0 = _halo_model()

    def solve(model, y0):
        ts = jnp.array([0.0, 1e-4])
        trajectory = simlab.simulate(
            model, y0, ts, solver="rk4", adaptive=False, dt0=1e-5, throw=False
        )
        return trajectory.ys[-1]

    every_step, once = split_by_loop(collectives(_hlo(solve, model, y0)))
    assert len(every_step) == 8 and len(once) == 2
    assert {c.num_bytes for c in every_step + once} == {ROW_BYTES}


def test_projection_without_collectives_scales_perfectly():
    times = [projected_step_seconds(1e9 / n, [], n, HARDWARE[0]) for n in (1, 2, 4)]
    assert efficiency(times, [1, 2, 4], weak=False) == pytest.approx([1.0, 1.0, 1.0])


def test_tuple_results_add_up_and_asynchronous_collectives_are_refused():
    text = "  %r = (f32[2]{0}, f64[3]{0}) all-reduce(%a, %b), to_apply=%add"
    assert collectives(text) == [Collective("all-reduce", 2 * 4 + 3 * 8, in_loop=False)]
    with pytest.raises(ValueError, match="asynchronous"):
        collectives("  %s = (f32[1]{0}, f32[1]{0}) collective-permute-start(%x)")
