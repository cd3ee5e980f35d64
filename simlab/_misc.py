"""Small helpers shared across simlab's packages."""

import numbers
import sys
import warnings
from typing import Any, TypeAlias

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

# The annotations of counts and plain numbers. `int` and `float` are spelled out for static
# type checkers, which do not count them as `numbers.Integral` and `numbers.Real`; NumPy's
# scalars (`np.int64`, `np.float32`) are registered there.
Integer: TypeAlias = int | numbers.Integral
RealNumber: TypeAlias = float | numbers.Real


# Packages whose frames lie between a user's call and a warning raised inside simlab: the
# warning points at the first frame outside them (a fixed `stacklevel` breaks whenever a
# decorator such as jaxtyping's or a jitted call adds frames).
_LIBRARY_PACKAGES = ("simlab", "equinox", "jaxtyping", "jax", "typeguard")


def warn_at_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """`warnings.warn` attributed to the user's line that led into simlab."""
    frame, level = sys._getframe(1), 2  # level 1 would be this function
    while frame is not None and _in_library(frame.f_globals.get("__name__", "")):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def _in_library(module: str) -> bool:
    return module.split(".", 1)[0] in _LIBRARY_PACKAGES


def is_concrete(value: Any) -> bool:
    """False for a tracer (a value only known at run time under jit, vmap or grad)."""
    return not isinstance(value, jax.core.Tracer)


def checks_raise_in_program() -> bool:
    """Whether a failed runtime check may raise from inside a compiled program here.

    Equinox's `error_if` raises from a host callback. A CPU raises it within the program;
    a TPU's runtime swallows it, and Equinox then waits for a key press (a batch job
    hangs). On accelerators, GPUs alike, simlab's checks report through the status and NaN
    instead, and simlab raises on the host once the results are known. The platform is the
    default device's (`jax.default_device`), else the default backend's. Callers look it up
    as `_misc.checks_raise_in_program()`, so that a test on a CPU can take the other path.
    """
    device = jax.config.jax_default_device
    if device is None:
        return jax.default_backend() == "cpu"
    return (device if isinstance(device, str) else device.platform) == "cpu"


def nan_where(failed: ArrayLike, x: Array) -> Array:
    """`x`, NaN where `failed`, in its values and its derivatives: a failed check reported
    in the values it guards, without a host callback (see `checks_raise_in_program`); per
    member under `vmap`. A product, not `jnp.where`: a NaN chosen by `where` would have a
    zero derivative, and forces or gradients computed through `x` would stay finite."""
    return x * jnp.where(failed, jnp.nan, 1.0)


def is_real_number(value: Any) -> bool:
    """Whether `value` is a plain real number, Python's or NumPy's: not a bool (a flag where
    a number is meant is a slip), not an array, not a traced value."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def as_count(name: str, value: Any, *, minimum: int = 1) -> int:
    """`value` as a Python `int`: an integer (Python's or NumPy's) of at least `minimum`.

    A bool, a float, an array or a traced value is refused with a message naming `name`: a
    count fixes shapes or loop lengths, so it must be known before anything is traced.
    """
    counts = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not (counts and value >= minimum):
        wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {wanted}; got {value!r}.")
    return int(value)


def as_float_array(value: ArrayLike) -> Array:
    """Converts a parameter to a floating-point array (integers would break `jax.grad`)."""
    dtype = jnp.asarray(value).dtype
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    return jnp.asarray(value, dtype=dtype)  # strongly typed, so batches and fits agree


def as_float_array_if_numeric(value: Any) -> Any:
    """`as_float_array` of a number or array; anything else (a string, `None`, a ragged list)
    as it is, for the owner's check to refuse by name: a field's converter sees no name."""
    try:
        return as_float_array(value)
    except (TypeError, ValueError):
        return value


def show_progress(progress: bool | None) -> bool:
    """Whether to draw a progress bar: always for `progress=True`, never for `False`, and for
    `None` (the default) when the process is interactive: stderr is a terminal, or the code
    runs in a Jupyter/IPython kernel (where `tqdm.auto` draws a notebook widget). A batch job
    shows none unless asked."""
    if progress is not None:
        return bool(progress)
    return _stderr_is_terminal() or _in_notebook_kernel()


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced stream, or a closed one
        return False


def _in_notebook_kernel() -> bool:
    # A kernel has imported ipykernel and IPython already: look them up, never import them.
    if sys.modules.get("ipykernel") is None:
        return False
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    if get_ipython is None:
        return False
    try:
        shell = get_ipython()
    except Exception:
        return False
    return getattr(shell, "kernel", None) is not None
