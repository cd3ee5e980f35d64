"""Starting JAX's distributed runtime for several processes on one machine."""

import socket

import jax


def find_free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now, for the coordinator of a local cluster."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def initialize_local_cluster(*, process_id: int, num_processes: int, port: int) -> None:
    """Joins this process to a cluster of `num_processes` processes on 127.0.0.1.

    Every process calls it with the same `num_processes` and `port` and its own
    `process_id` (0 is the coordinator). Afterwards `jax.devices()` lists the devices of
    all processes, and `simlab.sweep` gives each process its share of every chunk.

    On CPU, JAX needs a collectives implementation for processes to exchange results;
    select gloo *before* this call (and before any computation), in your script:

    ```python
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    ```

    **Arguments:**

    - `process_id`: this process's rank, `0 <= process_id < num_processes`.
    - `num_processes`: how many processes take part.
    - `port`: the coordinator's TCP port on 127.0.0.1 (see
      [`simlab.parallel.find_free_port`][]).

    !!! example

        ```python
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        simlab.parallel.initialize_local_cluster(process_id=rank, num_processes=2, port=port)
        ```
    """
    if not isinstance(num_processes, int) or num_processes < 1:
        raise ValueError(f"num_processes must be a positive integer; got {num_processes!r}.")
    if not isinstance(process_id, int) or not 0 <= process_id < num_processes:
        raise ValueError(
            f"process_id must be an integer in [0, {num_processes}); got {process_id!r}."
        )
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"port must be an integer in (0, 65536); got {port!r}.")
    if jax.config.jax_platforms in (None, "", "cpu") and num_processes > 1:
        implementation = jax.config.jax_cpu_collectives_implementation
        if implementation in (None, "", "none"):
            raise ValueError(
                "processes on CPU need collectives to exchange results; call "
                'jax.config.update("jax_cpu_collectives_implementation", "gloo") in your '
                "script before initialize_local_cluster."
            )
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=num_processes,
        process_id=process_id,
    )
