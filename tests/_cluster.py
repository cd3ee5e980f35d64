"""Real multi-process runs on 127.0.0.1 for tests: start worker scripts, wait for them."""

import os
import pathlib
import subprocess
import sys

import simlab.parallel

HERE = pathlib.Path(__file__).parent


def start_workers(script: str, output: pathlib.Path, *, num_processes: int = 2):
    """Starts `num_processes` copies of `tests/<script>`, each called with its process id,
    the process count, a free coordinator port and `output`. Each sees only its own CPU
    devices (no inherited XLA_FLAGS), as separate hosts would."""
    port = simlab.parallel.find_free_port()
    environment = {**os.environ, "JAX_PLATFORMS": "cpu"}
    environment.pop("XLA_FLAGS", None)
    return [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / script),
                str(i),
                str(num_processes),
                str(port),
                str(output),
            ],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(num_processes)
    ]


def assert_workers_succeed(processes, *, timeout: float = 240) -> None:
    """Waits for every worker and fails with the tail of the log of any that did not exit 0."""
    for process in processes:
        log, _ = process.communicate(timeout=timeout)
        assert process.returncode == 0, log[-3000:]


def stop_workers(processes) -> None:
    """Kills the workers still running (their test was not selected)."""
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()
