r"""Time-dependent wall values: a grid model whose boundary values follow a schedule that
`jax.grad` and `simlab.fit` see.

A grid's conditions hold their values as array leaves, so a constant wall value is fitted
directly (`params=["grid"]`). `BoundaryDriven` adds time dependence: at each time it sets
the driven sides' values to the schedule's (piecewise linear between knots) and evaluates
the wrapped model once.
"""

from collections.abc import Sequence
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..grid import Dirichlet, Neumann, Robin
from ._base import parameter
from ._pde import AbstractGridModel
from ._wrapped import AbstractWrappedModel

_SIDES = ("low", "high")


def _with_value(condition: Any, value: Any) -> Any:
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


class BoundaryDriven(AbstractWrappedModel):
    r"""A grid model whose wall values are an array parameter, constant or piecewise linear
    in time, so gradients flow into them and `simlab.fit` can recover a boundary temperature
    or flux from interior measurements.

    The wrapped model's grid says which condition holds on each side (its own values on
    the driven sides are ignored); `values` gives them. The vector field is the wrapped
    model's with those values in its grid.

    **Arguments:**

    - `model`: a grid model ([`simlab.models.AbstractGridModel`][]) with a Dirichlet,
      Neumann or Robin condition on each driven side.
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
        if not isinstance(self.model, AbstractGridModel):
            raise ValueError(
                f"BoundaryDriven drives the walls of a grid model (simlab.models."
                f"AbstractGridModel, e.g. Heat); got {type(self.model).__name__}."
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

    def boundary_values(self, t: Any) -> Array:
        """The value on each driven side at time `t`, shape `(len(sides),)`."""
        if self.times is None:
            return self.values
        times = jnp.asarray(self.times, dtype=self.values.dtype)
        return jnp.stack([jnp.interp(t, times, row) for row in self.values])

    def model_at(self, t: Any) -> AbstractGridModel:
        """The wrapped model with the driven sides' values at time `t`."""
        grid = self.model.grid
        pairs = [list(pair) for pair in grid.boundaries]
        for (axis, side), value in zip(self.sides, self.boundary_values(t), strict=True):
            position = _SIDES.index(side)
            pairs[axis][position] = _with_value(pairs[axis][position], value)
        boundaries = tuple(tuple(pair) for pair in pairs)
        return eqx.tree_at(lambda model: model.grid.boundaries, self.model, boundaries)

    def __call__(self, t, y, args):
        return self.model_at(t)(t, y, args)
