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


# Where "auto" takes Pallas: the (platform, kernel) pairs whose Pallas path was measured
# faster end to end, in `simulate` (benchmarks/results/tpu.txt, "impl='auto'" rows) or per
# launch (gpu.txt). Everywhere else XLA, which fuses the stencil with the solver's stage
# arithmetic around it and needs no padded copy: on a TPU v5e at 1024², 400 RK4 steps,
# Heat ran 1.9x and GrayScott 1.8x faster on XLA, the cavity's momentum 1.3x faster on
# Pallas; on an H200, XLA's Laplacian and Gray-Scott steps were 6 % and 11 % faster.
# `tests/test_dispatch_choices.py` checks this table against tpu.txt.
PALLAS_MEASURED_FASTER: frozenset[tuple[str, str]] = frozenset({("tpu", "mac_momentum")})
KERNELS = ("laplacian", "reaction_diffusion", "mac_momentum")


def resolve_impl(impl: Impl, kernel: str = "laplacian") -> Literal["xla", "pallas", "spectral"]:
    """The path that `impl` takes for `kernel` on the default backend.

    `"auto"` takes the Pallas kernel only where it was measured faster on that platform
    (`PALLAS_MEASURED_FASTER`, from the benchmark tables), XLA elsewhere: always on a CPU,
    where Pallas runs only in the interpreter. The operators of `simlab.grid` make this
    choice for `"laplacian"`; models with a fused kernel of their own make it for theirs
    (`"reaction_diffusion"` in `simlab.models.GrayScott`, `"mac_momentum"` in
    `simlab.models.WalledNavierStokes2D`). `"spectral"` is never chosen by `"auto"`: it is
    asked for.

    **Arguments:**

    - `impl`: `"auto"`, `"xla"`, `"pallas"` or `"spectral"`.
    - `kernel`: the kernel the choice is for: `"laplacian"`, `"reaction_diffusion"` or
      `"mac_momentum"`.

    **Returns:** `"xla"`, `"pallas"` or `"spectral"`.

    !!! example

        ```python
        simlab.grid.resolve_impl("auto")  # "xla" on a CPU, a GPU and a TPU
        simlab.grid.resolve_impl("auto", "mac_momentum")  # "pallas" on a TPU
        ```
    """
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {list(IMPLS)}; got {impl!r}.")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {list(KERNELS)}; got {kernel!r}.")
    if impl == "auto":
        return "pallas" if (jax.default_backend(), kernel) in PALLAS_MEASURED_FASTER else "xla"
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
    resolve_impl(impl)  # refuses an unknown impl
    kernel = _PALLAS_KERNELS.get(operator)
    if kernel is None:
        if impl == "pallas":
            raise ValueError(
                f"impl='pallas' was asked for, but {operator!r} has no Pallas kernel (only "
                f"{sorted(_PALLAS_KERNELS)} do); use impl='xla' or impl='auto'."
            )
        return None
    return kernel if resolve_impl(impl, operator) == "pallas" else None
