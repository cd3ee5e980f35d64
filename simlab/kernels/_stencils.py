r"""The Laplacian's central-difference weights and its plain-`jax.numpy` form, written once.

The Pallas kernels, their references and the XLA path of `simlab.grid` all evaluate the
same sum,

$$
(\nabla^2 u)_{i} = \sum_{a} \sum_{k=-w}^{w} \frac{c_k}{h_a^2}\, u_{i + k e_a},
$$

with the weights $c_k$ of `LAPLACIAN_WEIGHTS` ($(1, -2, 1)$ for order 2,
$(-1, 16, -30, 16, -1)/12$ for order 4, $w$ = order / 2).
"""

from collections.abc import Callable, Sequence

import jax.numpy as jnp
from jaxtyping import Array

# Central second-difference weights per order of accuracy, offsets -width..width.
LAPLACIAN_WEIGHTS: dict[int, tuple[float, ...]] = {
    2: (1.0, -2.0, 1.0),
    4: (-1 / 12, 16 / 12, -30 / 12, 16 / 12, -1 / 12),
}


def axis_weights(order: int, spacing: Sequence[float]) -> tuple[tuple[float, ...], ...]:
    """Per spatial axis, the second-difference weights of `order` divided by $h^2$.

    **Arguments:**

    - `order`: 2 or 4 (a key of `LAPLACIAN_WEIGHTS`).
    - `spacing`: one cell size per spatial axis.

    **Returns:** one tuple of `order + 1` weights per axis.
    """
    if order not in LAPLACIAN_WEIGHTS:
        raise ValueError(
            f"Laplacian order must be one of {tuple(LAPLACIAN_WEIGHTS)}; got {order!r}."
        )
    return tuple(tuple(w / h**2 for w in LAPLACIAN_WEIGHTS[order]) for h in spacing)


def laplacian_from_shifts(shifted: Callable, weights, width: int, centre=None):
    r"""$\sum_{a} \sum_k w_{a,k}\, u(x + k e_a)$ from `shifted(offsets)`, which returns the
    block moved by `offsets` (one integer per axis of `weights`).

    Kernels pass loads from a Pallas window, the references slices of an array, so both
    evaluate the same expression. The centre is loaded once (or passed in as `centre` by
    a caller that needs it too).

    **Arguments:**

    - `shifted`: `offsets -> block`.
    - `weights`: per axis, `2 * width + 1` weights (from `axis_weights`).
    - `width`: the stencil's half-width.
    - `centre`: `shifted((0, ..., 0))`, if the caller has it already.

    **Returns:** the weighted sum, shaped like a block.
    """
    num_axes = len(weights)
    if centre is None:
        centre = shifted((0,) * num_axes)
    total = sum(axis[width] for axis in weights) * centre
    for axis, axis_w in enumerate(weights):
        for k, w in enumerate(axis_w):
            offset = k - width
            if offset != 0:
                offsets = tuple(offset if a == axis else 0 for a in range(num_axes))
                total = total + w * shifted(offsets)
    return total


def laplacian_reference(padded: Array, spacing: Sequence[float], *, order: int = 2) -> Array:
    """The Laplacian of the trailing `len(spacing)` axes of an array padded with
    `order // 2` ghost cells per side, by slicing (the XLA path).

    **Arguments:**

    - `padded`: shape `(..., n_1 + 2w, ..., n_d + 2w)`; leading axes pass through.
    - `spacing`: one cell size per spatial axis.
    - `order`: 2 or 4.

    **Returns:** the Laplacian on the interior, shape `(..., n_1, ..., n_d)`.

    !!! example

        ```python
        padded = simlab.grid.pad(field, grid, 1)
        simlab.kernels.laplacian_reference(padded, grid.spacing)
        ```
    """
    padded = jnp.asarray(padded)
    weights = axis_weights(order, spacing)
    width = order // 2
    num_spatial = len(spacing)
    interior = [n - 2 * width for n in padded.shape[padded.ndim - num_spatial :]]

    def shifted(offsets):
        index = [slice(None)] * (padded.ndim - num_spatial)
        index += [slice(width + d, width + d + n) for d, n in zip(offsets, interior, strict=True)]
        return padded[tuple(index)]

    return laplacian_from_shifts(shifted, weights, width)
