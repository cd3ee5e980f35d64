"""Runs the shared small sweep into a store, slowly, so a test can kill it mid-sweep.

`python _resume_worker.py STORE`: prints "written N" after each chunk reaches the store,
then pauses, giving the test time to send SIGKILL between chunks.
"""

import sys
import time


def main(store: str) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_num_cpu_devices", 4)  # as in conftest: the same chunk size
    import _multihost_worker as shared

    from simlab.io import SweepStore

    write_chunk = SweepStore.write_chunk

    def write_chunk_then_pause(self, index, outputs, status):
        write_chunk(self, index, outputs, status)
        print(f"written {index}", flush=True)
        time.sleep(2.0)

    SweepStore.write_chunk = write_chunk_then_pause
    shared.run_sweep(store=store)
    print("finished", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
