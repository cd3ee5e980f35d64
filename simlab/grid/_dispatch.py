"""The `impl=` switch: the XLA reference stencils, the Pallas kernel of an operator, or
Fourier-spectral derivatives.

The table below is fixed: `simlab.grid` imports `simlab.kernels` (plain array code that
imports nothing from the grid). A kernel takes exactly the arguments of the matching
`*_interior` function, without `impl`, and returns the same array. Operators without a
kernel take the XLA path under `impl="auto"` and refuse `impl="pallas"`.

`impl="spectral"` replaces the stencils by exact Fourier derivatives on a periodic grid
(`simlab.grid._spectral`). It transforms whole fields, so only the operators that take a
grid serve it; their `*_interior` forms (padded blocks) refuse it.
"""

from collections.abc import Callable
from typing import Literal

import jax

from .. import kernels

Impl = Literal["auto", "xla", "pallas", "spectral"]
IMPLS = ("auto", "xla", "pallas", "spectral")

_PALLAS_KERNELS: dict[str, Callable] = {"laplacian": kernels.laplacian}


def resolve_impl(impl: Impl) -> Literal["xla", "pallas", "spectral"]:
    """The path that `impl` takes on the default backend.

    `"auto"` is Pallas on GPU and TPU and XLA on a CPU (where Pallas only runs in the
    interpreter, which gains nothing). The operators of `simlab.grid` make this choice;
    models with a fused kernel of their own (`simlab.models.GrayScott`) call it to make
    the same one. `"spectral"` is never chosen by `"auto"`: it is asked for.

    **Arguments:**

    - `impl`: `"auto"`, `"xla"`, `"pallas"` or `"spectral"`.

    **Returns:** `"xla"`, `"pallas"` or `"spectral"`.

    !!! example

        ```python
        simlab.grid.resolve_impl("auto")  # "xla" on a CPU, "pallas" on a GPU
        ```
    """
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {list(IMPLS)}; got {impl!r}.")
    if impl == "auto":
        return "pallas" if jax.default_backend() in ("gpu", "tpu") else "xla"
    return impl


def chosen_kernel(impl: Impl, operator: str) -> Callable | None:
    """The Pallas kernel of `operator` to call, or `None` for the XLA reference path; the
    padded (`*_interior`) forms refuse `impl="spectral"`."""
    if impl == "spectral":
        raise ValueError(
            f"impl='spectral' transforms whole periodic fields and has no padded form: call "
            f"simlab.grid.{operator}(field, grid, impl='spectral') instead of "
            f"{operator}_interior, or use impl='xla' on padded blocks."
        )
    if resolve_impl(impl) == "xla":
        return None
    kernel = _PALLAS_KERNELS.get(operator)
    if kernel is None and impl == "pallas":
        raise ValueError(
            f"impl='pallas' was asked for, but {operator!r} has no Pallas kernel (only "
            f"{sorted(_PALLAS_KERNELS)} do); use impl='xla' or impl='auto'."
        )
    return kernel
