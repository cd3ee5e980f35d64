"""JAX-MD's Lennard-Jones liquid: velocity Verlet (`simulate.nve`) with its neighbour list
(`energy.lennard_jones_neighbor_list`, the default format), refreshed after every step
and rebuilt when a particle has moved half the skin: the idiom of JAX-MD's examples.

Run by bench_pairs.py in an interpreter that has jax-md, which need not be simlab's:
`python _jaxmd_lennard_jones.py SETTINGS.json` prints the best seconds per step as JSON.
"""

import json
import sys
import time

import jax
import numpy as np
from jax_md import energy, partition, simulate, space


def main(settings_path: str) -> None:
    settings = json.loads(open(settings_path).read())
    positions = jax.numpy.asarray(np.load(settings["positions"]))
    box, steps = settings["box"], settings["steps"]
    displacement, shift = space.periodic(box)
    neighbour_fn, energy_fn = energy.lennard_jones_neighbor_list(
        displacement,
        box,
        r_cutoff=settings["cutoff"],
        dr_threshold=settings["skin"],
        format=partition.NeighborListFormat[settings["format"]],
    )
    init, apply = simulate.nve(energy_fn, shift, dt=settings["dt"])
    neighbours = neighbour_fn.allocate(positions)
    state = init(jax.random.key(0), positions, kT=settings["temperature"], neighbor=neighbours)

    @jax.jit
    def run(state, neighbours):
        def step(_, carry):
            state, neighbours = carry
            state = apply(state, neighbor=neighbours)
            return state, neighbours.update(state.position)

        return jax.lax.fori_loop(0, steps, step, (state, neighbours))

    _, last = jax.block_until_ready(run(state, neighbours))
    best = float("inf")
    for _ in range(settings["repeats"]):
        start = time.perf_counter()
        jax.block_until_ready(run(state, neighbours))
        best = min(best, time.perf_counter() - start)
    overflow = bool(last.did_buffer_overflow)
    print(json.dumps({"seconds_per_step": best / steps, "overflow": overflow}))


if __name__ == "__main__":
    main(sys.argv[1])
