"""`export`: a simlab program as a `jax.export.Exported` for any platform, its runtime
checks included.

Equinox raises a failed runtime check (`simulate(..., throw=True)`, Optimistix and Lineax
with `throw=True`) from a host callback, and a host callback cannot be serialized. An
exported program therefore reports a failed check as NaN in the outputs it guards
(Equinox's `EQX_ON_ERROR=nan`), switched on only while the program is traced for export.
"""

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import equinox._errors as equinox_errors  # Equinox reads EQX_ON_ERROR here, per check
import jax

# Custom calls simlab's programs lower to whose IR JAX keeps no compatibility promise for
# (Triton kernels, one cuSOLVER QR routine): an artifact holding them runs with the
# jaxlib that exported it.
UNSTABLE_CUSTOM_CALLS = ("__gpu$xla.gpu.triton", "cusolver_ormqr_ffi")


@contextlib.contextmanager
def checks_as_nan() -> Iterator[None]:
    """Within the block, Equinox's runtime checks traced anew report a failure as NaN
    instead of raising from a host callback.

    JAX's caches are cleared on entry, so that no trace that raises is reused, and on
    exit, so that no trace that reports NaN outlives the block (programs compile anew
    afterwards).
    """
    previous = equinox_errors.EQX_ON_ERROR
    jax.clear_caches()
    equinox_errors.EQX_ON_ERROR = "nan"
    try:
        yield
    finally:
        equinox_errors.EQX_ON_ERROR = previous
        jax.clear_caches()


def export(
    fn: Callable,
    *args: Any,
    platforms: Sequence[str] = ("cuda",),
) -> jax.export.Exported:
    """Exports `fn(*args)` for `platforms` (`"cpu"`, `"cuda"`, `"rocm"`, `"tpu"`), from
    any machine: a CPU-only one exports for GPUs and TPUs.

    Pallas kernels lower for each platform as they compile there (Triton or Mosaic GPU on
    `"cuda"`, Mosaic on `"tpu"`, the interpreter on `"cpu"`). Equinox's runtime checks
    stay in, reporting a failure as NaN in the outputs they guard (a failed solve with
    `throw=True`, say), since the host callback that raises cannot be serialized; JAX's
    caches are cleared before and after, so the process's own programs keep raising.
    Triton kernels make the artifact specific to the jaxlib that exported it.

    **Arguments:**

    - `fn`: a function of arrays (jitted or not); keep everything else static by
      closing over it.
    - `args`: arrays or `jax.ShapeDtypeStruct`s, as `fn` takes them.
    - `platforms`: the platforms to lower for; more than one gives one artifact that
      runs on any of them.

    **Returns:** the `jax.export.Exported` (`.serialize()` it to store it, which needs the
    `flatbuffers` package; `.call(...)` runs it where one of its platforms is).

    !!! example

        ```python
        model = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)
        ts = jnp.linspace(0.0, 1.0, 11)
        exported = simlab.export(
            lambda y0: simlab.simulate(model, y0, ts).ys,
            jax.ShapeDtypeStruct((3,), jnp.float32),
            platforms=["cpu", "cuda", "tpu"],
        )
        exported.call(jnp.ones(3, jnp.float32))  # here: the CPU branch
        ```
    """
    allowed = [jax.export.DisabledSafetyCheck.custom_call(name) for name in UNSTABLE_CUSTOM_CALLS]
    with checks_as_nan():
        return jax.export.export(jax.jit(fn), platforms=tuple(platforms), disabled_checks=allowed)(
            *args
        )
