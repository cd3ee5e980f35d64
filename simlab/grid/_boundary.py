"""Boundary conditions, each of which knows how to fill the ghost cells of one grid side.

The kind of a condition (its class, and a Robin condition's coefficients) is static; the
values it imposes are array leaves, so gradients flow into them.
"""

import abc
import math
from typing import Any, Literal

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._misc import RealNumber, as_float_array_if_numeric, is_concrete, is_real_number

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


def _value_field(default: float = 0.0) -> Any:
    """A boundary value: an ordinary floating-point array leaf, so `jax.grad` flows into it."""
    return eqx.field(converter=as_float_array_if_numeric, default=default)


def _check_value(owner: str, name: str, value: Array) -> None:
    """A boundary value must be a finite scalar (checked where it is concrete)."""
    if not eqx.is_inexact_array(value):
        raise ValueError(f"{owner} {name} must be a finite float; got {value!r}.")
    if jnp.shape(value) != ():
        raise ValueError(f"{owner} {name} must be a scalar; got shape {jnp.shape(value)}.")
    if is_concrete(value) and not bool(jnp.isfinite(value)):
        raise ValueError(f"{owner} {name} must be a finite float; got {float(value)!r}.")


def _as_coefficient(number: RealNumber) -> Any:
    """A real number (Python's or NumPy's) as a Python float, which hashes, compares and
    promotes as a static coefficient should; anything else as it is, for
    `_check_coefficient` to refuse by name."""
    return float(number) if is_real_number(number) else number


def _coefficient_field() -> Any:
    """A Robin coefficient: static, as it decides whether the ghost cells are singular."""
    return eqx.field(static=True, converter=_as_coefficient)


def _check_coefficient(owner: str, name: str, number: Any) -> None:
    if not (isinstance(number, float) and math.isfinite(number)):
        raise ValueError(f"{owner} {name} must be a finite float; got {number!r}.")


class Dirichlet(AbstractBoundaryCondition):
    r"""Fixed value $u = g$ on the boundary face (between the last cell and its ghost).

    Ghost cells are odd reflections about the face, $u_\text{ghost} = 2g - u_\text{mirror}$,
    so the face value is $g$ to second order. $g$ is an array leaf: `jax.grad` of a
    solution with respect to it, and `simlab.fit` of a wall temperature, work as for any
    model parameter.

    **Arguments:**

    - `value`: the boundary value $g$ (a finite scalar; default 0).
    """

    value: Float[Array, ""] = _value_field()

    def __check_init__(self):
        _check_value("Dirichlet", "value", self.value)

    def ghost_cells(self, field, axis, side, width, spacing):
        return 2.0 * self.value.astype(field.dtype) - mirror_cells(field, axis, side, width)


class Neumann(AbstractBoundaryCondition):
    r"""Fixed outward normal derivative $\partial u / \partial n = q$ on the boundary face.

    Zero (the default) is a no-flux wall: diffusion then conserves the total mass exactly.
    Ghost cells are $u_\text{ghost} = u_\text{mirror} + q\,(2k-1)\,h$ for the $k$-th cell out.
    $q$ is an array leaf (differentiable, fittable).

    **Arguments:**

    - `normal_derivative`: $q$, the derivative along the outward normal (a finite scalar).
    """

    normal_derivative: Float[Array, ""] = _value_field()

    def __check_init__(self):
        _check_value("Neumann", "normal_derivative", self.normal_derivative)

    def ghost_cells(self, field, axis, side, width, spacing):
        mirror = mirror_cells(field, axis, side, width)
        axis = axis % field.ndim
        distances = _distance_to_mirror(width, side, spacing, field.ndim, axis)
        return mirror + self.normal_derivative.astype(field.dtype) * distances.astype(field.dtype)


class Robin(AbstractBoundaryCondition):
    r"""A mixed condition $a u + b\, \partial u / \partial n = g$ on the boundary face, with
    $\partial u/\partial n$ the derivative along the outward normal.

    $b = 0$ is Dirichlet ($u = g/a$), $a = 0$ Neumann; $a, b > 0$ is Newton's law of
    cooling, a flux $-\partial u/\partial n = (a/b)(u - g/a)$ out through the face towards
    an exterior at $g/a$. The $k$-th ghost cell is set so that the face value
    $\tfrac12(u_\text{ghost} + u_\text{mirror})$ and the derivative
    $(u_\text{ghost} - u_\text{mirror})/d_k$, $d_k = (2k-1)h$, satisfy the condition:

    $$
    u_\text{ghost} = \frac{g - (a/2 - b/d_k)\, u_\text{mirror}}{a/2 + b/d_k},
    $$

    exact for linear profiles, second order otherwise. The coefficients $a, b$ are static
    (they decide whether the formula is singular on a grid); $g$ is an array leaf.

    **Arguments:**

    - `value_coefficient`: $a$ (a finite float).
    - `derivative_coefficient`: $b$ (a finite float; $a$ and $b$ not both zero).
    - `value`: $g$ (a finite scalar; default 0).
    """

    value_coefficient: float = _coefficient_field()
    derivative_coefficient: float = _coefficient_field()
    value: Float[Array, ""] = _value_field()

    def __check_init__(self):
        for name in ("value_coefficient", "derivative_coefficient"):
            _check_coefficient("Robin", name, getattr(self, name))
        _check_value("Robin", "value", self.value)
        if self.value_coefficient == 0 and self.derivative_coefficient == 0:
            raise ValueError(
                "Robin condition a u + b du/dn = g with a = b = 0 constrains nothing (ill-posed); "
                "give a nonzero value_coefficient a or derivative_coefficient b."
            )

    def ghost_cells(self, field, axis, side, width, spacing):
        mirror = mirror_cells(field, axis, side, width)
        axis = axis % field.ndim
        distances = _distance_to_mirror(width, side, spacing, field.ndim, axis)
        distances = distances.astype(field.dtype)
        a, b = self.value_coefficient, self.derivative_coefficient
        # numpy on the static spacing: under jit the jnp distances are staged.
        if any(a / 2 + b / (spacing * (2 * k - 1)) == 0 for k in range(1, width + 1)):
            raise ValueError(
                f"Robin condition with a = {a:g}, b = {b:g} is singular on this grid: "
                f"a/2 + b/d = 0 at a ghost-cell distance d = -2b/a = {-2 * b / a:g}; refine or "
                "coarsen the grid, or check the sign of b (b/a > 0 is the physical case)."
            )
        value = self.value.astype(field.dtype)
        return (value - (a / 2 - b / distances) * mirror) / (a / 2 + b / distances)


class Inflow(AbstractBoundaryCondition):
    r"""An open side through which a flow enters at a prescribed normal velocity
    (the low-$x$ side of [`simlab.models.WalledNavierStokes2D`][]).

    The model reads `velocity`, the speed into the domain through each boundary face, as
    the normal velocity on that side; `tangential` is the velocity along the side, imposed
    like a sliding wall's through ghost cells, $u_\text{ghost} = 2g - u_\text{mirror}$
    (so as a condition on any other field, the ghost cells are those of
    `Dirichlet(tangential)`). Both are array leaves: `jax.grad` flows into them.

    **Arguments:**

    - `velocity`: the inflow speed, a scalar (uniform) or one value per face along the
      side (a 1-D array as long as the grid's other axis).
    - `tangential`: the tangential velocity on the side (a finite scalar; default 0).

    !!! example

        ```python
        boundary = [(simlab.Inflow(1.0), simlab.Outflow()), "dirichlet"]
        grid = simlab.Grid((16, 8), extent=(2.0, 1.0), boundary=boundary)  # a channel
        ```
    """

    velocity: Float[Array, "*faces"] = eqx.field(converter=as_float_array_if_numeric)
    tangential: Float[Array, ""] = _value_field()

    def __check_init__(self):
        if not eqx.is_inexact_array(self.velocity) or jnp.ndim(self.velocity) > 1:
            raise ValueError(
                "Inflow velocity must be a float or a 1-D array of floats (one per boundary "
                f"face); got {self.velocity!r}."
            )
        if is_concrete(self.velocity) and not bool(jnp.all(jnp.isfinite(self.velocity))):
            raise ValueError(f"Inflow velocity must be finite; got {self.velocity!r}.")
        _check_value("Inflow", "tangential", self.tangential)

    @classmethod
    def parabolic(cls, mean_speed: Any, num_faces: int) -> "Inflow":
        r"""The plane Poiseuille profile $6\bar U\,\xi(1 - \xi)$, $\xi$ the fraction of
        the way across the side, averaged over each of `num_faces` equal faces: the
        discrete flux through the side is exactly $\bar U$ times its length.

        !!! example

            ```python
            inflow = simlab.Inflow.parabolic(1.0, num_faces=8)  # peak 1.5 at the centre
            ```
        """
        if not isinstance(num_faces, int) or num_faces < 1:
            raise ValueError(
                f"Inflow.parabolic: num_faces must be a positive integer; got {num_faces!r}."
            )
        width = 1.0 / num_faces
        centres = (np.arange(num_faces) + 0.5) * width
        # The mean of xi (1 - xi) over a face is its centre value less width^2 / 12.
        shape = 6.0 * (centres * (1.0 - centres) - width**2 / 12.0)
        return cls(velocity=as_float_array_if_numeric(mean_speed) * jnp.asarray(shape))

    def ghost_cells(self, field, axis, side, width, spacing):
        return 2.0 * self.tangential.astype(field.dtype) - mirror_cells(field, axis, side, width)


class Outflow(AbstractBoundaryCondition):
    r"""An open side through which a flow leaves (the high-$x$ side of
    [`simlab.models.WalledNavierStokes2D`][]): zero normal gradient of the velocity, ghost
    cells mirroring the interior (as `Neumann(0.0)`), and the pressure held at 0 on the
    side.

    !!! example

        ```python
        outlet = simlab.Outflow()
        ```
    """

    def ghost_cells(self, field, axis, side, width, spacing):
        return mirror_cells(field, axis, side, width)


BOUNDARY_NAMES: dict[str, type[AbstractBoundaryCondition]] = {
    "periodic": Periodic,
    "dirichlet": Dirichlet,
    "neumann": Neumann,
    "outflow": Outflow,
}
