"""The fused Pallas momentum kernel of the staggered-grid flow (run by the Pallas
interpreter on this CPU) against the model's XLA path, which shifts whole arrays with
`jnp.roll` instead of reading a padded field: the tendency on odd shapes with periodic,
no-slip, sliding and free-slip sides, in float64 and float32; its derivatives in both
modes, against the XLA path's and against central differences (exact for the quadratic
tendency); a short cavity run; and the refusals of bad input."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import with_dtype

import simlab
import simlab.kernels as sk
from simlab.models import WalledNavierStokes2D

SHAPE, EXTENT = (13, 9), (1.3, 0.9)
LID = (simlab.Dirichlet(0.0), simlab.Dirichlet(1.0))
# name -> (boundary, viscosity, body force): a channel periodic along x, a cavity with a
# sliding lid, and a box with free-slip sides under a lid.
CASES = {
    "channel": (["periodic", "dirichlet"], 0.05, 2.0),
    "cavity": (["dirichlet", LID], 0.05, 0.0),
    "free-slip box": (["neumann", LID], 0.02, 0.0),
}
TOLERANCE = {jnp.float64: 1e-13, jnp.float32: 1e-5}


def _models(case, dtype=jnp.float64):
    """The XLA and the Pallas model of `case`, and a divergence-free state of speed ~1."""
    boundary, viscosity, body_force = CASES[case]
    grid = simlab.Grid(SHAPE, extent=EXTENT, boundary=boundary)
    models = [
        with_dtype(WalledNavierStokes2D(viscosity, grid, body_force, impl=impl), dtype)
        for impl in ("xla", "pallas")
    ]
    y = models[0].project(jax.random.normal(jax.random.key(0), (2, *SHAPE), dtype))
    return *models, y


def _assert_close(got, want, dtype=jnp.float64):
    scale = float(jnp.max(jnp.abs(want)))
    assert scale > 0.1  # the comparison is not between zeros
    np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCE[dtype] * scale)


@eqx.filter_jit
def _tendency_and_vector_field(model, y):
    return model.momentum_tendency(y), model(0.0, y, None)


@pytest.mark.parametrize(
    "case, dtype", [(case, jnp.float64) for case in CASES] + [("channel", jnp.float32)]
)
def test_the_fused_tendency_equals_the_xla_path(case, dtype):
    xla, pallas, y = _models(case, dtype)
    got, want = (_tendency_and_vector_field(model, y) for model in (pallas, xla))
    _assert_close(got[0], want[0], dtype)
    _assert_close(got[1], want[1], dtype)


@pytest.mark.parametrize("block_shape", [(4, 4), (8, 2)])
def test_tiles_that_do_not_divide_the_grid_give_the_same_tendency(block_shape):
    """Several tiles, the last ones cut off, on the cavity's padded velocity."""
    xla, pallas, y = _models("cavity")
    tendency = sk.mac_momentum(
        pallas._padded_velocity(y), pallas.grid.spacing, pallas.viscosity, block_shape=block_shape
    )
    _assert_close(tendency * pallas._open_faces(y.dtype), xla.momentum_tendency(y))


def test_a_batch_of_states_takes_one_launch_and_the_same_values():
    xla, pallas, y = _models("channel")
    ys = jnp.stack([y, 2 * y, -y])
    got, want = (eqx.filter_jit(jax.vmap(model.momentum_tendency))(ys) for model in (pallas, xla))
    _assert_close(got, want)


def _loss(model, y, weights):
    """A scalar of the projected vector field, reaching every parameter."""
    return jnp.sum(weights * model(0.0, y, None) ** 2)


def test_the_gradient_equals_the_xla_paths():
    """On the faces that carry a velocity: the wall faces hold zero, and the two paths
    read them in different (equivalent) places, so the derivative with respect to them
    is not the same."""
    xla, pallas, y = _models("cavity")
    weights = jax.random.uniform(jax.random.key(1), y.shape, y.dtype)

    @eqx.filter_jit
    @eqx.filter_grad
    def gradient(model_and_state):
        return _loss(*model_and_state, weights)

    (got_model, got_state), (want_model, want_state) = (
        gradient((model, y)) for model in (pallas, xla)
    )
    open_faces = xla._open_faces(y.dtype)
    _assert_close(got_state * open_faces, want_state * open_faces)
    for name in ("viscosity", "body_force"):
        np.testing.assert_allclose(
            getattr(got_model, name), getattr(want_model, name), rtol=1e-12, atol=1e-12
        )


def test_the_tangent_is_the_central_difference_of_the_quadratic_tendency():
    """The tendency is quadratic in the velocity, so the central difference is its exact
    directional derivative (up to roundoff over the step)."""
    _, pallas, y = _models("cavity")
    direction = jax.random.normal(jax.random.key(2), y.shape, y.dtype)
    tendency = eqx.filter_jit(pallas.momentum_tendency)
    _, tangent = eqx.filter_jit(jax.jvp)(tendency, (y,), (direction,))
    step = 1e-3
    central = (tendency(y + step * direction) - tendency(y - step * direction)) / (2 * step)
    scale = float(jnp.max(jnp.abs(central)))
    np.testing.assert_allclose(tangent, central, rtol=0, atol=1e-10 * scale)


@eqx.filter_jit
def _cavity_run(model, y0):
    ts = jnp.array([0.0, 0.05, 0.1])
    return simlab.simulate(model, y0, ts, solver="rk4", adaptive=False, dt0=0.005).ys


def test_a_short_cavity_run_with_the_kernel_equals_the_xla_run():
    model, y0 = WalledNavierStokes2D.lid_driven_cavity(num_cells=12, reynolds=100.0)
    runs = [
        _cavity_run(WalledNavierStokes2D(model.viscosity, model.grid, impl=impl), y0)
        for impl in ("xla", "pallas")
    ]
    assert float(jnp.max(jnp.abs(runs[0][-1]))) > 0.1  # the lid has set the fluid moving
    np.testing.assert_allclose(runs[1], runs[0], rtol=0, atol=1e-13)


def test_bad_input_is_refused_with_clear_errors():
    padded = jnp.zeros((3, 15, 11))
    with pytest.raises(ValueError, match=r"face velocities \(u, v\) on axis -3"):
        sk.mac_momentum(padded, (0.1, 0.1), 0.01)
    with pytest.raises(ValueError, match="must be scalars"):
        sk.mac_momentum(padded[:2], (0.1, 0.1), jnp.ones((13, 9)))
    grid = simlab.Grid(SHAPE, boundary="periodic")
    with pytest.raises(ValueError, match="impl must be 'auto', 'xla' or 'pallas'"):
        WalledNavierStokes2D(0.01, grid, impl="spectral")
