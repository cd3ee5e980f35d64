"""A roofline model of `simlab.kernels` on an H200 and a TPU v5e: what each kernel should
reach before any device has run it, written to `benchmarks/results/gpu-model.txt`.

Stencils do a few flops per byte, far below either chip's ridge point, so their speed is
the memory bandwidth over the bytes each cell moves. Two traffic counts bound it:

- `minimum`: every input read once and every output written once (what a kernel whose
  halo rereads all hit the cache moves);
- `tiled`: each program reads its whole window (tile plus halo, as the target's tile
  table lays it out, `simlab.kernels._tiling.fit_tiles`) from memory.

A temporally blocked launch of `k` steps moves its bytes once for all `k`. Flops come from
XLA's cost analysis of each kernel's `jax.numpy` reference, compiled here on the CPU; the
model's `pl.CostEstimate` for a launch is those counts at the benchmark's size.
`benchmarks/gpu_kernels.py` prints the H200's `minimum` prediction beside each measurement,
`benchmarks/tpu_bench.py` the TPU v5e's `tiled` one (`chip_rates`).

Usage: `python benchmarks/gpu_model.py [--out FILE]`.
"""

import argparse
import dataclasses
import functools as ft
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import simlab
import simlab.kernels as sk
from simlab.kernels._tiling import fit_tiles


@dataclasses.dataclass(frozen=True)
class Chip:
    name: str
    bandwidth: float  # bytes/s of HBM
    float32_peak: float | None  # flop/s of vector float32 arithmetic, None if unpublished
    targets: tuple[str, ...]


# H200 SXM: 4.8 TB/s HBM3e and 67 TFLOP/s float32 (NVIDIA's datasheet). TPU v5e: 819 GB/s
# HBM2 (Google's system page); its peak is given for bf16 matrix units only.
CHIPS = (
    Chip("H200", 4.8e12, 67e12, ("triton", "mosaic_gpu")),
    Chip("TPU v5e", 819e9, None, ("tpu",)),
)
SIZE_2D = 8192  # the benchmark's field side (benchmarks/gpu_kernels.py)
SIZE_3D = 512
FLOP_COUNT_SIDE = 256  # the size the references are compiled at for their flop counts
WORD = 4  # float32


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One kernel as the model sees it: its tile-table key, halo width, the fields it reads
    and writes per cell, the steps one launch takes, and its reference for flop counts."""

    label: str
    table_key: str
    num_spatial: int
    width: int
    reads: int
    writes: int
    steps: int
    reference: object  # one step on a field of side FLOP_COUNT_SIDE, plain jax.numpy

    @property
    def interior(self) -> tuple[int, ...]:
        return (SIZE_2D,) * 2 if self.num_spatial == 2 else (SIZE_3D,) * 3


def _heat_step():
    grid = simlab.Grid((FLOP_COUNT_SIDE,) * 2, boundary="periodic")
    return ft.partial(
        sk.heat_steps_reference,
        spacing=(1.0, 1.0),
        pad_fn=lambda u, width: simlab.grid.pad(u, grid, width),
        diffusivity=0.2,
        dt=1.0,
        num_steps=1,
    )


GRAY_SCOTT = dict(
    spacing=(1.0, 1.0),
    diffusivities=(0.2, 0.1),
    parameters=(0.035, 0.065),
    reaction_fn=simlab.models.GrayScott.reaction,
)
KERNELS = (
    Kernel(
        "laplacian2d order 2",
        "laplacian2d",
        2,
        1,
        1,
        1,
        1,
        ft.partial(sk.laplacian2d_reference, spacing=(1.0, 1.0)),
    ),
    Kernel(
        "laplacian2d order 4",
        "laplacian2d",
        2,
        2,
        1,
        1,
        1,
        ft.partial(sk.laplacian2d_reference, spacing=(1.0, 1.0), order=4),
    ),
    Kernel(
        "laplacian3d order 2",
        "laplacian3d",
        3,
        1,
        1,
        1,
        1,
        ft.partial(sk.laplacian3d_reference, spacing=(1.0, 1.0, 1.0)),
    ),
    Kernel(
        "gray_scott (fused)",
        "reaction_diffusion",
        2,
        1,
        2,
        2,
        1,
        ft.partial(sk.reaction_diffusion_reference, **GRAY_SCOTT),
    ),
    Kernel(
        "mac_momentum (fused)",
        "mac_momentum",
        2,
        1,
        2,
        2,
        1,
        ft.partial(sk.mac_momentum_reference, spacing=(1.0, 1.0), viscosity=0.01),
    ),
    *(
        Kernel(f"heat, {k} steps/launch", "temporal2d", 2, k, 1, 1, k, _heat_step())
        for k in (1, 4, 8)
    ),
)


def _flop_count_side(kernel: Kernel) -> int:
    return FLOP_COUNT_SIDE if kernel.num_spatial == 2 else FLOP_COUNT_SIDE // 4


def _reference_argument(kernel: Kernel) -> jax.ShapeDtypeStruct:
    side = _flop_count_side(kernel)
    if kernel.table_key == "temporal2d":  # takes the unpadded field and pads it itself
        return jax.ShapeDtypeStruct((side, side), jnp.float32)
    padded = (side + 2 * kernel.width,) * kernel.num_spatial
    channels = (kernel.reads,) if kernel.reads > 1 else ()
    return jax.ShapeDtypeStruct((*channels, *padded), jnp.float32)


def counts_per_cell_step(kernel: Kernel) -> tuple[float, float]:
    """Flops and transcendentals per cell and step, from XLA's cost analysis of the
    reference's one step (XLA counts a loop's body once, so k steps would read as one)."""
    analysis = jax.jit(kernel.reference).lower(_reference_argument(kernel)).compile()
    analysis = analysis.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, list | tuple) else analysis
    cells = _flop_count_side(kernel) ** kernel.num_spatial
    return analysis.get("flops", 0.0) / cells, analysis.get("transcendentals", 0.0) / cells


def target_tiles(kernel: Kernel, target: str):
    """The tiles `target`'s table gives `kernel` at the benchmark's size."""
    return fit_tiles(
        target,
        kernel.table_key,
        kernel.interior,
        None,
        width=kernel.width,
        num_channels=kernel.reads,
        itemsize=WORD,
    )


def bytes_per_cell_step(kernel: Kernel, target: str | None) -> float:
    """Bytes moved per cell and step: each input once (`target=None`), or each program's
    window from memory as `target`'s tiles lay it out."""
    read_factor = 1.0
    if target is not None:
        tiles = target_tiles(kernel, target)
        read_factor = math.prod(tiles.window) / math.prod(tiles.block)
    return WORD * (kernel.reads * read_factor + kernel.writes) / kernel.steps


def predicted_rate(kernel: Kernel, chip: Chip, target: str | None, flops: float) -> float:
    """Cell-steps per second: the lower of the memory and (where published) compute roofs."""
    rate = chip.bandwidth / bytes_per_cell_step(kernel, target)
    if chip.float32_peak is not None and flops > 0:
        rate = min(rate, chip.float32_peak / flops)
    return rate


def cost_estimate(kernel: Kernel, flops: float, transcendentals: float) -> pl.CostEstimate:
    """The `pl.CostEstimate` of one launch at the benchmark's size (minimum traffic)."""
    cell_steps = math.prod(kernel.interior) * kernel.steps
    return pl.CostEstimate(
        flops=round(flops * cell_steps),
        transcendentals=round(transcendentals * cell_steps),
        bytes_accessed=round(bytes_per_cell_step(kernel, None) * cell_steps),
    )


def chip_rates(chip_name: str = "H200", target: str | None = None) -> dict[str, float]:
    """Kernel label -> a chip's predicted Gcell-steps/s, for the device benchmarks to print
    beside their measurements: at minimum traffic (`target=None`, the same for every
    lowering), or with every program reading its whole window as `target` tiles it."""
    chip = next(chip for chip in CHIPS if chip.name == chip_name)
    return {
        kernel.label: predicted_rate(kernel, chip, target, counts_per_cell_step(kernel)[0]) / 1e9
        for kernel in KERNELS
    }


def report() -> list[str]:
    lines = [
        "Roofline model of simlab.kernels, float32 (benchmarks/gpu_model.py).",
        "Predicted Gcell-steps/s = HBM bandwidth / bytes per cell-step, capped by the float32",
        "peak where published. 'min': each input read once; 'tiled': every program reads its",
        "whole window (tile + halo, from the target's tile table). Flops per cell-step from",
        f"XLA's cost analysis of each reference on the CPU. Sizes: {SIZE_2D}^2 and {SIZE_3D}^3.",
        "Chips: "
        + "; ".join(
            f"{c.name} {c.bandwidth / 1e12:.3g} TB/s"
            + (f", {c.float32_peak / 1e12:.0f} TFLOP/s fp32" if c.float32_peak else "")
            for c in CHIPS
        ),
        "",
        f"{'kernel':<22} {'flop/cell':>9} {'B/cell min':>10} {'target':<11} "
        f"{'tile':<14} {'B/cell tiled':>12} {'Gcell/s min':>11} {'Gcell/s tiled':>13}",
    ]
    estimates = []
    for kernel in KERNELS:
        flops, transcendentals = counts_per_cell_step(kernel)
        minimum = bytes_per_cell_step(kernel, None)
        for chip in CHIPS:
            for target in chip.targets:
                tiles = target_tiles(kernel, target)
                lines.append(
                    f"{kernel.label:<22} {flops:>9.1f} {minimum:>10.2f} {target:<11} "
                    f"{'x'.join(map(str, tiles.block)):<14} "
                    f"{bytes_per_cell_step(kernel, target):>12.2f} "
                    f"{predicted_rate(kernel, chip, None, flops) / 1e9:>11.0f} "
                    f"{predicted_rate(kernel, chip, target, flops) / 1e9:>13.0f}"
                )
        estimates.append(f"{kernel.label:<22} {cost_estimate(kernel, flops, transcendentals)}")
    lines += ["", "pl.CostEstimate of one launch at the benchmark's size:", *estimates]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results/gpu-model.txt")
    args = parser.parse_args()
    text = "\n".join(report()) + "\n"
    print(text, end="")
    with open(args.out, "w") as handle:
        handle.write(text)


if __name__ == "__main__":
    main()
