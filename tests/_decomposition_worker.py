"""A Gray–Scott run split over a 2 × 2 mesh, shared by the two-process test and its reference.

Run as a script it is one process of a local cluster:
`python _decomposition_worker.py PROCESS_ID NUM_PROCESSES PORT OUTPUT_DIR`. Each process has
two CPU devices and holds two of the four blocks; the global field is assembled only at the
end (`Decomposed.gather`), and each process saves it for the test to compare.
"""

import sys

import numpy as np

GRID_SHAPE = (16, 12)
MESH_SHAPE = (2, 2)
TS = np.linspace(0.0, 20.0, 3)


def gray_scott_problem(mesh=None):
    """The model (split over `mesh` when given) and its global initial state, as NumPy."""
    from helpers import GRAY_SCOTT_PARAMETERS

    import simlab
    from simlab.decomposition import Decomposed

    grid = simlab.Grid(
        GRID_SHAPE, extent=(16.0, 12.0), boundary=["periodic", (simlab.Dirichlet(1.0), "neumann")]
    )
    model = simlab.models.GrayScott(**GRAY_SCOTT_PARAMETERS, grid=grid)
    x, y = (np.asarray(c) for c in grid.mesh())
    seed = np.exp(-((x - 6.0) ** 2 + (y - 5.0) ** 2) / 4.0)
    y0 = np.stack([1.0 - 0.5 * seed, 0.25 * seed + 0.01 * np.sin(x)])
    return (model if mesh is None else Decomposed(model, mesh)), y0


def solve(model, y0):
    """The saved states and the success flag, jitted: a state spanning processes has no
    host value for simulate's eager checks to read."""
    import equinox as eqx

    import simlab

    @eqx.filter_jit
    def run(model, y0):
        trajectory = simlab.simulate(model, y0, TS, throw=False, rtol=1e-8, atol=1e-10)
        return trajectory.ys, trajectory.succeeded

    return run(model, y0)


def main(process_id: int, num_processes: int, port: int, output_dir: str) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_num_cpu_devices", 2)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    import simlab.parallel
    from simlab.decomposition import decomposition_mesh

    simlab.parallel.initialize_local_cluster(
        process_id=process_id, num_processes=num_processes, port=port
    )
    model, y0 = gray_scott_problem(decomposition_mesh(MESH_SHAPE))
    ys, succeeded = solve(model, model.shard(y0))
    np.savez(
        f"{output_dir}/process_{process_id}.npz",
        ys=model.gather(ys),
        succeeded=model.gather(succeeded),
        spec=str(ys.sharding.spec),
        num_local_blocks=len(ys.addressable_shards),
        num_devices=len(jax.devices()),
    )
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
