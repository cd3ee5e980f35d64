"""`simlab.integrate._tiles.on_tiles`: a member's program on tiles of members, one tile per
element, against `jax.vmap` of the same program over the tile's two axes."""

import jax
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
import pytest

from simlab.integrate._tiles import on_tiles, primitives

TILE = (2, 3)
MATRIX = np.asarray([[-1.0, 0.5, 0.0], [0.0, -1.0, 0.5], [0.5, 0.0, -1.0]])

FUNCTIONS = {
    "matrix product": lambda y, p: jnp.asarray(MATRIX, y.dtype) @ y * p[0],
    "batched product": lambda y, p: jnp.einsum("ij,kj->ik", jnp.outer(y, p), jnp.outer(p, y)),
    "sums and extremes": lambda y, p: jnp.stack([y.sum(), y.max(), jnp.min(y * p), y.prod()]),
    "cumulative sums": lambda y, p: jnp.cumsum(y) - lax.cumsum(p, reverse=True) * lax.cummax(y),
    "where on ==": lambda y, p: jnp.where(y == y[0], 1.0, -y) + jnp.where(p > 0, p, 0.0),
    "gathered by slices": lambda y, p: jnp.array([y[2], p[0] * y[0], y[1]]),
    "split and concatenated": lambda y, p: jnp.concatenate(jnp.split(y, [1])[::-1]) + p,
    "transposed": lambda y, p: (jnp.outer(y, p).T @ y).reshape(3, 1).squeeze(1),
    "iota": lambda y, p: y * jnp.arange(3, dtype=y.dtype) + lax.rev(p, (0,)),
    "cond": lambda y, p: lax.cond(p[0] > 0.5, lambda: y * 2, lambda: -y),
    "integers": lambda y, p: (jnp.floor(y * 10).astype(jnp.int32) % 3).astype(y.dtype) + p,
    "constant arrays": lambda y, p: y * jnp.asarray([1.0, 2.0, 3.0], y.dtype) + 0.0 * p,
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_on_tiles_equals_vmap_over_the_tile(name):
    member = FUNCTIONS[name]
    y = jax.random.uniform(jax.random.key(0), (3, *TILE))
    p = jax.random.uniform(jax.random.key(1), (3, *TILE))
    tiled = jax.vmap(jax.vmap(member, in_axes=-1, out_axes=-1), in_axes=-2, out_axes=-2)
    np.testing.assert_allclose(on_tiles(member, y, p)(y, p), tiled(y, p), rtol=1e-12, atol=0)


def test_a_primitive_it_cannot_run_is_named():
    jaxpr = jax.make_jaxpr(lambda y: jax.jit(jnp.sort)(y) + y)(jnp.ones(3))
    assert primitives(jaxpr.jaxpr) == {"jit", "sort", "add"}  # inside calls too
    with pytest.raises(NotImplementedError, match="'gather'"):
        on_tiles(lambda y: y[jnp.asarray([2, 0, 1])], jnp.ones((3, *TILE)))(jnp.ones((3, *TILE)))
