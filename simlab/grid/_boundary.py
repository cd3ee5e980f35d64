"""Boundary conditions, each of which knows how to fill the ghost cells of one grid side."""

import abc
import math
from typing import Literal

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array

Side = Literal["low", "high"]


def _side_slab(field: Array, axis: int, start: int, stop: int) -> Array:
    index = [slice(None)] * field.ndim
    index[axis] = slice(start, stop)
    return field[tuple(index)]


def mirror_cells(field: Array, axis: int, side: Side, width: int) -> Array:
    """The `width` interior cells nearest a side, ordered as mirror images of its ghost cells.

    Ghost cells are ordered as they sit in the padded array, so the mirror of the ghost cell
    right next to the low face is the first interior cell, and so on outwards.
    """
    if side == "low":
        return jnp.flip(_side_slab(field, axis, 0, width), axis=axis)
    size = field.shape[axis]
    return jnp.flip(_side_slab(field, axis, size - width, size), axis=axis)


def _distance_to_mirror(width: int, side: Side, spacing: float, ndim: int, axis: int) -> Array:
    """Distance between each ghost cell centre and its mirror cell centre, $(2k - 1) h$."""
    distances = spacing * (2.0 * jnp.arange(1.0, width + 1.0) - 1.0)
    if side == "low":
        distances = distances[::-1]  # the ghost cell farthest out comes first
    shape = [1] * ndim
    shape[axis] = width
    return distances.reshape(shape)


class AbstractBoundaryCondition(eqx.Module):
    """A condition on one side of one grid axis, applied by filling ghost cells.

    Subclasses implement `ghost_cells`, so `simlab.grid.pad` and every stencil operator
    serve all conditions with the same interior code.
    """

    @abc.abstractmethod
    def ghost_cells(self, field: Array, axis: int, side: Side, width: int, spacing: float) -> Array:
        """The `width` ghost cells beyond `side` of `axis`, ordered as in the padded array.

        **Arguments:**

        - `field`: the unpadded array (any leading channel axes allowed).
        - `axis`: the array axis (negative or non-negative) normal to the side.
        - `side`: `"low"` (before index 0) or `"high"` (after the last index).
        - `width`: how many ghost cells.
        - `spacing`: the grid spacing along `axis`.

        **Returns:** an array shaped like `field` except `width` long along `axis`.
        """


class Periodic(AbstractBoundaryCondition):
    """Periodic boundary: the ghost cells beyond one side are the cells at the opposite side.

    Must be set on both sides of an axis.
    """

    def ghost_cells(self, field, axis, side, width, spacing):
        size = field.shape[axis]
        if side == "low":
            return _side_slab(field, axis, size - width, size)
        return _side_slab(field, axis, 0, width)


class Dirichlet(AbstractBoundaryCondition):
    r"""Fixed value $u = g$ on the boundary face (between the last cell and its ghost).

    Ghost cells are odd reflections about the face, $u_\text{ghost} = 2g - u_\text{mirror}$,
    so the face value is $g$ to second order.

    **Arguments:**

    - `value`: the boundary value $g$ (a finite float; default 0).
    """

    value: float = eqx.field(static=True, default=0.0)

    def __check_init__(self):
        if not isinstance(self.value, int | float) or not math.isfinite(self.value):
            raise ValueError(f"Dirichlet value must be a finite float; got {self.value!r}.")

    def ghost_cells(self, field, axis, side, width, spacing):
        return 2.0 * self.value - mirror_cells(field, axis, side, width)


class Neumann(AbstractBoundaryCondition):
    r"""Fixed outward normal derivative $\partial u / \partial n = q$ on the boundary face.

    Zero (the default) is a no-flux wall: diffusion then conserves the total mass exactly.
    Ghost cells are $u_\text{ghost} = u_\text{mirror} + q\,(2k-1)\,h$ for the $k$-th cell out.

    **Arguments:**

    - `normal_derivative`: $q$, the derivative along the outward normal (a finite float).
    """

    normal_derivative: float = eqx.field(static=True, default=0.0)

    def __check_init__(self):
        value = self.normal_derivative
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"Neumann normal_derivative must be a finite float; got {value!r}.")

    def ghost_cells(self, field, axis, side, width, spacing):
        mirror = mirror_cells(field, axis, side, width)
        if self.normal_derivative == 0:
            return mirror
        axis = axis % field.ndim
        distances = _distance_to_mirror(width, side, spacing, field.ndim, axis)
        return mirror + self.normal_derivative * distances.astype(field.dtype)


BOUNDARY_NAMES: dict[str, type[AbstractBoundaryCondition]] = {
    "periodic": Periodic,
    "dirichlet": Dirichlet,
    "neumann": Neumann,
}
