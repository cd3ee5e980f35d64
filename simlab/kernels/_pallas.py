"""Pieces shared by the kernel files: launch options, the target and tiles each platform
lowers a launch with (a `Plan`), input checks, and the array reshaping around a launch."""

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

import jax.numpy as jnp
from jaxtyping import Array

from ._tiling import Target, Tiles, fit_tiles

Backend = Literal["triton", "mosaic_gpu"]
BACKENDS = ("triton", "mosaic_gpu")
PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


@dataclasses.dataclass(frozen=True)
class Launch:
    """What the caller asked of a launch (hashable: a static argument and a primitive's
    parameter). The platform it is lowered for turns it into a `Plan`.

    - `block_shape`: the requested output tile, one entry per spatial axis, or `None`
      for the target's table.
    - `interpret`: `True` runs the Pallas interpreter on every platform; `None` runs it
      exactly on a CPU and compiles elsewhere; `False` compiles (GPU and TPU only).
    - `backend`: the lowering on an NVIDIA GPU, `"triton"` or `"mosaic_gpu"`.
    """

    block_shape: tuple[int, ...] | None
    interpret: bool | None
    backend: Backend = "triton"

    def target(self, platform: str) -> Target:
        """The target this launch takes when lowered for `platform`."""
        if self.interpret:
            return "interpret"
        if platform == "cpu":
            if self.interpret is False:
                raise ValueError(
                    "Pallas kernels compile only for GPU and TPU; on a CPU pass "
                    "interpret=True (or interpret=None), or use the XLA path (impl='xla')."
                )
            return "interpret"
        if platform == "tpu":
            return "tpu"
        if platform == "rocm" and self.backend == "mosaic_gpu":
            raise ValueError("backend='mosaic_gpu' compiles for NVIDIA GPUs only; use 'triton'.")
        if platform in ("cuda", "rocm"):
            return self.backend
        raise ValueError(f"simlab's Pallas kernels have no lowering for platform {platform!r}.")


@dataclasses.dataclass(frozen=True)
class Plan:
    """A launch as lowered: its target, its tiles, and whether the interpreter runs it
    (always for `"interpret"`; the other targets run there only to check their layout)."""

    target: Target
    tiles: Tiles
    interpret: bool


def plan_launch(
    launch: Launch,
    platform: str,
    kernel: str,
    interior: Sequence[int],
    *,
    width: int,
    num_channels: int,
    dtype,
) -> Plan:
    """The `Plan` of `launch` on `platform`: its target and the tiles fitted to it."""
    target = launch.target(platform)
    tiles = fit_tiles(
        target,
        kernel,
        interior,
        launch.block_shape,
        width=width,
        num_channels=num_channels,
        itemsize=jnp.dtype(dtype).itemsize,
    )
    return Plan(target, tiles, interpret=target == "interpret")


def launch_options(
    num_spatial: int, block_shape: Sequence[int] | None, interpret: bool | None, backend
) -> Launch:
    """Checks the launch options a public kernel takes and returns them as a `Launch`."""
    if interpret is not None and not isinstance(interpret, bool):
        raise TypeError(f"interpret must be True, False or None; got {interpret!r}.")
    if backend is None:
        backend = "triton"
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}; got {backend!r}.")
    if block_shape is not None:
        block_shape = tuple(block_shape)
        if len(block_shape) != num_spatial or not all(
            isinstance(b, int) and b >= 1 for b in block_shape
        ):
            raise ValueError(
                f"block_shape must be {num_spatial} positive integers (one per spatial "
                f"axis); got {block_shape!r}."
            )
    return Launch(block_shape, interpret, backend)


def check_padded(padded: Array, num_spatial: int, width: int, *, kernel: str) -> None:
    if padded.ndim < num_spatial:
        raise ValueError(
            f"{kernel} takes an array with at least {num_spatial} axes (the trailing ones "
            f"spatial); got shape {padded.shape}."
        )
    spatial = padded.shape[padded.ndim - num_spatial :]
    if any(n <= 2 * width for n in spatial):
        raise ValueError(
            f"{kernel}: a padded array needs more than {2 * width} cells along each spatial "
            f"axis ({width} ghost cells per side); got spatial shape {spatial}."
        )
    if not jnp.issubdtype(padded.dtype, jnp.floating):
        raise TypeError(f"{kernel} takes a floating-point array; got dtype {padded.dtype}.")


def checked_spacing(spacing: Sequence[float], num_spatial: int, *, kernel: str):
    spacing = tuple(float(h) for h in spacing)
    if len(spacing) != num_spatial or not all(math.isfinite(h) and h > 0 for h in spacing):
        raise ValueError(
            f"{kernel}: spacing must be {num_spatial} positive finite numbers; got {spacing}."
        )
    return spacing


def split_leading(array: Array, num_trailing: int) -> tuple[Array, tuple[int, ...]]:
    """Collapses the leading (channel/batch) axes into one, so every kernel sees
    `(batch, *trailing)`."""
    leading = array.shape[: array.ndim - num_trailing]
    return array.reshape((math.prod(leading), *array.shape[array.ndim - num_trailing :])), leading


def zero_pad(array: Array, width: int, num_trailing: int) -> Array:
    widths = [(0, 0)] * (array.ndim - num_trailing) + [(width, width)] * num_trailing
    return jnp.pad(array, widths)


def extend_high(array: Array, extents: Sequence[int]) -> Array:
    """Extends the trailing `len(extents)` axes with zeros at the high end to `extents`
    cells (nothing is copied when they have them already)."""
    spatial = array.shape[array.ndim - len(extents) :]
    extra = [e - n for e, n in zip(extents, spatial, strict=True)]
    if not any(extra):
        return array
    return jnp.pad(array, [(0, 0)] * (array.ndim - len(extents)) + [(0, e) for e in extra])
