"""Block (tile) shapes: a table per backend and kernel, and a small autotuner.

A program computes one output tile and reads it with its halo. Larger tiles reread less
halo and, in interpret mode on a CPU, run fewer loop iterations; on a GPU the tile must
fit the registers of one program (Triton also wants powers of two).
"""

import statistics
import time
from collections.abc import Callable, Sequence

import jax

# (backend, kernel) -> tile. GPU tiles are powers of two (a Triton requirement on loads).
BLOCK_SHAPES: dict[tuple[str, str], tuple[int, ...]] = {
    ("gpu", "laplacian2d"): (32, 128),
    ("gpu", "laplacian3d"): (4, 16, 64),
    ("gpu", "reaction_diffusion"): (16, 128),
    ("gpu", "temporal2d"): (32, 64),
    ("tpu", "laplacian2d"): (256, 512),
    ("tpu", "laplacian3d"): (8, 64, 256),
    ("tpu", "reaction_diffusion"): (256, 256),
    ("tpu", "temporal2d"): (256, 256),
    ("cpu", "laplacian2d"): (256, 256),
    ("cpu", "laplacian3d"): (32, 32, 64),
    ("cpu", "reaction_diffusion"): (256, 256),
    ("cpu", "temporal2d"): (256, 256),
}


def _next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def default_block_shape(kernel: str, spatial_shape: Sequence[int]) -> tuple[int, ...]:
    """The table's tile for the default backend, shrunk to the next power of two above
    each axis of the interior (a 40 × 40 field takes one 64 × 64 tile, not 256 × 256).

    **Arguments:**

    - `kernel`: `"laplacian2d"`, `"laplacian3d"`, `"reaction_diffusion"` or `"temporal2d"`.
    - `spatial_shape`: the interior (unpadded) shape of the field.

    **Returns:** the tile, one entry per spatial axis.

    !!! example

        ```python
        simlab.kernels.default_block_shape("laplacian2d", (40, 1000))  # (64, 256) on a CPU
        ```
    """
    key = (jax.default_backend(), kernel)
    if key not in BLOCK_SHAPES:
        raise ValueError(f"no block shape known for kernel {kernel!r} on {key[0]!r}.")
    return tuple(
        min(b, _next_power_of_two(n)) for b, n in zip(BLOCK_SHAPES[key], spatial_shape, strict=True)
    )


def autotune_block_shape(
    run_fn: Callable[[tuple[int, ...]], object],
    candidates: Sequence[Sequence[int]],
    *,
    repeats: int = 5,
) -> tuple[tuple[int, ...], dict[tuple[int, ...], float]]:
    """Times `run_fn(block_shape)` for each candidate and returns the fastest.

    Each candidate is compiled and run once before timing; the median of `repeats` runs
    counts. Candidates that fail to compile or run (a tile too large for the device) are
    skipped.

    **Arguments:**

    - `run_fn`: runs the kernel with the given tile and returns its (JAX) result; wrap
      it in `jax.jit` so compilation happens once per tile.
    - `candidates`: tiles to try, e.g. `[(16, 128), (32, 128), (64, 64)]`.
    - `repeats`: timed runs per candidate.

    **Returns:** `(best, seconds)`: the fastest tile, and the median time of each tile
    that ran.

    !!! example

        ```python
        run = jax.jit(lambda b: simlab.kernels.laplacian2d(padded, (1.0, 1.0), block_shape=b),
                      static_argnums=0)
        best, seconds = simlab.kernels.autotune_block_shape(run, [(16, 128), (32, 128)])
        ```
    """
    if not candidates:
        raise ValueError("autotune_block_shape needs at least one candidate tile.")
    seconds: dict[tuple[int, ...], float] = {}
    for candidate in candidates:
        candidate = tuple(candidate)
        try:
            jax.block_until_ready(run_fn(candidate))
        except Exception:  # a tile the device cannot take; the others still compete
            continue
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(run_fn(candidate))
            samples.append(time.perf_counter() - start)
        seconds[candidate] = statistics.median(samples)
    if not seconds:
        raise ValueError(f"none of the candidate tiles ran: {list(candidates)}.")
    return min(seconds, key=seconds.__getitem__), seconds
