"""The tiled launch on every target: a kernel body written once against a `Program`,
laid out for each compiler.

A body reads shifted blocks of its window, may keep a state between (temporally blocked)
steps, and stores its tile. The layouts:

- `"interpret"` and `"triton"`: overlapping input windows addressed by element offsets
  (`pl.Element`), loads at constant offsets within them; a temporally blocked Triton
  launch keeps its state in a per-program scratch buffer in global memory (Triton has no
  shared-memory scratch and cannot shift values in registers) and stores its tile with a
  mask (the tile is not a power of two);
- `"mosaic_gpu"`: a `plgpu.kernel` over the tiles; the field stays in global memory; each
  program copies its window into shared memory (Mosaic GPU pipelines only
  non-overlapping blocks), reads it at offsets, keeps a stepped state in the same buffer
  and copies its tile back;
- `"tpu"`: windows rounded up to Mosaic's (8, 128) tiling (the last ones may run past
  the end of the array), reached at an offset by rotating the window (`pltpu.roll`) so
  that every load, store and slice is aligned; scalars live in SMEM.
"""

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jaxtyping import Array

from ._pallas import Plan, extend_high, split_leading
from ._tiling import Tiles


# What a kernel body reads from: a window (or a kept state) as shifted blocks.
class RefSource:
    """Blocks loaded from a ref at constant offsets."""

    def __init__(self, ref):
        self.ref = ref

    def read(self, index: tuple, starts: Sequence[int], sizes: Sequence[int]):
        return self.ref[index + tuple(pl.ds(s, n) for s, n in zip(starts, sizes, strict=True))]


class ValueSource:
    """Blocks sliced out of arrays, one per leading index (a state kept in registers)."""

    def __init__(self, values: Sequence):
        self.values = values

    def read(self, index: tuple, starts: Sequence[int], sizes: Sequence[int]):
        (channel,) = index
        return self.values[channel][
            tuple(slice(s, s + n) for s, n in zip(starts, sizes, strict=True))
        ]


def _rotated(window, starts: Sequence[int], sizes: Sequence[int]):
    """The block of `window` that starts `starts` cells in along its last two axes, as
    Mosaic TPU reaches it: the window rotated by `-start`, then its aligned leading part."""
    from jax.experimental.pallas import tpu as pltpu

    untiled = window.ndim - 2
    for axis, start in enumerate(starts, start=untiled):
        shift = -start % window.shape[axis]
        if shift:
            window = pltpu.roll(window, np.int32(shift), axis)
    return window[(slice(None),) * untiled + tuple(slice(0, n) for n in sizes)]


class RolledRefSource:
    """Blocks of a window ref on Mosaic TPU: untiled leading spatial axes (the first of
    three) sliced from the ref, the last two rotated."""

    def __init__(self, ref):
        self.ref = ref

    def read(self, index: tuple, starts: Sequence[int], sizes: Sequence[int]):
        pairs = zip(starts[:-2], sizes[:-2], strict=True)
        leading = tuple(pl.ds(s, n) for s, n in pairs)
        window = self.ref[index + leading + (slice(None), slice(None))]
        return _rotated(window, starts[-2:], sizes[-2:])


class RolledValueSource:
    """Blocks of arrays, one per leading index, rotated (a state kept in registers on
    Mosaic TPU)."""

    def __init__(self, values: Sequence):
        self.values = values

    def read(self, index: tuple, starts: Sequence[int], sizes: Sequence[int]):
        (channel,) = index
        return _rotated(self.values[channel], starts, sizes)


@dataclasses.dataclass
class Program:
    """One program's view of its launch, which kernel bodies are written against.

    `read(index, starts, sizes)` loads a block of the window (or of the state kept by
    the last `keep`), `starts` cells in along each spatial axis; `keep(values)` keeps one
    array per leading index as the state the next step reads; `store(index, value)`
    writes the tile (a value larger than the tile is cut to it)."""

    tiles: Tiles
    source: Any
    keeper: Callable[[Sequence], Any]
    store: Callable[[tuple, Any], None]

    def read(self, index: tuple, starts: Sequence[int], sizes: Sequence[int]):
        return self.source.read(index, starts, sizes)

    def keep(self, values: Sequence) -> None:
        self.source = self.keeper(values)

    def step_shape(self, step: int) -> tuple[int, ...]:
        """The region a temporally blocked step computes: the target's step region, or
        one ring less than the window per step already taken."""
        if self.tiles.step is not None:
            return self.tiles.step
        return tuple(w - 2 * (step + 1) for w in self.tiles.window)


def _store_to(out_ref):
    def store(index, value):
        out_ref[index] = value.astype(out_ref.dtype)

    return store


def launch_tiles(
    body: Callable,
    padded: Array,
    *,
    width: int,
    plan: Plan,
    name: str,
    num_channels: int | None = None,
    params: Array | None = None,
) -> Array:
    """Runs `body(program, params)` once per output tile of a padded array.

    `padded` is `(..., [channels,] *spatial)`, the spatial axes `2 * width` longer than
    the result. The leading axes become the first grid axis; a channel axis (if
    `num_channels`) stays whole in every window and tile; `params`, a small vector, is
    read into a list of scalars for every program.
    """
    tiles = plan.tiles
    num_spatial = len(tiles.block)
    channel_axes = () if num_channels is None else (num_channels,)
    batched, leading = split_leading(padded, num_spatial + len(channel_axes))
    interior = tuple(n - 2 * width for n in batched.shape[batched.ndim - num_spatial :])
    grid = (batched.shape[0], *(pl.cdiv(n, b) for n, b in zip(interior, tiles.block, strict=True)))
    layout = _Layout(grid, channel_axes, tiles)
    extents = tuple(
        (g - 1) * b + w for g, b, w in zip(grid[1:], tiles.block, tiles.window, strict=True)
    )
    if not _reads_past_the_end(plan):
        batched = extend_high(batched, extents)
    out = _LAUNCHES[plan.target](body, batched, params, layout, plan, name)
    # Cut off the tiles' overhang (a no-op when the interior is a whole number of tiles).
    out = out[(slice(None),) * (1 + len(channel_axes)) + tuple(slice(0, n) for n in interior)]
    return out.reshape(*leading, *channel_axes, *interior)


def _reads_past_the_end(plan: Plan) -> bool:
    """Whether the compiled launch reads the last windows past the end of the array.

    Mosaic TPU copies a window that overruns the array in part (on a TPU v5e, with the
    values checked: the overrun feeds only the tiles' overhang, which is cut), so the
    array is not extended, a whole extra pass over it: that pass took 1.5 ms of the
    Laplacian's 2.4 ms at 8192². The interpreter clamps a window that overruns to start
    inside the array, so it (and the GPU layouts) read an extended array.
    """
    return plan.target == "tpu" and not plan.interpret


@dataclasses.dataclass(frozen=True)
class _Layout:
    """The grid of one launch: `(batch, *tiles per spatial axis)`, with the channel axes
    that stay whole in every block."""

    grid: tuple[int, ...]
    channel_axes: tuple[int, ...]
    tiles: Tiles

    def tile_origin(self, tile_index) -> tuple:
        return tuple(t * b for t, b in zip(tile_index, self.tiles.block, strict=True))

    def out_shape(self, dtype, spatial: Sequence[int]) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct((self.grid[0], *self.channel_axes, *spatial), dtype)

    def rounded(self) -> tuple[int, ...]:
        return tuple(g * b for g, b in zip(self.grid[1:], self.tiles.block, strict=True))


def _scalars(params_ref) -> list:
    return [] if params_ref is None else [params_ref[i] for i in range(params_ref.shape[0])]


def _split_refs(refs, has_params: bool):
    """`(window, params or None, rest)` from a kernel's refs."""
    window, *rest = refs
    if has_params:
        params, *rest = rest
        return window, params, rest
    return window, None, rest


def _launch_element_windows(body, batched, params, layout: _Layout, plan: Plan, name):
    """The interpret and Triton layout: program `(i, j, ...)` reads the window that
    starts at element `block * (i, j, ...)` of the padded array (the tiles of a
    `BlockSpec` do not overlap, so the halo is addressed by element offsets)."""
    tiles, channel_axes = layout.tiles, layout.channel_axes
    leading = (pl.squeezed, *channel_axes)
    zeros = (0,) * len(channel_axes)
    stepped = plan.target == "triton" and tiles.step is not None

    def windows(shape):
        return pl.BlockSpec(
            leading + tuple(pl.Element(n) for n in shape),
            lambda batch, *tile: (batch, *zeros, *layout.tile_origin(tile)),
        )

    in_specs = [windows(tiles.window)]
    inputs = [batched]
    if params is not None:
        in_specs.append(pl.BlockSpec(params.shape, lambda *_: (0,)))
        inputs.append(params)
    if stepped:
        # Overlapping output windows of the step region, stored under a mask: the tile
        # is not a power of two. A scratch buffer per program keeps the state.
        counts = zip(layout.grid[1:], tiles.block, tiles.step, strict=True)
        spatial = tuple((g - 1) * b + s for g, b, s in counts)
        scratch = (*layout.grid, *channel_axes, *tiles.window)
        out_shape = [
            layout.out_shape(batched.dtype, spatial),
            jax.ShapeDtypeStruct(scratch, batched.dtype),
        ]
        out_specs = [
            windows(tiles.step),
            pl.BlockSpec(
                (pl.squeezed,) * len(layout.grid) + scratch[len(layout.grid) :],
                lambda *program: (*program, *(0,) * (len(scratch) - len(program))),
            ),
        ]
    else:
        out_shape = layout.out_shape(batched.dtype, layout.rounded())
        out_specs = pl.BlockSpec(leading + tiles.block, lambda batch, *tile: (batch, *zeros, *tile))

    def kernel(*refs):
        window_ref, params_ref, (out_ref, *scratch_ref) = _split_refs(refs, params is not None)
        if stepped:
            program = _triton_stepped_program(window_ref, out_ref, scratch_ref[0], plan)
        else:
            program = Program(tiles, RefSource(window_ref), ValueSource, _store_to(out_ref))
        body(program, _scalars(params_ref))

    out = pl.pallas_call(
        kernel,
        out_shape=out_shape,
        grid=layout.grid,
        in_specs=in_specs,
        out_specs=out_specs,
        interpret=plan.interpret,
        compiler_params=None if plan.interpret else _triton_params(tiles),
        name=name,
    )(*inputs)
    return out[0] if stepped else out


def _triton_params(tiles: Tiles):
    from jax.experimental.pallas import triton as pltriton

    values = math.prod(tiles.step or tiles.block)
    return pltriton.CompilerParams(num_warps=8 if values >= 4096 else 4, num_stages=1)


def _triton_stepped_program(window_ref, out_ref, scratch_ref, plan: Plan) -> Program:
    """Triton keeps the state in global memory between steps (a barrier on each side of
    the store orders it against the loads of the other threads) and stores the leading
    `block` cells of the step region under a mask."""
    from jax.experimental.pallas import triton as pltriton

    tiles = plan.tiles

    def barrier():
        if not plan.interpret:  # the interpreter runs a program as one thread
            pltriton.debug_barrier()

    def keep(values):
        barrier()
        for channel, value in enumerate(values):
            scratch_ref[(channel, *(pl.ds(0, n) for n in tiles.step))] = value
        barrier()
        return RefSource(scratch_ref)

    def store(index, value):
        # Leading indices as unit slices: a masked store takes slices only.
        value = value.reshape((1,) * len(index) + value.shape)
        inside = None
        for axis, n in enumerate(tiles.block, start=len(index)):
            within = jax.lax.broadcasted_iota(jnp.int32, value.shape, axis) < n
            inside = within if inside is None else inside & within
        units = tuple(pl.ds(i, 1) for i in index)
        pltriton.store(out_ref.at[units], value.astype(out_ref.dtype), mask=inside)

    return Program(tiles, RefSource(window_ref), keep, store)


def _launch_mosaic_gpu(body, batched, params, layout: _Layout, plan: Plan, name):
    """The Mosaic GPU layout, a `plgpu.kernel` over the grid: the padded field stays in
    global memory; each program copies its window into shared memory (with the TMA),
    computes its tile into shared memory (a stepped state is kept in the window's buffer)
    and copies it back. The interpreter runs the same kernel in Mosaic GPU's simulator
    of shared memory, the TMA and barriers."""
    from jax.experimental.pallas import mosaic_gpu as plgpu

    tiles, channel_axes = layout.tiles, layout.channel_axes
    whole = (slice(None),) * len(channel_axes)
    # Rows of the global arrays are whole 16-byte units, as the TMA requires.
    row_cells = max(1, 16 // batched.dtype.itemsize)
    batched = extend_high(batched, (-(-batched.shape[-1] // row_cells) * row_cells,))
    inputs = [batched] + ([] if params is None else [params])
    scratch = [
        plgpu.SMEM((*channel_axes, *tiles.window), batched.dtype),
        plgpu.SMEM((*channel_axes, *tiles.block), batched.dtype),
    ]
    # The TMA copies windows and tiles, except float64 ones (which it does not take):
    # threads copy those through registers.
    if batched.dtype != jnp.float64:
        scratch.append(plgpu.Barrier(num_arrivals=1))
    # Names no device mesh uses: Mosaic GPU reads a name of the enclosing mesh as a
    # device index.
    grid_names = tuple(f"simlab_tiles_{a}" for a in range(len(layout.grid)))

    def kernel(*refs):
        gmem_ref, params_ref, (out_gmem, window, tile, *barrier) = _split_refs(
            refs, params is not None
        )
        batch, *tile_index = (jax.lax.axis_index(n) for n in grid_names)
        origin = layout.tile_origin(tile_index)
        source = gmem_ref.at[
            (batch, *whole, *(pl.ds(o, n) for o, n in zip(origin, tiles.window, strict=True)))
        ]
        destination = out_gmem.at[
            (batch, *whole, *(pl.ds(o, n) for o, n in zip(origin, tiles.block, strict=True)))
        ]
        if barrier:
            plgpu.copy_gmem_to_smem(source, window, barrier[0])
            plgpu.barrier_wait(barrier[0])
        else:
            window[...] = source[...]
        body(_mosaic_gpu_program(window, tile, tiles), _scalars(params_ref))
        if barrier:
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(tile, destination)
            plgpu.wait_smem_to_gmem(0)
        else:
            destination[...] = tile[...]

    return plgpu.kernel(
        kernel,
        out_type=layout.out_shape(batched.dtype, layout.rounded()),
        scratch_types=scratch,
        # Explicit: jax 0.10 lowers a kernel without them with Triton.
        compiler_params=plgpu.CompilerParams(),
        grid=layout.grid,
        grid_names=grid_names,
        interpret=_mosaic_gpu_interpreter() if plan.interpret else False,
        kernel_name=name,
    )(*inputs)


def _mosaic_gpu_interpreter():
    """Mosaic GPU's interpreter (`plgpu.InterpretGPUParams` from jax 0.11, only under
    `jax._src` in 0.10): Pallas's plain interpreter has no grid axis names."""
    from jax._src.pallas.mosaic_gpu.interpret.params import InterpretGPUParams

    return InterpretGPUParams()


def _mosaic_gpu_program(window, tile, tiles: Tiles) -> Program:
    """A stepped state overwrites the window's buffer (reads of the window are done by
    then: Mosaic GPU puts a barrier around every shared-memory store); a value larger
    than the tile goes through that buffer to be cut (registers cannot be sliced)."""

    def keep(values):
        for channel, value in enumerate(values):
            window[(channel, *(pl.ds(0, n) for n in value.shape))] = value
        return RefSource(window)

    def store(index, value):
        if value.shape != tiles.block:
            window[index + tuple(pl.ds(0, n) for n in value.shape)] = value
            value = window[index + tuple(pl.ds(0, n) for n in tiles.block)]
        tile[index] = value.astype(tile.dtype)

    return Program(tiles, RefSource(window), keep, store)


def _launch_tpu(body, batched, params, layout: _Layout, plan: Plan, name):
    """The Mosaic TPU layout: element-offset windows rounded up to the (8, 128) tiling,
    rotated to reach each offset, the leading aligned part of the result stored."""
    from jax.experimental.pallas import tpu as pltpu

    tiles, channel_axes = layout.tiles, layout.channel_axes
    zeros = (0,) * len(channel_axes)
    single = tuple(count == 1 for count in layout.grid[1:])

    def window_origin(batch, *tile):
        # Mosaic must prove that a window starts on its (8, 128) tiling. A whole axis (one
        # tile, of any length) starts at the literal 0: `tile * block` it cannot prove.
        origin = layout.tile_origin(tile)
        return (batch, *zeros, *(0 if one else o for one, o in zip(single, origin, strict=True)))

    # Mosaic takes element windows only when every other axis is one too (or squeezed).
    window_spec = pl.BlockSpec(
        (pl.squeezed, *(pl.Element(n) for n in (*channel_axes, *tiles.window))), window_origin
    )
    in_specs = [window_spec]
    inputs = [batched]
    if params is not None:
        in_specs.append(pl.BlockSpec(memory_space=pltpu.SMEM))
        inputs.append(params)

    def kernel(*refs):
        window_ref, params_ref, (out_ref,) = _split_refs(refs, params is not None)

        def store(index, value):
            cut = value[
                (slice(None),) * (value.ndim - len(tiles.block))
                + tuple(slice(0, n) for n in tiles.block)
            ]
            out_ref[index] = cut.astype(out_ref.dtype)

        program = Program(tiles, RolledRefSource(window_ref), RolledValueSource, store)
        body(program, _scalars(params_ref))

    semantics = pltpu.CompilerParams(dimension_semantics=("parallel",) * len(layout.grid))
    return pl.pallas_call(
        kernel,
        out_shape=layout.out_shape(batched.dtype, layout.rounded()),
        grid=layout.grid,
        in_specs=in_specs,
        out_specs=pl.BlockSpec(
            (pl.squeezed, *channel_axes, *tiles.block), lambda batch, *tile: (batch, *zeros, *tile)
        ),
        interpret=plan.interpret,
        compiler_params=None if plan.interpret else semantics,
        name=name,
    )(*inputs)


_LAUNCHES: dict[str, Callable] = {
    "interpret": _launch_element_windows,
    "triton": _launch_element_windows,
    "mosaic_gpu": _launch_mosaic_gpu,
    "tpu": _launch_tpu,
}
