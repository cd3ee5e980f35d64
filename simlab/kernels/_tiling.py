"""Tiles: a table per target and kernel, fitted to what each compiler takes, and a small
autotuner.

A program computes one output tile from a window of the padded input: the tile plus its
halo. Larger tiles reread less halo; each target bounds them:

- `"interpret"` (the Pallas interpreter, the CPU path): nothing; larger tiles mean fewer
  loop iterations.
- `"triton"`: every load and store is a power of two in size, and a tile fits the
  registers of one program. A temporally blocked launch computes each step on a
  power-of-two region and keeps the state between steps in a scratch buffer.
- `"mosaic_gpu"`: the window and the tile live in shared memory (227 KiB per block on an
  H100 or H200) and are copied by the TMA: at most 256 cells per axis, rows a multiple of
  16 bytes, whole copies a multiple of 128 bytes; a register array is a multiple of 128
  values (one per thread of the warpgroup). Windows are rounded up to those units.
- `"tpu"`: the last two axes of every block are multiples of 8 and 128, or the whole axis
  (Mosaic's (8, 128) tiling); windows are rounded up to that tiling and the halo is
  reached by rotating them, and the blocks, double-buffered, and the kernel's
  temporaries fit the scoped VMEM. Values are 32 bits or fewer.
"""

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Literal

import jax

Target = Literal["interpret", "triton", "mosaic_gpu", "tpu"]
TARGETS: tuple[Target, ...] = ("interpret", "triton", "mosaic_gpu", "tpu")
KERNELS = ("laplacian2d", "laplacian3d", "reaction_diffusion", "temporal2d", "mac_momentum")

# (target, kernel) -> tile. Triton and Mosaic GPU tiles are powers of two; Mosaic TPU
# tiles are multiples of (8, 128) on their last two axes, the 2-D ones measured on a TPU v5e
# at 8192² (benchmarks/results/tpu.txt, "tiles"): wide rows reread little halo per lane.
# The Laplacian's tiles from (64, 2048) to (512, 2048) all ran within 6 % of the copy
# bandwidth once its windows read past the end; (128, 8192) keeps small grids in several
# programs, so that their copies overlap. Heat at 8 steps a launch: 68.6 Gcell/s with
# (128, 2048), 57.1 with (256, 256), whose windows compute 1.6 times the tile.
BLOCK_SHAPES: dict[tuple[str, str], tuple[int, ...]] = {
    ("interpret", "laplacian2d"): (256, 256),
    ("interpret", "laplacian3d"): (32, 32, 64),
    ("interpret", "reaction_diffusion"): (256, 256),
    ("interpret", "temporal2d"): (256, 256),
    ("interpret", "mac_momentum"): (256, 256),
    ("triton", "laplacian2d"): (32, 128),
    ("triton", "laplacian3d"): (4, 16, 64),
    ("triton", "reaction_diffusion"): (16, 128),
    ("triton", "temporal2d"): (32, 64),
    ("triton", "mac_momentum"): (16, 128),
    ("mosaic_gpu", "laplacian2d"): (32, 128),
    ("mosaic_gpu", "laplacian3d"): (4, 16, 64),
    ("mosaic_gpu", "reaction_diffusion"): (16, 128),
    ("mosaic_gpu", "temporal2d"): (32, 64),
    ("mosaic_gpu", "mac_momentum"): (16, 128),
    ("tpu", "laplacian2d"): (128, 8192),
    ("tpu", "laplacian3d"): (8, 64, 256),
    ("tpu", "reaction_diffusion"): (128, 1024),
    ("tpu", "temporal2d"): (128, 2048),
    ("tpu", "mac_momentum"): (256, 256),
}

# Shared memory a Mosaic GPU block may use (the H100/H200 opt-in limit); Mosaic GPU starts
# every buffer on a 1 KiB boundary and keeps 2 KiB for reductions, and the barrier takes a
# slot. The TMA's largest box side.
SMEM_BYTES = 227 * 1024
SMEM_ALIGNMENT = 1024
SMEM_RESERVED = 2 * 1024 + SMEM_ALIGNMENT
TMA_MAX_SIDE = 256
WARPGROUP = 128  # threads; a register array holds a multiple of this many values
# The scoped VMEM a Mosaic TPU kernel may use by default (the smallest of current chips),
# and how many windows' worth of temporaries the stencil arithmetic is allowed.
VMEM_BYTES = 16 * 1024 * 1024
VMEM_TEMPORARIES = 6
TPU_TILING = (8, 128)  # sublanes, lanes: the last two axes of a Mosaic TPU block


@dataclasses.dataclass(frozen=True)
class Tiles:
    """How one launch is cut into programs on one target.

    - `block`: the output tile of each program, one entry per spatial axis.
    - `window`: the input window each program reads, from element `block * index` of the
      padded field (at least `block + 2 * width`).
    - `step`: the region a temporally blocked program computes per step; `None` when each
      step computes one ring less than the one before (the window shrinks to the tile).
    """

    block: tuple[int, ...]
    window: tuple[int, ...]
    step: tuple[int, ...] | None = None


def _next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _power_of_two_below(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def default_block_shape(
    kernel: str, spatial_shape: Sequence[int], target: Target | None = None
) -> tuple[int, ...]:
    """The table's tile for a target, shrunk to the next power of two above each axis of
    the interior (a 40 × 40 field takes one 64 × 64 tile, not 256 × 256).

    A launch fits this tile to its target when it is lowered (see the kernels page): the
    tile a program finally computes can differ on Mosaic GPU (shared memory), on Mosaic
    TPU (whole axes, multiples of (8, 128)) and in temporally blocked launches.

    **Arguments:**

    - `kernel`: `"laplacian2d"`, `"laplacian3d"`, `"reaction_diffusion"`, `"temporal2d"` or
      `"mac_momentum"`.
    - `spatial_shape`: the interior (unpadded) shape of the field.
    - `target`: `"interpret"`, `"triton"`, `"mosaic_gpu"` or `"tpu"`; `None` for the one
      a kernel takes on the default device (`"interpret"` on a CPU, `"triton"` on a GPU).

    **Returns:** the tile, one entry per spatial axis.

    !!! example

        ```python
        simlab.kernels.default_block_shape("laplacian2d", (40, 1000))  # (64, 256) on a CPU
        ```
    """
    if target is None:
        target = {"cpu": "interpret", "gpu": "triton", "tpu": "tpu"}.get(
            jax.default_backend(), "interpret"
        )
    key = (target, kernel)
    if key not in BLOCK_SHAPES:
        raise ValueError(
            f"no block shape known for kernel {kernel!r} on target {target!r}; kernels are "
            f"{list(KERNELS)} and targets {list(TARGETS)}."
        )
    return tuple(
        min(b, _next_power_of_two(n)) for b, n in zip(BLOCK_SHAPES[key], spatial_shape, strict=True)
    )


def fit_tiles(
    target: Target,
    kernel: str,
    interior: Sequence[int],
    requested: Sequence[int] | None,
    *,
    width: int,
    num_channels: int,
    itemsize: int,
) -> Tiles:
    """The tiles of one launch on `target`: the requested tile (or the table's) fitted to
    what that target's compiler takes.

    **Arguments:**

    - `target`: where the launch is lowered.
    - `kernel`: the table key; `"temporal2d"` launches are temporally blocked.
    - `interior`: the spatial shape of the result.
    - `requested`: the caller's `block_shape`, or `None` for the table's.
    - `width`: the halo per side (the stencil's half-width, or the steps per launch).
    - `num_channels`: the fields each program reads (1 without a channel axis).
    - `itemsize`: bytes per value.

    **Returns:** the `Tiles`. Raises `ValueError` when no tile fits the target (a halo
    too wide for Mosaic GPU's copies, say).
    """
    interior = tuple(interior)
    wanted = tuple(requested) if requested else default_block_shape(kernel, interior, target)
    stepped = kernel == "temporal2d"
    fit = _FITS[target]
    return fit(wanted, interior, width, stepped=stepped, channels=num_channels, itemsize=itemsize)


def _fit_interpret(wanted, interior, width, *, stepped, channels, itemsize) -> Tiles:
    return Tiles(wanted, tuple(b + 2 * width for b in wanted))


def _fit_triton(wanted, interior, width, *, stepped, channels, itemsize) -> Tiles:
    if not stepped:
        block = tuple(_power_of_two_below(b) for b in wanted)
        return Tiles(block, tuple(b + 2 * width for b in block))
    # Each step computes a power-of-two region from loads one cell further on: after
    # `width` steps the first `step + 2 - 2 * width` cells per axis are the tile.
    step = tuple(_next_power_of_two(b + 2 * width - 2) for b in wanted)
    return Tiles(tuple(s + 2 - 2 * width for s in step), tuple(s + 2 for s in step), step)


def _fit_mosaic_gpu(wanted, interior, width, *, stepped, channels, itemsize) -> Tiles:
    row_cells = 128 // itemsize  # rows of 128 bytes make every copy a whole number of them
    block = [min(_power_of_two_below(b), TMA_MAX_SIDE // 2) for b in wanted]
    block[-1] = max(block[-1], row_cells)
    while math.prod(block) < WARPGROUP:
        block[0] *= 2
    while True:
        tiles = _mosaic_gpu_tiles(tuple(block), width, stepped, row_cells)
        smem = SMEM_RESERVED + sum(
            _round_up(itemsize * channels * math.prod(shape), SMEM_ALIGNMENT)
            for shape in (tiles.window, tiles.block)
        )
        if max(tiles.window) <= TMA_MAX_SIDE and smem <= SMEM_BYTES:
            return tiles
        floors = [1] * (len(block) - 1) + [row_cells]
        shrinkable = [
            a
            for a in range(len(block))
            if block[a] > floors[a] and math.prod(block) // 2 >= WARPGROUP
        ]
        if not shrinkable:
            raise ValueError(
                f"no Mosaic GPU tile fits a halo of {width} cells with {channels} field(s): "
                f"the window {tiles.window} needs {smem} bytes of shared memory (at most "
                f"{SMEM_BYTES}) and at most {TMA_MAX_SIDE} cells per axis. Use fewer steps "
                "per launch, backend='triton', or impl='xla'."
            )
        block[max(shrinkable, key=block.__getitem__)] //= 2


def _mosaic_gpu_tiles(block, width, stepped, row_cells) -> Tiles:
    """The window (and step region) of a Mosaic GPU tile: rows of whole 128-byte units and
    a multiple of 8 of them, so that every copy and register array is whole; a step region
    of whole warpgroup arrays, read one cell further on each step."""

    def rounded(shape):
        return (*shape[:-2], _round_up(shape[-2], 8), _round_up(shape[-1], row_cells))

    if not stepped:
        return Tiles(block, rounded(tuple(b + 2 * width for b in block)))
    step = rounded(tuple(b + 2 * width - 2 for b in block))
    return Tiles(block, rounded(tuple(s + 2 for s in step)), step)


def _fit_tpu(wanted, interior, width, *, stepped, channels, itemsize) -> Tiles:
    if itemsize > 4:
        raise ValueError(
            "Mosaic TPU kernels take fields of 32 bits or fewer (a TPU has no 64-bit vector "
            "unit); cast the field to float32, or use impl='xla'."
        )
    block = list(wanted)
    while True:
        tiles = _tpu_tiles(tuple(block), interior, width, stepped)
        vmem = (
            itemsize
            * channels
            * ((2 + VMEM_TEMPORARIES) * math.prod(tiles.window) + 2 * math.prod(tiles.block))
        )
        if vmem <= VMEM_BYTES:
            return tiles
        # Halve the axis that is furthest above its tiling (the leading ones have none).
        alignment = (1,) * (len(block) - 2) + TPU_TILING
        axis = max(range(len(block)), key=lambda a: tiles.block[a] / alignment[a])
        if tiles.block[axis] <= alignment[axis]:
            raise ValueError(
                f"no Mosaic TPU tile fits a halo of {width} cells with {channels} field(s) in "
                f"{VMEM_BYTES} bytes of VMEM; use fewer steps per launch or impl='xla'."
            )
        block[axis] = tiles.block[axis] // 2


def _tpu_tiles(block, interior, width, stepped) -> Tiles:
    """The last two axes: a multiple of the (8, 128) tiling or the whole axis, windows
    rounded up to the tiling (the halo is reached by rotating the window, so a temporally
    blocked step computes the whole window)."""
    alignment = (1,) * (len(block) - 2) + TPU_TILING
    tile = []
    for b, n, align in zip(block, interior, alignment, strict=True):
        aligned = max(align, b // align * align)
        tile.append(n if aligned >= n else aligned)  # a whole axis: one program along it
    window = tuple(
        _round_up(b + 2 * width, align) for b, align in zip(tile, alignment, strict=True)
    )
    return Tiles(tuple(tile), window, window if stepped else None)


_FITS: dict[str, Callable[..., Tiles]] = {
    "interpret": _fit_interpret,
    "triton": _fit_triton,
    "mosaic_gpu": _fit_mosaic_gpu,
    "tpu": _fit_tpu,
}


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
