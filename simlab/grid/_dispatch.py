"""The `impl=` switch: the XLA reference path, or a Pallas kernel registered by name.

`simlab.kernels` registers its kernels here when imported (`register_pallas_kernel`). A
kernel takes exactly the arguments of the matching `*_interior` function, without `impl`:
`kernel(padded, spacing, **options)` (for advection `kernel(padded, velocity, spacing,
**options)`), and returns the same array. `"gray_scott"` is a fused model vector field
rather than an operator: `kernel(padded_state, spacing, feed_rate, kill_rate,
diffusivity_u, diffusivity_v)` returns both tendencies of a 2-D state with scalar
coefficients (see `simlab.models.GrayScott`).
"""

import importlib
from collections.abc import Callable
from typing import Literal

import jax

Impl = Literal["auto", "xla", "pallas"]
IMPLS = ("auto", "xla", "pallas")
OPERATORS = ("laplacian", "gradient", "divergence", "advection", "diffusion", "gray_scott")

_PALLAS_KERNELS: dict[str, Callable] = {}


def register_pallas_kernel(operator: str, kernel: Callable) -> None:
    """Makes `kernel` the `impl="pallas"` implementation of `operator` (one of `OPERATORS`).

    The kernel receives the arguments of `simlab.grid.<operator>_interior` (a padded
    array, the spacing, the operator's keyword options) and must return the same result.
    """
    if operator not in OPERATORS:
        raise ValueError(f"unknown operator {operator!r}; use one of {list(OPERATORS)}.")
    if not callable(kernel):
        raise TypeError(f"a Pallas kernel must be callable; got {kernel!r}.")
    _PALLAS_KERNELS[operator] = kernel


def pallas_kernel(operator: str) -> Callable | None:
    """The registered Pallas kernel of `operator`, importing `simlab.kernels` on first use."""
    if operator not in _PALLAS_KERNELS:
        try:
            importlib.import_module("simlab.kernels")
        except ModuleNotFoundError as error:
            if error.name != "simlab.kernels":
                raise
    return _PALLAS_KERNELS.get(operator)


def chosen_kernel(impl: str, operator: str) -> Callable | None:
    """The Pallas kernel to call, or `None` for the XLA reference path.

    `"auto"` takes Pallas on GPU and TPU when a kernel is registered, XLA otherwise (on
    CPU Pallas only runs in interpret mode, which gains nothing).
    """
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {list(IMPLS)}; got {impl!r}.")
    if impl == "xla":
        return None
    if impl == "auto":
        return pallas_kernel(operator) if jax.default_backend() in ("gpu", "tpu") else None
    kernel = pallas_kernel(operator)
    if kernel is None:
        raise ValueError(
            f"impl='pallas' was asked for, but no Pallas kernel is registered for {operator!r}; "
            "use impl='xla' (or 'auto'), or register one with "
            "simlab.grid.register_pallas_kernel."
        )
    return kernel
