"""The abstract model: parameters with declared ranges, named state, a vector field."""

import abc
import dataclasses
import functools
import math
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import AbstractArray, Array, PyTree

from .. import _display as display
from .._misc import as_float_array_if_numeric, is_concrete
from ..grid._boundary import Periodic
from ..grid._grid import Grid


@dataclasses.dataclass(frozen=True)
class Bounds:
    """The valid range of a physical parameter: `lower < value < upper`.

    `lower_inclusive=True` admits `value == lower` (e.g. a damping of zero).
    """

    lower: float = -math.inf
    upper: float = math.inf
    lower_inclusive: bool = False

    def contains(self, value: Array | np.ndarray) -> Array | np.ndarray:
        """Whether each entry of `value` lies in the range: a JAX array for a JAX array (so
        traced parameters are checked inside compiled code), else a NumPy array."""
        above = value >= self.lower if self.lower_inclusive else value > self.lower
        inside = above & (value < self.upper)
        return inside if isinstance(inside, jax.Array) else np.asarray(inside)

    def describe(self) -> str:
        left = "[" if self.lower_inclusive else "("
        return f"{left}{self.lower:g}, {self.upper:g})"


def parameter(
    *,
    lower: float = -math.inf,
    upper: float = math.inf,
    lower_inclusive: bool = False,
    unit: str = "",
    default: Any = dataclasses.MISSING,
) -> Any:
    """Declares a physical parameter field: an array leaf with a valid range and a unit.

    The range is checked when a model is built from concrete values, as are the dtype and
    any fixed shape the field's annotation declares (`Float[Array, ""]`: a real scalar), and
    `simlab.fit` optimises the parameter through a transform that keeps every iterate inside
    it.
    """
    metadata = {"bounds": Bounds(lower, upper, lower_inclusive), "unit": unit}
    if default is dataclasses.MISSING:
        return eqx.field(converter=as_float_array_if_numeric, metadata=metadata)
    return eqx.field(converter=as_float_array_if_numeric, metadata=metadata, default=default)


def _check_declared_array(owner: str, name: str, value: Any, annotation: Any) -> None:
    """A parameter must be a floating-point array, of the dtype and the fixed shape its
    jaxtyping annotation declares (`Float[Array, ""]`: a real scalar). Named and variadic
    dimensions (`"*grid"`) are left to the model, which knows what they stand for."""
    if not eqx.is_inexact_array(value):
        raise ValueError(
            f"{owner}: parameter {name!r} must be a number or an array of numbers; got {value!r}."
        )
    if not (isinstance(annotation, type) and issubclass(annotation, AbstractArray)):
        return  # e.g. `jax.Array`, or an annotation kept as a string
    if isinstance(annotation.dtypes, list | tuple) and value.dtype.name not in annotation.dtypes:
        kind = annotation.dtype.__name__.lower()  # e.g. "float" for `Float[...]`
        raise ValueError(
            f"{owner}: parameter {name!r} must have a {kind} dtype, as declared; got {value.dtype}."
        )
    sizes = annotation.dim_str.split()
    if all(size.isdigit() for size in sizes) and value.shape != tuple(map(int, sizes)):
        expected = "a scalar" if not sizes else f"of shape {tuple(map(int, sizes))}"
        raise ValueError(
            f"{owner}: parameter {name!r} must be {expected}, as declared; got shape "
            f"{value.shape}. To solve for several values, use simlab.sweep, or build the "
            "model inside jax.vmap."
        )


@functools.cache
def _parameter_fields(cls: type) -> tuple[dataclasses.Field, ...]:
    # A class's fields never change, and `dataclasses.fields` of a Module takes about as
    # long as a small compiled call: look them up once per class.
    return tuple(f for f in dataclasses.fields(cls) if "bounds" in f.metadata)


class AbstractModel(eqx.Module):
    """A physical model: `model(t, y, args)` is the vector field $dy/dt$.

    Subclasses declare their physical parameters with [`simlab.models.parameter`][], so
    that `jax.grad` and `jax.vmap` see them as arrays and their valid ranges are known.
    Every member below that is abstract is answered from static information (the class and
    its static fields), so `simulate` decides the same way directly, under `jit` and `vmap`.
    `step_limit` says in words what bounds `max_stable_step`, for error messages;
    `presets` names the class methods that return a ready `(model, y0)` (e.g.
    `NBody.outer_solar_system`), which an experiment may start from.
    """

    step_limit: ClassVar[str] = "diffusion-number/CFL limit"
    presets: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def __call__(self, t: Any, y: PyTree[Array], args: Any) -> PyTree[Array]:
        """The vector field $dy/dt = f(t, y)$."""

    @property
    @abc.abstractmethod
    def state_shape(self) -> tuple[int, ...]:
        """The shape of the state array that `simulate` expects as `y0`."""

    @property
    @abc.abstractmethod
    def is_stiff(self) -> bool:
        """Whether `simulate(solver=None)` should pick an implicit solver (a static choice)."""

    @abc.abstractmethod
    def max_stable_step(self, solver: Any, y0: Any) -> Array | None:
        """The largest fixed step `solver` can take stably from `y0` (`None`: no known limit),
        a scalar array computed from the possibly traced parameters and `y0`.

        `simulate(..., adaptive=False)` refuses a larger `dt0`, and picks a stable step when
        `dt0=None`.
        """

    def accurate_step(self, solver: Any, y0: Any) -> Array | None:
        """A fixed step for accuracy, which `simulate(..., adaptive=False, dt0=None)` takes
        where it is shorter than the stable one (a Hamiltonian model's, for its energy
        error); `None` (the default): the stable step alone."""
        return None

    def initial_state_valid(self, y0: Array) -> Array:
        """Whether `y0` is a state the model is defined at, beyond being finite (two bodies
        at one point without softening are not): a boolean array computed with `jnp`, which
        `simulate` checks inside compiled code (`RESULTS.invalid_initial_state`); where
        `y0` and the parameters are known, a ValueError naming the problem instead of
        False. Any finite state here."""
        return jnp.asarray(True)

    def describe_blow_up(self, solver: Any, y: Array, dt0: Array) -> str:
        """What the last saved state `y` before a blow-up says of the fixed step `dt0` of
        `solver`, for the error `simulate` raises (a flow's Courant number); "" for nothing."""
        return ""

    @property
    def mass_matrix(self) -> Array | None:
        r"""The constant mass matrix $M$ of $M \dot y = f(t, y)$: its diagonal (1-D) or the
        full matrix (2-D) for the flattened state; `None` (the default) is the identity.
        A singular $M$ makes the model differential-algebraic (see
        [`simlab.models.AbstractDAEModel`][]); only `rodas5p` and `radau5` take one."""
        return None

    @classmethod
    def parameter_names(cls) -> tuple[str, ...]:
        """Names of the physical parameters, in declaration order."""
        return tuple(f.name for f in _parameter_fields(cls))

    @classmethod
    def parameter_bounds(cls) -> dict[str, Bounds]:
        """The valid range of each physical parameter."""
        return {f.name: f.metadata["bounds"] for f in _parameter_fields(cls)}

    @classmethod
    def parameter_units(cls) -> dict[str, str]:
        """The unit of each physical parameter ("" where dimensionless)."""
        return {f.name: f.metadata["unit"] for f in _parameter_fields(cls)}

    def parameters(self) -> dict[str, Array]:
        """The current parameter values, name → array."""
        return {name: getattr(self, name) for name in self.parameter_names()}

    def __repr__(self) -> str:
        """The class and the values of the model's fields: each parameter with its unit, a
        grid by its shape, extent and boundary conditions, settings where they differ from
        their defaults. Under `jit`, `vmap` or `grad`, where the values are not known,
        Equinox's tree view of shapes and dtypes."""
        if display.is_traced(self):
            return eqx.tree_pformat(self)
        return display.call(type(self).__name__, self._shown_fields())

    def _repr_html_(self) -> str:
        """The same fields as an HTML table (a notebook's view of a model)."""
        if display.is_traced(self):
            return display.html_text(eqx.tree_pformat(self))
        units = self.parameter_units()
        return display.html_table(
            [(name, text, units.get(name, "")) for name, text in self._shown_fields(units=False)],
            title=type(self).__name__,
            header=("field", "value", "unit"),
        )

    def _shown_fields(self, *, units: bool = True) -> list[tuple[str, str]]:
        declared = self.parameter_units() if units else {}
        return [
            (name, display.with_unit(text, declared.get(name, "")))
            if getattr(self, name) is not None  # e.g. the part `eqx.partition` left out
            else (name, text)
            for name, text in display.shown_fields(self, _custom_text)
        ]

    def parameters_in_range(self) -> Array:
        """Whether every parameter is finite and inside its declared range: a boolean array
        computed with `jnp`, so it is checked inside compiled code (under `jit`, `vmap`)."""
        inside = jnp.asarray(True)
        for name, bounds in self.parameter_bounds().items():
            value = jnp.asarray(getattr(self, name))
            inside = inside & jnp.all(jnp.isfinite(value) & bounds.contains(value))
        return inside

    def __check_init__(self):
        annotations = {field.name: field.type for field in dataclasses.fields(self)}
        for name, bounds in self.parameter_bounds().items():
            value = getattr(self, name)
            _check_declared_array(type(self).__name__, name, value, annotations[name])
            if not is_concrete(value):
                continue  # traced under jit/vmap/grad: checked where it was concrete
            value = np.asarray(value)
            if not np.all(np.isfinite(value)) or not np.all(bounds.contains(value)):
                raise ValueError(
                    f"{type(self).__name__}: parameter {name!r} must be finite and lie in "
                    f"{bounds.describe()}; got {value if value.size < 8 else 'an array'} "
                    f"(bad entries: {int(np.sum(~(np.isfinite(value) & bounds.contains(value))))})"
                )


def field_text(value: Any) -> str:
    """A field's value as a model shows it: numbers and arrays by their values, a nested
    model by its own fields, a grid compactly."""
    return display.value(value, _custom_text)


def _custom_text(value: Any) -> str | None:
    if isinstance(value, AbstractModel):
        return repr(value)
    if isinstance(value, Grid):
        return _grid_text(value)
    return None


def _grid_text(grid: Grid) -> str:
    """`Grid(shape=(64, 64), extent=(1, 1), boundary='periodic')`: the grid as it would be
    built, each boundary condition with its values, pairs and axes only where they differ."""
    fields = [("shape", display.value(grid.shape)), ("extent", display.value(grid.extent))]
    if any(grid.origin):
        fields.append(("origin", display.value(grid.origin)))
    axes = []
    for pair in grid.boundaries:
        low, high = ("'periodic'" if isinstance(c, Periodic) else field_text(c) for c in pair)
        axes.append(low if low == high else f"({low}, {high})")
    fields.append(("boundary", axes[0] if len(set(axes)) == 1 else f"[{', '.join(axes)}]"))
    return display.call("Grid", fields)


class AbstractODEModel(AbstractModel):
    """A model whose state is a vector of named components (`state_names`).

    Subclasses set the class variables `state_names` and, for stiff dynamics, `stiff = True`
    (then `simulate(solver=None)` picks an implicit solver); `state_units` gives the unit of
    each component (`()`: dimensionless or unknown), which plots put on their axes.
    """

    state_names: ClassVar[tuple[str, ...]]
    state_units: ClassVar[tuple[str, ...]] = ()
    stiff: ClassVar[bool] = False

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (len(self.state_names),)

    @property
    def is_stiff(self) -> bool:
        return self.stiff

    def max_stable_step(self, solver: Any, y0: Any) -> float | None:
        return None
