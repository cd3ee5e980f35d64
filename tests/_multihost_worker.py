"""A small sweep shared by the multi-process test and its one-process reference.

Run as a script it is one process of a local cluster:
`python _multihost_worker.py PROCESS_ID NUM_PROCESSES PORT OUTPUT_DIR`. Each process has two
CPU devices and computes its share of every chunk; process 0 writes the store, and every
process saves the result it returns, for the test to compare.
"""

import sys

import numpy as np

PARAMS = {"alpha": np.linspace(0.4, 0.7, 3), "beta": np.array([0.02, 0.025, 0.03])}
Y0 = np.array([30.0, 4.0])
TS = np.linspace(0.0, 4.0, 5)
CHUNK_SIZE = 4  # 9 members: three chunks, the last one padded


def final_state(trajectory):
    return {"final_state": trajectory.ys[-1]}


def run_sweep(**kwargs):
    from helpers import LOTKA_VOLTERRA

    import simlab

    return simlab.sweep(
        LOTKA_VOLTERRA,
        PARAMS,
        Y0,
        TS,
        observable=final_state,
        chunk_size=CHUNK_SIZE,
        progress=False,
        **kwargs,
    )


def main(process_id: int, num_processes: int, port: int, output_dir: str) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_num_cpu_devices", 2)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    import simlab.parallel

    simlab.parallel.initialize_local_cluster(
        process_id=process_id, num_processes=num_processes, port=port
    )
    result = run_sweep(store=f"{output_dir}/store.zarr")
    np.savez(
        f"{output_dir}/process_{process_id}.npz",
        final_state=result.observables["final_state"],
        status=result.status,
        num_devices=len(jax.devices()),
        num_local_devices=len(jax.local_devices()),
    )
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
