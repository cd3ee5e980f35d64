"""Pallas stencil kernels (interpret mode on CPU) against their jnp references and the
`simlab.grid` XLA path: values, gradients, batching, models, temporal blocking, bad input."""

import functools as ft
import json
import subprocess
import sys
from pathlib import Path
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import GRAY_SCOTT_PARAMETERS as GRAY_SCOTT, with_dtype

import simlab
import simlab.kernels as sk
from simlab.kernels import (
    _laplacian as laplacian_module,
    _reaction_diffusion as reaction_diffusion_module,
)

BOUNDARIES = {
    "periodic": "periodic",
    "dirichlet": simlab.Dirichlet(1.5),
    "neumann": simlab.Neumann(0.5),
    "mixed": [(simlab.Dirichlet(-1.0), simlab.Neumann(0.0)), "periodic", "neumann"],
}
TOLERANCE = {jnp.float32: 2e-5, jnp.float64: 1e-12}


def _boundary(name, ndim):
    condition = BOUNDARIES[name]
    return condition[:ndim] if isinstance(condition, list) else condition


def _field(shape, dtype, seed=0):
    return jax.random.normal(jax.random.key(seed), shape, dtype=dtype)


def _jit(fn):
    """Jitted with the spacing and order static: one compile per layout beats op-by-op."""
    return jax.jit(fn, static_argnums=1, static_argnames="order")


_xla_interior = jax.jit(
    ft.partial(simlab.grid.laplacian_interior, impl="xla"),
    static_argnums=1,
    static_argnames="order",
)


def _close(actual, expected, dtype):
    scale = float(jnp.max(jnp.abs(expected))) + 1.0
    np.testing.assert_allclose(actual, expected, rtol=0, atol=TOLERANCE[dtype] * scale)


# Values: odd and tile-aligned shapes, both orders, both dtypes, every boundary condition.
# The shapes repeat across tests so that each tile layout compiles once.
SHAPE_2D, BLOCK_2D = (13, 11), (8, 8)
SHAPE_3D, BLOCK_3D = (5, 6, 7), (4, 4, 4)


@pytest.mark.parametrize(
    "boundary, shape, order, dtype",
    [
        ("periodic", SHAPE_2D, 2, jnp.float32),
        ("dirichlet", SHAPE_2D, 2, jnp.float64),
        ("neumann", (16, 8), 2, jnp.float64),
        ("mixed", SHAPE_2D, 4, jnp.float32),
    ],
)
def test_laplacian2d_values(boundary, shape, order, dtype):
    grid = simlab.Grid(shape, spacing=(0.5, 0.7), boundary=_boundary(boundary, 2))
    padded = simlab.grid.pad(_field(shape, dtype), grid, order // 2)
    result = sk.laplacian2d(padded, grid.spacing, order=order, block_shape=BLOCK_2D)
    assert result.shape == shape and result.dtype == dtype
    _close(result, _jit(sk.laplacian2d_reference)(padded, grid.spacing, order=order), dtype)
    _close(result, _xla_interior(padded, grid.spacing, order=order), dtype)


@pytest.mark.parametrize(
    "boundary, order, dtype",
    [
        ("periodic", 2, jnp.float64),
        ("dirichlet", 2, jnp.float32),
        ("neumann", 4, jnp.float64),
        ("mixed", 2, jnp.float64),
    ],
)
def test_laplacian3d_values(boundary, order, dtype):
    grid = simlab.Grid(SHAPE_3D, spacing=(0.5, 0.6, 0.7), boundary=_boundary(boundary, 3))
    padded = simlab.grid.pad(_field(SHAPE_3D, dtype), grid, order // 2)
    result = sk.laplacian3d(padded, grid.spacing, order=order, block_shape=BLOCK_3D)
    assert result.shape == SHAPE_3D and result.dtype == dtype
    _close(result, _jit(sk.laplacian3d_reference)(padded, grid.spacing, order=order), dtype)
    _close(result, _xla_interior(padded, grid.spacing, order=order), dtype)


def test_laplacian_is_second_order_accurate():
    """On sin(x) sin(2y), the 5-point error falls 4x per halving of h (order 2)."""
    errors = []
    for n in (16, 32):
        grid = simlab.Grid((n, n), extent=2 * jnp.pi)
        x, y = grid.mesh()
        field = jnp.sin(x) * jnp.sin(2 * y)
        result = sk.laplacian2d(simlab.grid.pad(field, grid, 1), grid.spacing)
        errors.append(float(jnp.max(jnp.abs(result + 5 * field))))
    assert abs(np.log2(errors[0] / errors[1]) - 2) < 0.2


# Gradients: through the padding, so each boundary condition's adjoint is exercised.
def _loss(impl, grid, order=2):
    def loss(field):
        return jnp.sum(jnp.sin(simlab.grid.laplacian(field, grid, order=order, impl=impl)))

    return loss


@pytest.mark.parametrize(
    "boundary, ndim",
    [("periodic", 2), ("dirichlet", 2), ("neumann", 2), ("mixed", 2), ("mixed", 3)],
)
def test_gradients_match_xla_every_boundary(boundary, ndim):
    shape = SHAPE_2D if ndim == 2 else SHAPE_3D
    grid = simlab.Grid(shape, extent=3.0, boundary=_boundary(boundary, ndim))
    field = _field(shape, jnp.float64, seed=1)
    pallas = jax.jit(jax.grad(_loss("pallas", grid)))(field)
    xla = jax.jit(jax.grad(_loss("xla", grid)))(field)
    _close(pallas, xla, jnp.float64)


def test_gradient_float32_order4_matches_reference():
    padded = _field((SHAPE_2D[0] + 4, SHAPE_2D[1] + 4), jnp.float32)

    def loss(fn):
        return jax.jit(jax.grad(lambda p: jnp.sum(fn(p, (0.5, 0.5), order=4) ** 2)))(padded)

    kernel = ft.partial(sk.laplacian2d, block_shape=BLOCK_2D)
    _close(loss(kernel), loss(sk.laplacian2d_reference), jnp.float32)


def test_gradient_matches_central_finite_differences():
    grid = simlab.Grid(SHAPE_2D, extent=13.0, boundary=[simlab.Dirichlet(1.0), "neumann"])
    field = _field(SHAPE_2D, jnp.float64, seed=2)
    loss = jax.jit(_loss("pallas", grid))
    direction = _field(SHAPE_2D, jnp.float64, seed=3)
    step = 1e-6
    finite = (loss(field + step * direction) - loss(field - step * direction)) / (2 * step)
    analytic = jnp.vdot(jax.jit(jax.grad(loss))(field), direction)
    np.testing.assert_allclose(analytic, finite, rtol=1e-7)


def test_vmap_over_a_batch_of_fields():
    padded = _field((3, 10, 9), jnp.float64)
    spacing = (0.5, 0.25)
    kernel = jax.vmap(lambda p: sk.laplacian2d(p, spacing, block_shape=(4, 4)))
    _close(jax.jit(kernel)(padded), sk.laplacian2d_reference(padded, spacing), jnp.float64)
    grads = jax.jit(jax.grad(lambda p: jnp.sum(kernel(p) ** 3)))(padded)
    expected = jax.jit(jax.grad(lambda p: jnp.sum(sk.laplacian2d_reference(p, spacing) ** 3)))(
        padded
    )
    _close(grads, expected, jnp.float64)


def test_impl_pallas_calls_the_kernel_and_1d_falls_back_to_xla():
    grid = simlab.Grid(SHAPE_2D, extent=1.0, boundary="neumann")
    field = _field(SHAPE_2D, jnp.float64)
    with mock.patch.object(laplacian_module, "_launch", wraps=laplacian_module._launch) as launch:
        pallas = simlab.grid.laplacian(field, grid, impl="pallas")
    assert launch.called
    _close(pallas, simlab.grid.laplacian(field, grid, impl="xla"), jnp.float64)
    # On a CPU "auto" keeps XLA: the interpreter is for correctness, not speed.
    assert simlab.grid.resolve_impl("auto") == "xla"
    line = simlab.Grid((10,), extent=1.0, boundary="dirichlet")
    field = _field((10,), jnp.float64)
    with mock.patch.object(laplacian_module, "_launch", wraps=laplacian_module._launch) as launch:
        pallas = simlab.grid.laplacian(field, line, impl="pallas")
    assert not launch.called
    _close(pallas, simlab.grid.laplacian(field, line, impl="xla"), jnp.float64)


def test_kernels_import_nothing_else_from_simlab():
    """`simlab.kernels` is plain array code: loaded on its own (without simlab's own
    `__init__`), it brings in no other simlab module."""
    package = Path(simlab.__file__).parent
    script = (
        "import json, sys, types\n"
        "parent = types.ModuleType('simlab')\n"
        f"parent.__path__ = [{str(package)!r}]\n"
        "sys.modules['simlab'] = parent\n"
        "import simlab.kernels\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('simlab.'))))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    modules = json.loads(loaded)
    assert "simlab.kernels" in modules
    assert [m for m in modules if not m.startswith("simlab.kernels")] == []


# Reaction–diffusion: the fused kernel with the Gray–Scott reaction against the reference
# and against the model's vector field.
DIFFUSIVITIES = (GRAY_SCOTT["diffusivity_u"], GRAY_SCOTT["diffusivity_v"])
RATES = (GRAY_SCOTT["feed_rate"], GRAY_SCOTT["kill_rate"])
REACTION = simlab.models.GrayScott.reaction


def _gray_scott_state(shape, dtype=jnp.float64, seed=0):
    return jax.random.uniform(jax.random.key(seed), (2, *shape), dtype=dtype)


@pytest.mark.parametrize(
    "boundary, dtype",
    [("periodic", jnp.float32), ("neumann", jnp.float64), ("dirichlet", jnp.float64)],
)
def test_reaction_diffusion_equals_the_gray_scott_model(boundary, dtype):
    grid = simlab.Grid((11, 9), spacing=(1.0, 0.8), boundary=boundary)
    model = with_dtype(simlab.models.GrayScott(**GRAY_SCOTT, grid=grid, impl="xla"), dtype)
    state = _gray_scott_state(grid.shape, dtype)
    padded = simlab.grid.pad(state, grid, 1)
    fused = sk.reaction_diffusion(
        padded, grid.spacing, DIFFUSIVITIES, RATES, reaction_fn=REACTION, block_shape=(8, 4)
    )
    assert fused.shape == state.shape and fused.dtype == dtype
    _close(fused, jax.jit(lambda y: model(0.0, y, None))(state), dtype)
    reference = jax.jit(
        sk.reaction_diffusion_reference, static_argnums=1, static_argnames="reaction_fn"
    )
    _close(
        fused, reference(padded, grid.spacing, DIFFUSIVITIES, RATES, reaction_fn=REACTION), dtype
    )


def _brusselator(fields, rates):
    """A second reaction (Brusselator: $a - (b + 1) u + u^2 v$, $b u - u^2 v$), to show that
    a new model needs no new kernel."""
    u, v = fields
    a, b = rates
    return a - (b + 1) * u + u * u * v, b * u - u * u * v


@pytest.mark.parametrize("reaction_fn, rates", [(REACTION, RATES), (_brusselator, (1.0, 3.0))])
def test_reaction_diffusion_gradients_fields_and_parameters(reaction_fn, rates):
    padded = _gray_scott_state((13, 11), seed=1)
    params = jnp.array([*DIFFUSIVITIES, *rates])

    def loss(fn):
        def value(p, q):
            tendency = fn(p, (1.0, 0.8), (q[0], q[1]), (q[2], q[3]), reaction_fn=reaction_fn)
            return jnp.sum(jnp.sin(3 * tendency))

        return value

    kernel = ft.partial(sk.reaction_diffusion, block_shape=(8, 4))
    pallas = jax.jit(jax.grad(loss(kernel), argnums=(0, 1)))(padded, params)
    reference = jax.jit(jax.grad(loss(sk.reaction_diffusion_reference), argnums=(0, 1)))(
        padded, params
    )
    for actual, expected in zip(pallas, reference, strict=True):
        _close(actual, expected, jnp.float64)


def test_pure_diffusion_of_one_field_is_the_scaled_laplacian():
    padded = _field((1, 10, 9), jnp.float64)
    fused = sk.reaction_diffusion(padded, (0.5, 0.25), (0.3,), reaction_fn=None)
    _close(fused, 0.3 * sk.laplacian2d_reference(padded, (0.5, 0.25)), jnp.float64)
    grad = jax.grad(
        lambda d: jnp.sum(sk.reaction_diffusion(padded, (0.5, 0.25), (d,), reaction_fn=None) ** 2)
    )(0.3)
    laplacian = sk.laplacian2d_reference(padded, (0.5, 0.25))
    np.testing.assert_allclose(grad, 2 * 0.3 * jnp.sum(laplacian**2), rtol=1e-12)


def test_reaction_diffusion_vmap_over_parameters_and_states():
    padded = jnp.stack([_gray_scott_state((6, 7), seed=s) for s in range(3)])
    feed_rates = jnp.array([0.03, 0.035, 0.04])

    def batched(fn):
        def tendency(p, f):
            return fn(p, (1.0, 1.0), DIFFUSIVITIES, (f, RATES[1]), reaction_fn=REACTION)

        return jax.jit(jax.vmap(tendency))(padded, feed_rates)

    _close(batched(sk.reaction_diffusion), batched(sk.reaction_diffusion_reference), jnp.float64)


def test_gray_scott_model_takes_the_fused_kernel():
    grid = simlab.Grid((8, 8), extent=8.0)
    state = _gray_scott_state(grid.shape, seed=6)
    model = simlab.models.GrayScott(**GRAY_SCOTT, grid=grid, impl="pallas")
    launch = reaction_diffusion_module._launch
    with mock.patch.object(reaction_diffusion_module, "_launch", wraps=launch) as fused:
        tendency = model(0.0, state, None)
    assert fused.called  # both fields in one pass, not two Laplacian launches
    reference = simlab.models.GrayScott(**GRAY_SCOTT, grid=grid, impl="xla")(0.0, state, None)
    _close(tendency, reference, jnp.float64)


# A model solved with impl="pallas" equals impl="xla", values and gradients.
@pytest.fixture(scope="module")
def gray_scott_problem():
    grid = simlab.Grid((8, 8), extent=8.0)
    y0 = _gray_scott_state(grid.shape, seed=5)
    ts = jnp.array([0.0, 1.0, 2.0])

    def final_v(impl, feed_rate):
        model = simlab.models.GrayScott(
            **{**GRAY_SCOTT, "feed_rate": feed_rate}, grid=grid, impl=impl
        )
        trajectory = simlab.simulate(model, y0, ts, solver="euler", adaptive=False, dt0=0.25)
        return trajectory.ys

    return final_v


def test_pde_model_pallas_equals_xla(gray_scott_problem):
    pallas = gray_scott_problem("pallas", 0.035)
    _close(pallas, gray_scott_problem("xla", 0.035), jnp.float64)
    assert float(jnp.max(jnp.abs(pallas[-1] - pallas[0]))) > 1e-3  # the state did evolve

    # Reverse mode through the solve and the kernel's custom VJP, against central
    # differences of the (already compiled) Pallas solve.
    def loss(feed_rate):
        return jnp.sum(gray_scott_problem("pallas", feed_rate)[-1, 1] ** 2)

    step = 1e-6
    finite = (loss(0.035 + step) - loss(0.035 - step)) / (2 * step)
    np.testing.assert_allclose(jax.grad(loss)(0.035), finite, rtol=1e-6)


# Temporal blocking equals repeated single steps.
def _padding(grid):
    return lambda field, width: simlab.grid.pad(field, grid, width)


@pytest.mark.parametrize("boundary", ["periodic", "dirichlet", "neumann", "mixed"])
def test_heat_temporal_blocking_equals_single_steps(boundary):
    grid = simlab.Grid((13, 10), spacing=(1.0, 1.2), boundary=_boundary(boundary, 2))
    field = _field((2, 13, 10), jnp.float64)
    settings = dict(spacing=grid.spacing, pad_fn=_padding(grid), diffusivity=0.2, dt=0.5)
    blocked = jax.jit(
        ft.partial(sk.heat_steps, **settings, num_steps=7, steps_per_launch=3, block_shape=(8, 4))
    )(field)
    reference = jax.jit(ft.partial(sk.heat_steps_reference, **settings, num_steps=7))(field)
    _close(blocked, reference, jnp.float64)
    # The reference itself: seven explicit Euler steps of the grid's own Laplacian.
    expected = field
    for _ in range(7):
        expected = expected + 0.5 * 0.2 * simlab.grid.laplacian(expected, grid, impl="xla")
    _close(reference, expected, jnp.float64)


@pytest.mark.parametrize("boundary", ["periodic", "neumann"])
def test_gray_scott_temporal_blocking_equals_single_steps(boundary):
    grid = simlab.Grid((12, 9), extent=12.0, boundary=boundary)
    state = _gray_scott_state(grid.shape, jnp.float32, seed=6)
    settings = dict(
        pad_fn=_padding(grid),
        diffusivities=DIFFUSIVITIES,
        parameters=RATES,
        reaction_fn=REACTION,
        dt=1.0,
        num_steps=8,
    )

    def steps(per_launch):
        run = ft.partial(
            sk.reaction_diffusion_steps,
            spacing=grid.spacing,
            steps_per_launch=per_launch,
            block_shape=(4, 8),
            **settings,
        )
        return jax.jit(run)(state)

    blocked, single = steps(4), steps(1)
    reference = jax.jit(
        ft.partial(sk.reaction_diffusion_steps_reference, spacing=grid.spacing, **settings)
    )(state)
    _close(blocked, reference, jnp.float32)
    _close(single, reference, jnp.float32)


# Forward and reverse mode through every public kernel, against the references: the jvp,
# the forward-mode Jacobian, the gradient, and central differences along the tangent.
def _forward_mode_case(name):
    """`(kernel, reference, primals, tangents)`: two functions of the same differentiable
    arguments, and a point and a direction."""
    if name.startswith("laplacian2d"):
        order = int(name[-1])
        padded = _field((7 + 2 * (order // 2), 6 + 2 * (order // 2)), jnp.float64, seed=10)
        kernel = ft.partial(sk.laplacian2d, spacing=(0.5, 0.7), order=order, block_shape=(4, 4))
        reference = ft.partial(sk.laplacian2d_reference, spacing=(0.5, 0.7), order=order)
        return kernel, reference, (padded,), (_field(padded.shape, jnp.float64, seed=11),)
    if name == "laplacian3d":
        padded = _field((6, 5, 4), jnp.float64, seed=10)
        kernel = ft.partial(sk.laplacian3d, spacing=(0.5, 0.6, 0.7), block_shape=(4, 4, 4))
        reference = ft.partial(sk.laplacian3d_reference, spacing=(0.5, 0.6, 0.7))
        return kernel, reference, (padded,), (_field(padded.shape, jnp.float64, seed=11),)
    if name == "laplacian":
        kernel = ft.partial(sk.laplacian, spacing=(0.5, 0.7), order=2)
        reference = ft.partial(sk.laplacian_reference, spacing=(0.5, 0.7), order=2)
        padded = _field((9, 8), jnp.float64, seed=10)
        return kernel, reference, (padded,), (_field(padded.shape, jnp.float64, seed=11),)
    if name == "reaction_diffusion":

        def fused(fn):
            def tendency(padded, q):
                fields = (q[0], q[1]), (q[2], q[3])
                return fn(padded, (1.0, 0.8), *fields, reaction_fn=REACTION)

            return tendency

        primals = (_gray_scott_state((7, 6), seed=10), jnp.array([*DIFFUSIVITIES, *RATES]))
        tangents = (_field((2, 7, 6), jnp.float64, seed=11), jnp.array([0.3, -0.2, 0.5, 0.1]))
        kernel = fused(ft.partial(sk.reaction_diffusion, block_shape=(4, 4)))
        return kernel, fused(sk.reaction_diffusion_reference), primals, tangents
    if name == "heat_steps":
        grid = simlab.Grid((7, 6), spacing=(1.0, 1.2), boundary=_boundary("mixed", 2))

        def heat(fn, **settings):
            def steps(field, diffusivity, dt):
                return fn(
                    field,
                    grid.spacing,
                    pad_fn=_padding(grid),
                    diffusivity=diffusivity,
                    dt=dt,
                    num_steps=5,
                    **settings,
                )

            return steps

        primals = (_field((7, 6), jnp.float64, seed=10), jnp.array(0.2), jnp.array(0.5))
        tangents = (_field((7, 6), jnp.float64, seed=11), jnp.array(0.3), jnp.array(-0.1))
        kernel = heat(sk.heat_steps, steps_per_launch=2, block_shape=(4, 4))
        return kernel, heat(sk.heat_steps_reference), primals, tangents
    assert name == "reaction_diffusion_steps"
    grid = simlab.Grid((7, 6), extent=7.0, boundary="neumann")

    def gray_scott(fn, **settings):
        def steps(state, diffusivities, rates, dt):
            return fn(
                state,
                grid.spacing,
                pad_fn=_padding(grid),
                diffusivities=(diffusivities[0], diffusivities[1]),
                parameters=(rates[0], rates[1]),
                reaction_fn=REACTION,
                dt=dt,
                num_steps=3,
                **settings,
            )

        return steps

    primals = (
        _gray_scott_state((7, 6), seed=10),
        jnp.array(DIFFUSIVITIES),
        jnp.array(RATES),
        jnp.array(1.0),
    )
    tangents = (
        _field((2, 7, 6), jnp.float64, seed=11),
        jnp.array([0.1, -0.1]),
        jnp.array([0.2, 0.3]),
        jnp.array(0.2),
    )
    kernel = gray_scott(sk.reaction_diffusion_steps, steps_per_launch=2, block_shape=(4, 4))
    return kernel, gray_scott(sk.reaction_diffusion_steps_reference), primals, tangents


FORWARD_MODE_KERNELS = [
    "laplacian2d order 2",
    "laplacian2d order 4",
    "laplacian3d",
    "laplacian",
    "reaction_diffusion",
    "heat_steps",
    "reaction_diffusion_steps",
]


@pytest.mark.parametrize("name", FORWARD_MODE_KERNELS)
def test_forward_mode_equals_the_reference(name):
    kernel, reference, primals, tangents = _forward_mode_case(name)
    jvp = jax.jit(lambda p, t: jax.jvp(kernel, p, t))
    value, tangent = jvp(primals, tangents)
    expected_value, expected_tangent = jax.jit(lambda p, t: jax.jvp(reference, p, t))(
        primals, tangents
    )
    _close(value, expected_value, jnp.float64)
    _close(tangent, expected_tangent, jnp.float64)
    assert float(jnp.max(jnp.abs(tangent))) > 1e-3
    # Central differences along the tangent (each kernel is at most cubic in its inputs).
    step = 1e-6
    forward = tuple(p + step * t for p, t in zip(primals, tangents, strict=True))
    backward = tuple(p - step * t for p, t in zip(primals, tangents, strict=True))
    finite = (jvp(forward, tangents)[0] - jvp(backward, tangents)[0]) / (2 * step)
    scale = float(jnp.max(jnp.abs(tangent)))
    np.testing.assert_allclose(finite, tangent, rtol=0, atol=1e-8 * scale)


@pytest.mark.parametrize("name", FORWARD_MODE_KERNELS)
def test_jacfwd_and_grad_equal_the_reference(name):
    kernel, reference, primals, _ = _forward_mode_case(name)
    argnums = tuple(range(len(primals)))

    def derivatives(fn):
        jacobian = jax.jacfwd(fn, argnums=argnums)(*primals)
        gradient = jax.grad(lambda *p: jnp.sum(jnp.sin(fn(*p))), argnums=argnums)(*primals)
        return jacobian, gradient

    actual = jax.jit(lambda: derivatives(kernel))()
    expected = jax.jit(lambda: derivatives(reference))()
    for got, want in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        _close(got, want, jnp.float64)


def test_heat_steps_vmapped_over_the_diffusivity():
    """Coefficients that vary over a batch: one launch per member, in both modes."""
    kernel, reference, (field, _, dt), (direction, _, _) = _forward_mode_case("heat_steps")
    diffusivities = jnp.array([0.1, 0.2, 0.25])

    def pushed(fn):
        return jax.jit(
            jax.vmap(lambda d: jax.jvp(lambda f, d: fn(f, d, dt), (field, d), (direction, 1.0)))
        )(diffusivities)

    for got, want in zip(pushed(kernel), pushed(reference), strict=True):
        _close(got, want, jnp.float64)


# Grid models with impl="pallas" differentiate in forward mode as with impl="xla".
def test_grid_models_forward_mode_with_pallas_equals_xla():
    grid = simlab.Grid((6, 7), extent=1.0, boundary="neumann")
    field = _field((6, 7), jnp.float64)
    direction = _field((6, 7), jnp.float64, seed=1)

    def heat(impl):
        def tendency(diffusivity, y):
            return simlab.models.Heat(diffusivity=diffusivity, grid=grid, impl=impl)(0.0, y, None)

        return jax.jit(lambda: jax.jvp(tendency, (0.3, field), (0.5, direction)))()

    for got, want in zip(heat("pallas"), heat("xla"), strict=True):
        _close(got, want, jnp.float64)
    model = simlab.models.Heat(diffusivity=0.3, grid=grid, impl="pallas")
    matrix = jax.jit(jax.jacfwd(lambda f: model(0.0, f, None)))(field)
    matrix = matrix.reshape(field.size, field.size)
    # The Laplacian matrix with mirrored (Neumann(0)) ghost cells is symmetric and sends
    # constants to zero.
    _close(matrix, matrix.T, jnp.float64)
    _close(matrix.sum(axis=1), jnp.zeros(field.size), jnp.float64)

    square = simlab.Grid((7, 6), extent=7.0, boundary="periodic")
    state = _gray_scott_state(square.shape, seed=3)
    state_direction = _field((2, *square.shape), jnp.float64, seed=4)

    def gray_scott(impl):
        def tendency(feed_rate, y):
            parameters = {**GRAY_SCOTT, "feed_rate": feed_rate}
            return simlab.models.GrayScott(**parameters, grid=square, impl=impl)(0.0, y, None)

        primals, tangents = (RATES[0], state), (1.0, state_direction)
        return jax.jit(lambda: jax.jvp(tendency, primals, tangents))()

    with mock.patch.object(
        reaction_diffusion_module, "_launch", wraps=reaction_diffusion_module._launch
    ) as fused:
        pallas = gray_scott("pallas")
    assert fused.called
    for got, want in zip(pallas, gray_scott("xla"), strict=True):
        _close(got, want, jnp.float64)


def test_autotune_returns_the_fastest_candidate():
    padded = _field((18, 18), jnp.float64)
    run = jax.jit(lambda b: sk.laplacian2d(padded, (1.0, 1.0), block_shape=b), static_argnums=0)
    best, seconds = sk.autotune_block_shape(run, [(4, 4), (16, 16)], repeats=2)
    assert set(seconds) == {(4, 4), (16, 16)}
    assert seconds[best] == min(seconds.values())


# Bad input.
def test_bad_input_laplacian():
    padded = _field((6, 6), jnp.float64)
    with pytest.raises(ValueError, match="spacing must be 2 positive"):
        sk.laplacian2d(padded, (1.0,))
    with pytest.raises(ValueError, match="spacing must be 2 positive"):
        sk.laplacian2d(padded, (1.0, -1.0))
    with pytest.raises(ValueError, match="order must be one of"):
        sk.laplacian2d(padded, (1.0, 1.0), order=3)
    with pytest.raises(ValueError, match="more than 4 cells"):
        sk.laplacian2d(padded[:4], (1.0, 1.0), order=4)
    with pytest.raises(TypeError, match="floating-point"):
        sk.laplacian2d(jnp.ones((6, 6), jnp.int32), (1.0, 1.0))
    with pytest.raises(ValueError, match="block_shape must be 2 positive"):
        sk.laplacian2d(padded, (1.0, 1.0), block_shape=(4, 0))
    with pytest.raises(ValueError, match="on a CPU pass interpret=True"):
        sk.laplacian2d(padded, (1.0, 1.0), interpret=False)
    with pytest.raises(ValueError, match="backend must be one of"):
        sk.laplacian2d(padded, (1.0, 1.0), backend="cuda")
    with pytest.raises(ValueError, match="at least 3 axes"):
        sk.laplacian3d(padded, (1.0, 1.0, 1.0))


def test_bad_input_reaction_diffusion_and_steps():
    state = _gray_scott_state((6, 6))
    fused = ft.partial(sk.reaction_diffusion, reaction_fn=REACTION)
    with pytest.raises(ValueError, match="one diffusivity per field"):
        fused(state[:1], (1.0, 1.0), DIFFUSIVITIES, RATES)
    with pytest.raises(ValueError, match="must be scalars"):
        fused(state, (1.0, 1.0), (jnp.ones(3), 0.1), RATES)
    pad_fn = _padding(simlab.Grid((6, 6), extent=6.0))
    heat = dict(pad_fn=pad_fn, diffusivity=1.0, dt=0.1, num_steps=1)
    with pytest.raises(ValueError, match="one diffusivity per field"):
        sk.reaction_diffusion_steps(
            state[0],
            (1.0, 1.0),
            pad_fn=pad_fn,
            diffusivities=DIFFUSIVITIES,
            reaction_fn=REACTION,
            dt=0.1,
            num_steps=1,
        )
    with pytest.raises(ValueError, match="steps_per_launch must be"):
        sk.heat_steps(state[0], (1.0, 1.0), **heat, steps_per_launch=0)
    with pytest.raises(ValueError, match="steps_per_launch must be"):
        sk.heat_steps(state[0], (1.0, 1.0), **heat, steps_per_launch=7)
    with pytest.raises(ValueError, match="num_steps must be"):
        sk.heat_steps(state[0], (1.0, 1.0), **{**heat, "num_steps": -1})
    with pytest.raises(ValueError, match="spacing must be 2 positive"):
        sk.heat_steps(state[0], (1.0,), **heat)
    with pytest.raises(TypeError, match="floating-point"):
        sk.heat_steps(jnp.ones((6, 6), jnp.int32), (1.0, 1.0), **heat)
    with pytest.raises(ValueError, match="at least one candidate"):
        sk.autotune_block_shape(lambda b: None, [])
