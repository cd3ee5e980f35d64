r"""Wall values as parameters: a grid model driven by (time-dependent) boundary values that
`jax.grad` and `simlab.fit` see.

A grid's conditions are static, because they decide which ghost-cell formula applies. Their
*values* enter the vector field affinely: with $g_s$ the value on side $s$ (a Dirichlet
value, a Neumann flux, a Robin right-hand side),

$$
f_g(t, u) = f_0(t, u) + \sum_s g_s(t)\, r_s, \qquad r_s = f_{e_s}(t, 0) - f_0(t, 0),
$$

where $f_0$ has every driven value set to zero and $f_{e_s}$ has a unit value on side $s$.
This holds exactly for stencils that are linear in the padded field (diffusion, linear
advection) plus pointwise terms, which is every model in `_AFFINE_IN_WALL_VALUES`.
"""

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..grid import Dirichlet, Grid, Neumann, Robin
from ._base import AbstractModel, parameter
from ._pde import AbstractGridModel, AdvectionDiffusion, GrayScott, Heat, Wave

_AFFINE_IN_WALL_VALUES = (Heat, AdvectionDiffusion, GrayScott, Wave)
_SIDES = ("low", "high")


def _with_value(condition: Any, value: float) -> Any:
    if isinstance(condition, Dirichlet):
        return Dirichlet(value)
    if isinstance(condition, Neumann):
        return Neumann(value)
    if isinstance(condition, Robin):
        return Robin(condition.value_coefficient, condition.derivative_coefficient, value)
    raise ValueError(
        f"a {type(condition).__name__} side has no value to drive; drive a Dirichlet, Neumann "
        "or Robin side."
    )


class BoundaryDriven(AbstractModel):
    r"""A grid model whose wall values are an array parameter, constant or piecewise linear
    in time, so gradients flow into them and `simlab.fit` can recover a boundary temperature
    or flux from interior measurements.

    The wrapped model's grid says which condition holds on each side (its own values on
    the driven sides are ignored); `values` gives them. The vector field is the wrapped
    model's with those values, computed as the zero-value field plus each value times the
    field's response to a unit value (exact: the models allowed are affine in their wall
    values).

    **Arguments:**

    - `model`: a `Heat`, `AdvectionDiffusion`, `GrayScott` or `Wave` model.
    - `values`: shape `(len(sides),)` for constant values, or `(len(sides), len(times))`
      for values at `times`, linearly interpolated between them (held beyond the ends).
    - `sides`: the driven sides, `(axis, "low" | "high")` pairs.
    - `times`: the increasing times of the columns of `values` (`None`: constant values).

    !!! example

        ```python
        grid = simlab.Grid((32,), extent=1.0, boundary=("dirichlet", "neumann"))
        heat = simlab.models.Heat(diffusivity=0.1, grid=grid)
        # The left wall warms from 0 to 1 over the first second, then holds.
        model = simlab.models.BoundaryDriven(
            heat, values=jnp.array([[0.0, 1.0]]), sides=((0, "low"),), times=(0.0, 1.0)
        )
        trajectory = simlab.simulate(model, jnp.zeros(32), jnp.linspace(0.0, 2.0, 5))
        ```
    """

    model: AbstractGridModel
    values: Float[Array, "sides *times"] = parameter()
    sides: tuple[tuple[int, str], ...] = eqx.field(static=True)
    times: tuple[float, ...] | None = eqx.field(static=True, default=None)

    state_names: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        model: AbstractGridModel,
        *,
        values: Any,
        sides: Sequence[tuple[int, str]],
        times: Sequence[float] | None = None,
    ):
        self.model = model
        self.values = values
        self.sides = tuple((int(axis), side) for axis, side in sides)
        self.times = None if times is None else tuple(float(t) for t in times)

    def __check_init__(self):
        if not isinstance(self.model, _AFFINE_IN_WALL_VALUES):
            raise ValueError(
                f"BoundaryDriven drives models whose vector field is affine in the wall values "
                f"({', '.join(c.__name__ for c in _AFFINE_IN_WALL_VALUES)}); got "
                f"{type(self.model).__name__}."
            )
        grid = self.model.grid
        if not self.sides or len(set(self.sides)) != len(self.sides):
            raise ValueError(f"sides must name distinct (axis, side) pairs; got {self.sides}.")
        for axis, side in self.sides:
            if not 0 <= axis < grid.ndim or side not in _SIDES:
                raise ValueError(
                    f"each side is (axis, 'low' | 'high') with 0 <= axis < {grid.ndim}; got "
                    f"{(axis, side)!r}."
                )
            _with_value(grid.boundary(axis, side), 0.0)  # refuses periodic sides
        expected = (len(self.sides),) if self.times is None else (len(self.sides), len(self.times))
        if jnp.shape(self.values) != expected:
            raise ValueError(
                f"values must have shape {expected} (one row per side"
                f"{'' if self.times is None else ', one column per time'}); got "
                f"{jnp.shape(self.values)}."
            )
        if self.times is not None and not np.all(np.diff(self.times) > 0):
            raise ValueError(f"times must be strictly increasing; got {self.times}.")

    @property
    def grid(self) -> Grid:
        return self.model.grid

    @property
    def state_shape(self) -> tuple[int, ...]:
        return self.model.state_shape

    @property
    def is_stiff(self) -> bool:
        return self.model.is_stiff

    def boundary_values(self, t: Any) -> Array:
        """The value on each driven side at time `t`, shape `(len(sides),)`."""
        if self.times is None:
            return self.values
        times = jnp.asarray(self.times, dtype=self.values.dtype)
        return jnp.stack([jnp.interp(t, times, row) for row in self.values])

    def _with_values(self, unit_side: int | None) -> AbstractGridModel:
        """The wrapped model with every driven value 0, except 1 on `sides[unit_side]`."""
        grid = self.model.grid
        pairs = [list(pair) for pair in grid.boundaries]
        for index, (axis, side) in enumerate(self.sides):
            value = 1.0 if index == unit_side else 0.0
            position = _SIDES.index(side)
            pairs[axis][position] = _with_value(pairs[axis][position], value)
        new_grid = Grid(
            grid.shape,
            spacing=grid.spacing,
            origin=grid.origin,
            boundary=[tuple(pair) for pair in pairs],
        )
        return dataclasses.replace(self.model, grid=new_grid)

    def __call__(self, t, y, args):
        base = self._with_values(None)
        zero = jnp.zeros_like(y)
        at_rest = base(t, zero, args)
        field = base(t, y, args)
        for index, value in enumerate(self.boundary_values(t)):
            response = self._with_values(index)(t, zero, args) - at_rest
            field = field + value * response
        return field

    def max_stable_step(self, solver: Any, y0: Any) -> Array | None:
        return self.model.max_stable_step(solver, y0)
