"""A model built around another: its grid, state and step limits are the wrapped model's."""

from typing import Any

import equinox as eqx
from jaxtyping import Array

from ._base import AbstractModel


class AbstractWrappedModel(AbstractModel):
    """A model that changes how another model's vector field is evaluated (its boundary
    values, or the devices it runs on) but not what the state is: the grid, state shape,
    stiffness and stable step all come from the wrapped `model`."""

    model: eqx.AbstractVar[AbstractModel]

    @property
    def grid(self) -> Any:
        """The grid of the wrapped model (its global grid, for a split one)."""
        return self.model.grid

    @property
    def state_shape(self) -> tuple[int, ...]:
        return self.model.state_shape

    @property
    def is_stiff(self) -> bool:
        return self.model.is_stiff

    @property
    def step_limit(self) -> str:
        return self.model.step_limit

    def max_stable_step(self, solver: Any, y0: Any) -> Array | None:
        return self.model.max_stable_step(solver, y0)

    def describe_blow_up(self, solver: Any, y: Array, dt0: Array) -> str:
        return self.model.describe_blow_up(solver, y, dt0)
