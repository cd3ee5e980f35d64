"""The abstract model: parameters with declared ranges, named state, a vector field."""

import abc
import dataclasses
import math
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, PyTree


@dataclasses.dataclass(frozen=True)
class Bounds:
    """The valid range of a physical parameter: `lower < value < upper`.

    `lower_inclusive=True` admits `value == lower` (e.g. a damping of zero).
    """

    lower: float = -math.inf
    upper: float = math.inf
    lower_inclusive: bool = False

    def contains(self, value: np.ndarray) -> np.ndarray:
        above = value >= self.lower if self.lower_inclusive else value > self.lower
        return np.asarray(above & (value < self.upper))

    def describe(self) -> str:
        left = "[" if self.lower_inclusive else "("
        return f"{left}{self.lower:g}, {self.upper:g})"


def as_float_array(value: ArrayLike) -> Array:
    """Converts a parameter to a floating-point array (integers would break `jax.grad`)."""
    dtype = jnp.asarray(value).dtype
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    return jnp.asarray(value, dtype=dtype)  # strongly typed, so batches and fits agree


def parameter(
    *,
    lower: float = -math.inf,
    upper: float = math.inf,
    lower_inclusive: bool = False,
    unit: str = "",
    default: Any = dataclasses.MISSING,
) -> Any:
    """Declares a physical parameter field: an array leaf with a valid range and a unit.

    The range is checked when a model is built from concrete values, and `simlab.fit`
    optimises the parameter through a transform that keeps every iterate inside it.
    """
    metadata = {"bounds": Bounds(lower, upper, lower_inclusive), "unit": unit}
    if default is dataclasses.MISSING:
        return eqx.field(converter=as_float_array, metadata=metadata)
    return eqx.field(converter=as_float_array, metadata=metadata, default=default)


def is_concrete(value: Any) -> bool:
    """False for a tracer (a value only known at run time under jit, vmap or grad)."""
    return not isinstance(value, jax.core.Tracer)


class AbstractModel(eqx.Module):
    """A physical model: `model(t, y, args)` is the vector field $dy/dt$.

    Subclasses declare their physical parameters with [`simlab.models.parameter`][], so
    that `jax.grad` and `jax.vmap` see them as arrays and their valid ranges are known,
    and set the class variables `state_names` and `stiff`.
    """

    state_names: ClassVar[tuple[str, ...]]
    stiff: ClassVar[bool] = False

    @abc.abstractmethod
    def __call__(self, t: Any, y: PyTree[Array], args: Any) -> PyTree[Array]:
        """The vector field $dy/dt = f(t, y)$."""

    @property
    def state_shape(self) -> tuple[int, ...]:
        """The shape of the state array that `simulate` expects as `y0`."""
        return (len(self.state_names),)

    @property
    def is_stiff(self) -> bool:
        """Whether an implicit solver should be the default for these parameter values."""
        return self.stiff

    @classmethod
    def parameter_names(cls) -> tuple[str, ...]:
        """Names of the physical parameters, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls) if "bounds" in f.metadata)

    @classmethod
    def parameter_bounds(cls) -> dict[str, Bounds]:
        """The valid range of each physical parameter."""
        return {
            f.name: f.metadata["bounds"] for f in dataclasses.fields(cls) if "bounds" in f.metadata
        }

    @classmethod
    def parameter_units(cls) -> dict[str, str]:
        """The unit of each physical parameter ("" where dimensionless)."""
        return {
            f.name: f.metadata["unit"] for f in dataclasses.fields(cls) if "bounds" in f.metadata
        }

    def max_stable_step(self, solver: Any, y0: Any) -> float | None:
        """The largest fixed step `solver` can take stably from `y0` (`None`: no known limit).

        `simulate(..., adaptive=False)` refuses a larger `dt0`, and picks a stable step when
        `dt0=None`. Grid models (diffusion number, CFL condition) override this.
        """
        return None

    def parameters(self) -> dict[str, Array]:
        """The current parameter values, name → array."""
        return {name: getattr(self, name) for name in self.parameter_names()}

    def __check_init__(self):
        for name, bounds in self.parameter_bounds().items():
            value = getattr(self, name)
            if not is_concrete(value):
                continue  # traced under jit/vmap/grad: checked where it was concrete
            value = np.asarray(value)
            if not np.all(np.isfinite(value)) or not np.all(bounds.contains(value)):
                raise ValueError(
                    f"{type(self).__name__}: parameter {name!r} must be finite and lie in "
                    f"{bounds.describe()}; got {value if value.size < 8 else 'an array'} "
                    f"(bad entries: {int(np.sum(~(np.isfinite(value) & bounds.contains(value))))})"
                )


STABLE_STEP_SAFETY = 0.9  # a step at the exact limit leaves the fastest mode undamped


def stable_fixed_step(model: Any, solver: Any, y0: Any, dt0: Any) -> Any:
    """`dt0` checked against `model.max_stable_step`, or a stable step when `dt0` is None."""
    if not isinstance(model, AbstractModel):
        return dt0
    limit = model.max_stable_step(solver, y0)
    if limit is None:
        return dt0
    solver_name = type(solver).__name__
    if limit == 0.0:
        raise ValueError(
            f"no fixed step is stable for {type(model).__name__} with {solver_name} (its "
            "eigenvalues lie outside the solver's stability region at any step); use a "
            "higher-order explicit solver such as solver='tsit5', an implicit solver, or "
            "adaptive=True."
        )
    if dt0 is None:
        return STABLE_STEP_SAFETY * limit
    if is_concrete(dt0) and float(dt0) > limit:
        raise ValueError(
            f"dt0={float(dt0):g} is above the largest stable step {limit:.6g} of {solver_name} "
            f"for {type(model).__name__} (diffusion-number/CFL limit); pass dt0<={limit:.6g}, "
            "dt0=None to have one chosen, an implicit solver, or adaptive=True."
        )
    return dt0
