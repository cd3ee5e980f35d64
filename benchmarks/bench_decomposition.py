"""A grid split over 2 devices with shard_map halo exchange, against 1 device and GSPMD.

The same fixed-step RK4 heat solve three ways, timed side by side: the plain model on one
device; `Decomposed` (blocks plus ppermute halos) on two; and the plain single-device code
with its state sharded over the same two devices, leaving XLA's automatic partitioner
(GSPMD/Shardy) to work out the communication.
"""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
from _harness import Row, best_seconds
from jax.sharding import NamedSharding, PartitionSpec

import simlab
from simlab.decomposition import Decomposed, decomposition_mesh

GRID_SHAPE = (1024, 512)
NUM_STEPS = 20
DT = 1e-5


@eqx.filter_jit
def _final_state(model, y0):
    ts = jnp.array([0.0, NUM_STEPS * DT])
    trajectory = simlab.simulate(model, y0, ts, solver="rk4", adaptive=False, dt0=DT, throw=False)
    return trajectory.ys[-1]


def _halo_traffic(model, y0) -> str:
    """The collective-permutes in the compiled solve: how many, and the bytes they move."""
    compiled = jax.jit(_final_state).lower(model, y0).compile().as_text()
    shapes = re.findall(r"= (\w+)\[([\d,]*)\]\{[^}]*\} collective-permute\(", compiled)
    itemsize = {"f64": 8, "f32": 4}
    total = sum(itemsize[dtype] * _num_elements(dims) for dtype, dims in shapes)
    return f"{len(shapes)} collective-permutes, {total} B"


def _num_elements(dims: str) -> int:
    size = 1
    for dim in filter(None, dims.split(",")):
        size *= int(dim)
    return size


def _problem():
    grid = simlab.Grid(GRID_SHAPE, extent=(2.0, 1.0), boundary=["periodic", "neumann"])
    x, y = grid.mesh()
    y0 = jnp.sin(2 * jnp.pi * x) * jnp.cos(jnp.pi * y) + jnp.exp(-50 * (x - 1) ** 2)
    return simlab.models.Heat(diffusivity=0.5, grid=grid), y0


def rows() -> list[Row]:
    model, y0 = _problem()
    mesh = decomposition_mesh((2,), devices=jax.devices()[:2])
    decomposed = Decomposed(model, mesh)
    one_device_y0 = jax.device_put(y0, jax.devices()[0])
    sharded_y0 = decomposed.shard(y0)
    auto_sharded_y0 = jax.device_put(y0, NamedSharding(mesh, PartitionSpec("x")))

    best = best_seconds(
        {
            "one device": lambda: _final_state(model, one_device_y0),
            "halo": lambda: _final_state(decomposed, sharded_y0),
            "automatic": lambda: _final_state(model, auto_sharded_y0),
        },
        repeats=5,
    )
    one_device, halo, automatic = best["one device"], best["halo"], best["automatic"]
    cells = f"{GRID_SHAPE[0]}x{GRID_SHAPE[1]} float64, {NUM_STEPS} RK4 steps"
    traffic = (
        f"halo: {_halo_traffic(decomposed, sharded_y0)}, GSPMD: "
        f"{_halo_traffic(model, auto_sharded_y0)} per right-hand side"
    )
    return [
        Row(
            "decomposition: shard_map halo on 2 devices vs 1 device",
            one_device / halo,
            ">= 1.3x",
            f"{cells}: {1e3 * halo:.1f} ms vs {1e3 * one_device:.1f} ms",
        ),
        Row(
            "decomposition: shard_map halo vs GSPMD auto-sharding, 2 devices",
            automatic / halo,
            ">= 1x",
            f"{cells}: {1e3 * halo:.1f} ms vs {1e3 * automatic:.1f} ms; {traffic}",
        ),
    ]
