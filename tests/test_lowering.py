"""Every Pallas kernel, and simlab's main compiled programs, lower for GPUs and TPUs from
this CPU-only machine.

`jax.export` for `"cuda"` and `"tpu"` runs the real Pallas lowerings (Triton, Mosaic GPU,
Mosaic TPU) with the limits those compilers check: power-of-two loads, shared memory,
the (8, 128) tiling. Nothing exported for a GPU or TPU runs here; what runs is the CPU
branch of a multi-platform artifact, and each target's layout in the Pallas interpreter
against the references. Lowering is not compiling: the hardware compilers' later passes
and the speed need the devices.
"""

import functools as ft
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import GRAY_SCOTT_PARAMETERS as GRAY_SCOTT, with_dtype

import simlab
import simlab.kernels as sk
from simlab._sweep._execute import chunk_program, compiled_chunk
from simlab.kernels import (
    _flow as flow_module,
    _laplacian as laplacian_module,
    _reaction_diffusion as reaction_diffusion_module,
    _temporal as temporal_module,
)
from simlab.kernels._pallas import Plan
from simlab.kernels._tiling import SMEM_BYTES, fit_tiles
from simlab.parallel import member_mesh

ALLOW_TRITON = [jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")]
# The custom call each compiled target leaves in the lowered module.
CALLS = {"triton": "xla.gpu.triton", "mosaic_gpu": "mosaic_gpu_v2", "tpu": "tpu_custom_call"}
REACTION = simlab.models.GrayScott.reaction
RATES = (GRAY_SCOTT["feed_rate"], GRAY_SCOTT["kill_rate"])


def _lowered(fn, *shapes, platforms, dtype=jnp.float32) -> str:
    """The module text of `fn` exported for `platforms` from abstract arguments."""
    args = [jax.ShapeDtypeStruct(shape, dtype) for shape in shapes]
    exported = jax.export.export(jax.jit(fn), platforms=platforms, disabled_checks=ALLOW_TRITON)
    return exported(*args).mlir_module()


def _periodic(shape):
    grid = simlab.Grid(shape, boundary="periodic")
    return grid.spacing, lambda u, width: simlab.grid.pad(u, grid, width)


def _heat(steps, per_launch, shape):
    spacing, pad_fn = _periodic(shape)

    def fn(field, diffusivity, backend):
        return sk.heat_steps(
            field,
            spacing,
            pad_fn=pad_fn,
            diffusivity=diffusivity,
            dt=0.1,
            num_steps=steps,
            steps_per_launch=per_launch,
            backend=backend,
        )

    return fn


def _gray_scott_steps(steps, per_launch, shape):
    spacing, pad_fn = _periodic(shape)

    def fn(state, diffusivity, backend):
        return sk.reaction_diffusion_steps(
            state,
            spacing,
            pad_fn=pad_fn,
            diffusivities=(diffusivity, 0.1),
            parameters=RATES,
            reaction_fn=REACTION,
            dt=0.5,
            num_steps=steps,
            steps_per_launch=per_launch,
            backend=backend,
        )

    return fn


def _three_species(fields, parameters):
    """A pointwise reaction of three fields with one parameter."""
    a, b, c = fields
    (rate,) = parameters
    return (-rate * a * b, rate * a * b - c, c * a)


# name -> (fn(field, coefficient, backend), field shape, dtype): the shapes of
# benchmarks/bench_kernels.py and benchmarks/gpu_kernels.py, then awkward ones (odd sizes,
# batches, order 4, 3-D, remainder launches). The coefficient scales the result or is a
# diffusivity, so derivatives reach it too.
KERNEL_CASES = {
    "laplacian2d 512²": (
        lambda p, c, backend: c * sk.laplacian2d(p, (1.0, 1.0), backend=backend),
        (514, 514),
        jnp.float32,
    ),
    "laplacian2d 16384²": (
        lambda p, c, backend: c * sk.laplacian2d(p, (1.0, 1.0), backend=backend),
        (16386, 16386),
        jnp.float32,
    ),
    "laplacian2d 1000×777 order 4 float64": (
        lambda p, c, backend: c * sk.laplacian2d(p, (0.5, 0.7), order=4, backend=backend),
        (1004, 781),
        jnp.float64,
    ),
    "laplacian2d batch of 37×29 order 4": (
        lambda p, c, backend: c * sk.laplacian2d(p, (0.5, 0.7), order=4, backend=backend),
        (3, 41, 33),
        jnp.float32,
    ),
    "laplacian3d 64³": (
        lambda p, c, backend: c * sk.laplacian3d(p, (1.0, 1.0, 1.0), backend=backend),
        (66, 66, 66),
        jnp.float32,
    ),
    "laplacian3d 130×70×50": (
        lambda p, c, backend: c * sk.laplacian3d(p, (0.5, 0.6, 0.7), backend=backend),
        (132, 72, 52),
        jnp.float32,
    ),
    "laplacian3d 9×7×11 order 4 float64": (
        lambda p, c, backend: c * sk.laplacian3d(p, (0.5, 0.6, 0.7), order=4, backend=backend),
        (13, 11, 15),
        jnp.float64,
    ),
    "gray-scott 512²": (
        lambda p, c, backend: sk.reaction_diffusion(
            p, (1.0, 1.0), (c, 0.1), RATES, reaction_fn=REACTION, backend=backend
        ),
        (2, 514, 514),
        jnp.float32,
    ),
    "gray-scott 1000×777 float64": (
        lambda p, c, backend: sk.reaction_diffusion(
            p, (1.0, 1.0), (c, 0.1), RATES, reaction_fn=REACTION, backend=backend
        ),
        (2, 1002, 779),
        jnp.float64,
    ),
    "three fields 37×29 in a batch": (
        lambda p, c, backend: sk.reaction_diffusion(
            p, (0.5, 0.7), (c, 0.1, 0.3), (0.7,), reaction_fn=_three_species, backend=backend
        ),
        (2, 3, 39, 31),
        jnp.float32,
    ),
    "mac momentum 512²": (
        lambda p, c, backend: sk.mac_momentum(p, (1.0, 1.0), c, 0.5, backend=backend),
        (2, 514, 514),
        jnp.float32,
    ),
    "mac momentum 13×9 in a batch": (
        lambda p, c, backend: sk.mac_momentum(p, (0.5, 0.7), c, 0.5, backend=backend),
        (3, 2, 15, 11),
        jnp.float32,
    ),
    "mac momentum 1000×777 float64": (
        lambda p, c, backend: sk.mac_momentum(p, (0.5, 0.7), c, 0.5, backend=backend),
        (2, 1002, 779),
        jnp.float64,
    ),
    "heat 512², 16 steps, 8 per launch": (_heat(16, 8, (512, 512)), (512, 512), jnp.float32),
    "heat 512², 16 steps, 1 per launch": (_heat(16, 1, (512, 512)), (512, 512), jnp.float32),
    "heat 37×29, 7 steps, 3 per launch": (_heat(7, 3, (37, 29)), (37, 29), jnp.float32),
    "gray-scott 512², 8 steps, 4 per launch": (
        _gray_scott_steps(8, 4, (512, 512)),
        (2, 512, 512),
        jnp.float32,
    ),
    "gray-scott 37×29, 5 steps, 2 per launch": (
        _gray_scott_steps(5, 2, (37, 29)),
        (2, 37, 29),
        jnp.float32,
    ),
}
# One artifact for Triton on "cuda" and Mosaic on "tpu" (the TPU ignores `backend`), one
# for Mosaic GPU.
BACKENDS = {
    "triton": (("cuda", "tpu"), ("triton", "tpu")),
    "mosaic_gpu": (("cuda",), ("mosaic_gpu",)),
}


def _every_mode(fn):
    """The value, the forward-mode tangent and the gradient of `fn(field, coefficient)`,
    in one function (one trace per export)."""

    def modes(field, coefficient):
        primals = (field, coefficient)
        tangents = (jnp.ones_like(field), jnp.ones_like(coefficient))
        value, tangent = jax.jvp(fn, primals, tangents)
        gradient = jax.grad(lambda *args: jnp.sum(fn(*args) ** 2), argnums=(0, 1))(*primals)
        return value, tangent, gradient

    return modes


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("case", list(KERNEL_CASES))
def test_every_kernel_lowers_in_both_modes(case, backend):
    fn, shape, dtype = KERNEL_CASES[case]
    platforms, targets = BACKENDS[backend]
    if dtype == jnp.float64:  # a TPU has no 64-bit vector unit (refused below)
        platforms, targets = ("cuda",), (backend,)
    modes = _every_mode(ft.partial(fn, backend=backend))
    text = _lowered(modes, shape, (), platforms=platforms, dtype=dtype)
    for target in targets:
        assert CALLS[target] in text


def test_float64_is_refused_for_tpus_with_a_clear_error():
    def laplacian(padded):
        return sk.laplacian2d(padded, (1.0, 1.0))

    with pytest.raises(ValueError, match="Mosaic TPU kernels take fields of 32 bits or fewer"):
        _lowered(laplacian, (66, 66), platforms=("tpu",), dtype=jnp.float64)


def test_the_dispatching_laplacian_lowers_for_gpu_and_tpu():
    def fn(padded):
        return sk.laplacian(padded, (0.5, 0.6, 0.7), order=4)

    modes = _every_mode(lambda p, c: c * fn(p))
    text = _lowered(modes, (13, 11, 15), (), platforms=("cuda", "tpu"))
    assert CALLS["triton"] in text and CALLS["tpu"] in text


def test_one_trace_lowers_for_each_platform_and_runs_the_interpreter_on_a_cpu():
    """The platform being lowered, not the process's default backend, picks the target:
    one artifact holds a Triton kernel, a Mosaic TPU kernel and the interpreter, and its
    CPU branch computes the reference."""
    padded = jax.random.normal(jax.random.key(0), (34, 27), jnp.float32)
    exported = jax.export.export(
        jax.jit(lambda p: sk.laplacian2d(p, (0.5, 0.7))),
        platforms=("cpu", "cuda", "tpu"),
        disabled_checks=ALLOW_TRITON,
    )(padded)
    text = exported.mlir_module()
    assert CALLS["triton"] in text and CALLS["tpu"] in text
    np.testing.assert_allclose(
        exported.call(padded), sk.laplacian2d_reference(padded, (0.5, 0.7)), atol=1e-5
    )


def test_interpret_false_compiles_wherever_lowered_and_refuses_only_a_cpu():
    padded = jax.ShapeDtypeStruct((66, 66), jnp.float32)
    compiled = jax.jit(lambda p: sk.laplacian2d(p, (1.0, 1.0), interpret=False))
    text = jax.export.export(compiled, platforms=("cuda",), disabled_checks=ALLOW_TRITON)(padded)
    assert CALLS["triton"] in text.mlir_module()
    with pytest.raises(ValueError, match="on a CPU pass interpret=True"):
        compiled(jnp.zeros((66, 66), jnp.float32))


def test_a_tile_too_large_for_shared_memory_is_shrunk_for_mosaic_gpu():
    tiles = fit_tiles(
        "mosaic_gpu", "laplacian2d", (4096, 4096), (256, 256), width=1, num_channels=1, itemsize=4
    )
    assert 4 * (math.prod(tiles.window) + math.prod(tiles.block)) <= SMEM_BYTES
    assert max(tiles.window) <= 256
    text = _lowered(
        lambda p: sk.laplacian2d(p, (1.0, 1.0), block_shape=(256, 256), backend="mosaic_gpu"),
        (4098, 4098),
        platforms=("cuda",),
    )
    assert CALLS["mosaic_gpu"] in text


def test_tiles_that_are_not_powers_of_two_or_tpu_multiples_are_fitted():
    """A tile chosen for the interpreter, (100, 60), lowers for Triton (rounded down to
    powers of two) and for Mosaic TPU (multiples of (8, 128) or whole axes)."""
    assert fit_tiles(
        "triton", "laplacian2d", (512, 512), (100, 60), width=1, num_channels=1, itemsize=4
    ).block == (64, 32)
    tpu = fit_tiles("tpu", "laplacian2d", (512, 90), (100, 60), width=1, num_channels=1, itemsize=4)
    assert tpu.block == (96, 90) and tpu.window == (104, 128)
    text = _lowered(
        lambda p: sk.laplacian2d(p, (1.0, 1.0), block_shape=(100, 60)),
        (514, 92),
        platforms=("cuda", "tpu"),
    )
    assert CALLS["triton"] in text and CALLS["tpu"] in text


def test_a_halo_no_mosaic_gpu_window_can_hold_is_refused_with_a_clear_error():
    spacing, pad_fn = _periodic((400, 400))

    def steps(field):
        return sk.heat_steps(
            field,
            spacing,
            pad_fn=pad_fn,
            diffusivity=0.1,
            dt=0.1,
            num_steps=150,
            steps_per_launch=150,
            backend="mosaic_gpu",
        )

    with pytest.raises(ValueError, match="no Mosaic GPU tile fits a halo of 150 cells"):
        _lowered(steps, (400, 400), platforms=("cuda",))


# Each target's layout, run in the Pallas interpreter (barriers and TMA copies become
# plain copies there), against the references: small fields, several tiles each; float64
# but on the TPU, which computes in 32 bits.
LAYOUT_DTYPES = {"triton": jnp.float64, "mosaic_gpu": jnp.float64, "tpu": jnp.float32}
TOLERANCE = {jnp.float64: 1e-12, jnp.float32: 1e-5}


def _interpreted(target, kernel, interior, width, channels, block, dtype=None):
    itemsize = jnp.dtype(dtype or LAYOUT_DTYPES[target]).itemsize
    tiles = fit_tiles(
        target, kernel, interior, block, width=width, num_channels=channels, itemsize=itemsize
    )
    return Plan(target, tiles, interpret=True)


def _close(got, want):
    scale = 1.0 + float(jnp.max(jnp.abs(want)))
    np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCE[want.dtype.type] * scale)


@pytest.mark.parametrize("target", list(LAYOUT_DTYPES))
def test_each_targets_layout_computes_the_laplacians(target):
    dtype = LAYOUT_DTYPES[target]
    padded = jax.random.normal(jax.random.key(1), (2, 21, 140), dtype)
    plan = _interpreted(target, "laplacian2d", (17, 136), 2, 1, (8, 64))
    got = laplacian_module._launch(padded, (0.5, 0.7), 4, plan)
    _close(got, sk.laplacian2d_reference(padded, (0.5, 0.7), order=4))
    padded = jax.random.normal(jax.random.key(2), (7, 11, 35), dtype)
    plan = _interpreted(target, "laplacian3d", (5, 9, 33), 1, 1, (4, 8, 32))
    got = laplacian_module._launch(padded, (0.5, 0.6, 0.7), 2, plan)
    _close(got, sk.laplacian3d_reference(padded, (0.5, 0.6, 0.7)))


DIFFUSIVITIES, SPACING = (0.2, 0.1), (1.0, 1.0)
_gray_scott_tendency = ft.partial(
    sk.reaction_diffusion_reference,
    spacing=SPACING,
    diffusivities=DIFFUSIVITIES,
    parameters=RATES,
    reaction_fn=REACTION,
)


def _gray_scott_launch(state, dt, steps, plan):
    params = jnp.array([dt, *DIFFUSIVITIES, *RATES], state.dtype)
    return temporal_module._launch(state, params, SPACING, steps, REACTION, plan)


def _euler_steps(state, dt, steps):
    for _ in range(steps):  # each step one ring smaller
        state = state[:, 1:-1, 1:-1] + dt * _gray_scott_tendency(state)
    return state


@pytest.mark.parametrize("target", list(LAYOUT_DTYPES))
def test_each_targets_layout_computes_reaction_diffusion_and_its_steps(target):
    dtype = LAYOUT_DTYPES[target]
    state = jax.random.uniform(jax.random.key(3), (2, 19, 138), dtype)
    params = jnp.array([*DIFFUSIVITIES, *RATES], dtype)
    plan = _interpreted(target, "reaction_diffusion", (17, 136), 1, 2, (8, 64))
    got = reaction_diffusion_module._launch(state, params, SPACING, REACTION, plan)
    _close(got, _gray_scott_tendency(state))
    plan = _interpreted(target, "temporal2d", (13, 132), 3, 2, (8, 64))
    _close(_gray_scott_launch(state, 0.5, 3, plan), _euler_steps(state, 0.5, 3))


@pytest.mark.parametrize("target", list(LAYOUT_DTYPES))
def test_each_targets_layout_computes_the_mac_momentum(target):
    dtype = LAYOUT_DTYPES[target]
    velocity = jax.random.normal(jax.random.key(5), (2, 19, 138), dtype)
    params = jnp.array([0.1, 0.5], dtype)
    plan = _interpreted(target, "mac_momentum", (17, 136), 1, 2, (8, 64))
    got = flow_module._launch(velocity, params, (0.5, 0.7), plan)
    _close(got, sk.mac_momentum_reference(velocity, (0.5, 0.7), 0.1, 0.5))


def test_mosaic_gpus_tma_copies_run_in_its_interpreter():
    """Float32 windows and tiles go through the TMA and its barrier (float64 ones, above,
    through threads): Mosaic GPU's interpreter simulates the copies, here around three
    temporally blocked Gray–Scott steps kept in shared memory."""
    state = jax.random.uniform(jax.random.key(4), (2, 19, 138), jnp.float32)
    plan = _interpreted("mosaic_gpu", "temporal2d", (13, 132), 3, 2, (8, 64), jnp.float32)
    _close(_gray_scott_launch(state, 0.5, 3, plan), _euler_steps(state, 0.5, 3))


def test_mosaic_gpu_kernels_lower_without_deprecated_entry_points():
    """Mosaic GPU kernels are `plgpu.kernel`s: JAX deprecates `pl.pallas_call` for them
    (jax 0.11 lowers none)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        text = _lowered(
            lambda p: sk.laplacian2d(p, (0.5, 0.7), backend="mosaic_gpu"),
            (70, 134),
            platforms=("cuda",),
        )
    assert CALLS["mosaic_gpu"] in text


# The main compiled programs, exported as a whole by `simlab.export` for both platforms.
def _export(fn, *args):
    exported = simlab.export(fn, *args, platforms=("cuda", "tpu"))
    text = exported.mlir_module()
    assert "callback" not in text  # the runtime checks are in the program, as NaN
    return text


def test_a_vmapped_adaptive_ensemble_exports():
    y0, ts = jnp.array([1.0, 1.0, 1.0]), jnp.linspace(0.0, 1.0, 5)

    def ensemble(sigmas):
        def member(sigma):
            model = simlab.models.Lorenz(sigma=sigma, rho=28.0, beta=8 / 3)
            return simlab.simulate(model, y0, ts, throw=False).ys

        return jax.vmap(member)(sigmas)

    _export(ensemble, jnp.linspace(9.0, 11.0, 8))


def test_an_sde_ensemble_exports_with_its_keys():
    y0, ts = jnp.array([2.0]), jnp.linspace(0.0, 1.0, 5)

    def ensemble(keys, sigma):
        def member(key):
            model = simlab.models.OrnsteinUhlenbeck(theta=1.0, mu=0.5, sigma=sigma)
            return simlab.simulate(model, y0, ts, key=key, adaptive=False, dt0=0.05).ys

        return jax.vmap(member)(keys)

    _export(ensemble, jax.random.split(jax.random.key(0), 8), jnp.array(0.3))


def test_a_dae_solve_with_its_consistent_initialisation_exports():
    def robertson(k1):
        model = simlab.models.RobertsonDAE(k1=k1)
        return simlab.simulate(
            model, jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 1.0, 10.0]), solver="rodas5p"
        ).ys

    _export(robertson, jnp.array(0.04))


def test_a_symplectic_solve_and_its_gradient_export():
    y0 = jnp.array([0.4, 0.0, 0.0, 2.0])  # Kepler, e = 0.6
    ts = jnp.linspace(0.0, 2.0, 5)

    def orbit(mu):
        model = simlab.models.Kepler(mu=mu)
        return simlab.simulate(model, y0, ts, solver="mclachlan4", adaptive=False, dt0=0.01).ys

    _export(lambda mu: (orbit(mu), jax.grad(lambda m: jnp.sum(orbit(m)[-1] ** 2))(mu)), 1.0)


def test_a_navier_stokes_rollout_and_its_viscosity_gradient_export():
    grid = simlab.Grid((32, 32), extent=2 * jnp.pi)
    w0 = simlab.models.taylor_green_vorticity(grid)
    ts = jnp.linspace(0.0, 0.5, 3)

    def rollout(viscosity):
        model = simlab.models.NavierStokes2D(grid=grid, viscosity=viscosity)
        return simlab.simulate(model, w0, ts, solver="etdrk4", adaptive=False, dt0=0.05).ys

    _export(lambda nu: (rollout(nu), jax.grad(lambda v: jnp.sum(rollout(v)[-1] ** 2))(nu)), 0.01)


def test_a_stiff_solve_exports_with_its_failure_check():
    def robertson(k1):
        model = simlab.models.Robertson(k1=k1)
        return simlab.simulate(
            model, jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 1.0, 10.0]), solver="rodas5p"
        ).ys

    _export(robertson, jnp.array(0.04))


def test_a_pde_rollout_with_pallas_stencils_exports_its_kernels():
    grid = simlab.Grid((32, 32), extent=32.0, boundary="periodic")

    def rollout(state):
        model = simlab.models.GrayScott(**GRAY_SCOTT, grid=grid, impl="pallas")
        model = with_dtype(model, jnp.float32)  # a TPU computes in 32 bits
        ts = jnp.array([0.0, 1.0, 2.0], jnp.float32)
        return simlab.simulate(model, state, ts, solver="tsit5").ys

    text = _export(rollout, jnp.ones((2, 32, 32), jnp.float32))
    assert CALLS["triton"] in text and CALLS["tpu"] in text


def test_a_walled_flow_rollout_with_the_fused_kernel_and_its_gradient_export():
    """The cavity on 13² cells with `impl="pallas"`: the fused momentum kernel and the
    Laplacian kernels of its derivative, exported for Triton and Mosaic TPU (adaptive
    steps, in float32)."""
    model, y0 = simlab.models.WalledNavierStokes2D.lid_driven_cavity(num_cells=13)
    grid = model.grid

    def rollout(viscosity):
        model = simlab.models.WalledNavierStokes2D(viscosity=viscosity, grid=grid, impl="pallas")
        model = with_dtype(model, jnp.float32)  # a TPU computes in 32 bits
        ts = jnp.array([0.0, 0.01, 0.02], jnp.float32)
        return simlab.simulate(model, y0.astype(jnp.float32), ts, solver="tsit5").ys

    def both(viscosity):
        return rollout(viscosity), jax.grad(lambda nu: jnp.sum(rollout(nu)[-1] ** 2))(viscosity)

    text = _export(both, jnp.asarray(0.01, jnp.float32))
    assert CALLS["triton"] in text and CALLS["tpu"] in text


LOTKA_VOLTERRA = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.8, delta=0.02)


def test_a_sweep_chunk_exports():
    """The compiled function `sweep` runs per chunk (`compiled_chunk`), on a one-device mesh."""
    mesh = member_mesh(jax.devices()[:1])

    arrays, statics = chunk_program(
        LOTKA_VOLTERRA,
        jnp.array([10.0, 5.0]),
        jnp.linspace(0.0, 5.0, 6),
        mesh=mesh,
        names=("alpha",),
        observable=None,
        settings=simlab.SolveOptions(),
        event=None,
    )

    def chunk(values):
        return compiled_chunk(arrays, values, statics)

    _export(chunk, jnp.linspace(0.4, 0.6, 8)[:, None])


def test_a_fit_exports():
    """`fit` under `jax.jit` (traced, so the whole loop: here two Levenberg–Marquardt
    steps, with QR solves)."""
    ts, y0 = jnp.linspace(0.0, 5.0, 11), jnp.array([10.0, 5.0])

    def fit(observations):
        result = simlab.fit(
            LOTKA_VOLTERRA,
            ts,
            observations,
            y0=y0,
            params=["alpha", "beta"],
            max_steps=2,
            throw=False,
        )
        return result.params["alpha"], result.loss

    _export(fit, jnp.ones((11, 2)))


def test_an_exported_check_reports_nan_and_the_process_still_raises():
    def too_few_steps(y0):
        model = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)
        return simlab.simulate(model, y0, jnp.array([0.0, 10.0]), max_steps=4).ys

    y0 = jnp.array([1.0, 1.0, 1.0])
    exported = simlab.export(too_few_steps, y0, platforms=("cpu",))
    assert bool(jnp.all(jnp.isnan(exported.call(y0))))
    with pytest.raises(Exception, match="maximum number of solver steps"):
        jax.block_until_ready(jax.jit(too_few_steps)(y0))


# name -> (fn(positions, coefficient), positions shape, dtype): the benchmark's N = 8192,
# then a count that is no multiple of a block, in a periodic box with a cutoff.
PAIR_CASES = {
    "gravity 8192 bodies": (
        lambda x, c: sk.pair_forces(x, 1.0, (c, 0.01), pair_scale=sk.gravity_scale),
        (8192, 3),
        jnp.float32,
    ),
    "lennard-jones 1000 particles, box and cutoff": (
        lambda x, c: sk.pair_forces(
            x, 1.0, (c, 1.0), pair_scale=sk.lennard_jones_scale, cutoff=2.5, box=10.0
        ),
        (1000, 3),
        jnp.float32,
    ),
    "gravity 77 bodies in a plane float64": (
        lambda x, c: sk.pair_forces(x, 1.0, (c, 0.01), pair_scale=sk.gravity_scale),
        (77, 2),
        jnp.float64,
    ),
}


@pytest.mark.parametrize("case", list(PAIR_CASES))
def test_pair_forces_lower_in_both_modes(case):
    fn, shape, dtype = PAIR_CASES[case]
    platforms = ("cuda",) if dtype == jnp.float64 else ("cuda", "tpu")
    text = _lowered(_every_mode(fn), shape, (), platforms=platforms, dtype=dtype)
    assert CALLS["triton"] in text
    assert (CALLS["tpu"] in text) == ("tpu" in platforms)
