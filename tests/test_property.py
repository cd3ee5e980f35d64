"""Property tests: grid shapes, boundary combinations, step layouts and chunkings drawn by
Hypothesis, so that no test knows its inputs by heart."""

import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings, strategies as st
from test_references import ghost_padded, laplacian2, make_grid, variable_diffusion

import simlab
from simlab._sweep._sweep import _padded
from simlab.integrate._loops import fixed_steps_per_interval, grid_slack
from simlab.io._store import StoreLayout

FEW = settings(max_examples=6, deadline=None)

side = st.one_of(
    st.tuples(st.just("dirichlet"), st.floats(-2.0, 2.0)),
    st.tuples(st.just("neumann"), st.floats(-2.0, 2.0)),
)
axis_conditions = st.one_of(st.just((("periodic", 0.0), ("periodic", 0.0))), st.tuples(side, side))


@st.composite
def grids(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(3, 7)) for _ in range(ndim))
    spacing = tuple(draw(st.floats(0.1, 2.0)) for _ in range(ndim))
    conditions = [draw(axis_conditions) for _ in range(ndim)]
    seed = draw(st.integers(0, 2**31))
    return shape, spacing, conditions, np.random.default_rng(seed)


@FEW
@given(grids())
def test_laplacian_equals_the_ghost_cell_formula_on_any_grid(case):
    shape, spacing, conditions, rng = case
    grid = make_grid(shape, spacing, conditions)
    u = rng.normal(size=(2, *shape))  # a leading channel axis passes through
    got = simlab.grid.laplacian(jnp.asarray(u), grid, impl="xla")
    np.testing.assert_allclose(got, laplacian2(u, conditions, spacing), rtol=1e-10, atol=1e-9)
    padded = ghost_padded(u, conditions, spacing)
    np.testing.assert_allclose(
        simlab.grid.laplacian_interior(jnp.asarray(padded), spacing, impl="xla"),
        got,
        rtol=1e-12,
        atol=1e-12,
    )


@FEW
@given(grids())
def test_variable_diffusion_equals_the_flux_formula_and_conserves_mass_behind_walls(case):
    shape, spacing, conditions, rng = case
    grid = make_grid(shape, spacing, conditions)
    u, diffusivity = rng.normal(size=shape), rng.uniform(0.1, 2.0, shape)
    got = np.asarray(simlab.grid.diffusion(jnp.asarray(u), jnp.asarray(diffusivity), grid))
    expected = variable_diffusion(u, diffusivity, conditions, spacing)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-9)
    closed = [
        low[0] == "periodic" or (low[0] == high[0] == "neumann" and low[1] == high[1] == 0)
        for low, high in conditions
    ]
    if all(closed):
        assert abs(got.sum()) <= 1e-10 * np.abs(got).sum()


@FEW
@given(grids())
def test_upwind_advection_of_a_constant_vanishes_and_is_linear_in_the_velocity(case):
    shape, spacing, conditions, rng = case
    periodic = [(("periodic", 0.0),) * 2] * len(shape)
    grid = make_grid(shape, spacing, periodic)
    velocity = rng.normal(size=len(shape))
    constant = jnp.full(shape, 3.0)
    np.testing.assert_allclose(
        simlab.grid.advection(constant, jnp.asarray(velocity), grid), 0.0, atol=1e-12
    )
    u = jnp.asarray(rng.normal(size=shape))
    once = simlab.grid.advection(u, jnp.asarray(velocity), grid)
    twice = simlab.grid.advection(u, jnp.asarray(2 * velocity), grid)
    np.testing.assert_allclose(twice, 2 * once, rtol=1e-12, atol=1e-12)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(1e-3, 10.0), min_size=1, max_size=6),
    st.floats(1e-3, 1.0),
    st.floats(-5.0, 5.0),
)
def test_fixed_steps_cover_each_save_interval_with_steps_no_longer_than_dt0(gaps, dt0, t0):
    ts = t0 + np.concatenate([[0.0], np.cumsum(gaps)])
    counts = np.broadcast_to(fixed_steps_per_interval(jnp.asarray(ts), dt0), (len(gaps),))
    intervals = np.diff(ts)
    slack = grid_slack(jnp.asarray(ts).dtype)
    assert np.all(counts >= 1)
    assert np.all(intervals / counts <= dt0 * (1 + 2 * slack))  # steps of at most dt0
    several = counts > 1  # and no more of them than that needs
    assert np.all(intervals[several] / (counts[several] - 1) > dt0 * (1 - 2 * slack))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 200), st.integers(1, 64))
def test_chunks_cover_every_member_once_and_padding_keeps_real_rows_first(members, size):
    layout = StoreLayout(members, size, {}, {}, {}, {})
    covered = np.concatenate([np.arange(*layout.chunk_bounds(i)) for i in range(layout.num_chunks)])
    np.testing.assert_array_equal(covered, np.arange(members))
    begin, end = layout.chunk_bounds(layout.num_chunks - 1)
    rows = np.arange(begin, end, dtype=float)[:, None] * np.array([[1.0, -1.0]])
    padded = _padded(rows, size)
    assert padded.shape == (size, 2)
    np.testing.assert_array_equal(padded[: end - begin], rows)
    np.testing.assert_array_equal(
        padded[end - begin :], np.repeat(rows[:1], size - (end - begin), 0)
    )
