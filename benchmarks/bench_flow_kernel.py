"""The fused Pallas momentum kernel of the walled flow (`simlab.kernels.mac_momentum`):
interpret rows on this CPU, and its lowering for GPUs and TPUs.

The Pallas interpreter exists for correctness: on a CPU it runs each tile as one iteration
of an XLA loop, so the ratios (XLA time / Pallas-interpret time, above 1: Pallas faster)
say what the CPU path costs, not what the kernel gains on a GPU. The lowering row exports
the kernel's value and gradient at 512² in float32 for Triton, Mosaic GPU and Mosaic TPU,
as `tests/test_lowering.py` does; lowering is not compiling or running on the devices.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from _harness import Row, best_seconds

import simlab
import simlab.kernels as sk

SIZE = 512
SPACING = (1.0 / SIZE, 1.0 / SIZE)
VISCOSITY, BODY_FORCE = 0.01, 0.5
TARGET = "none (CPU)"
ALLOW_TRITON = [jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")]
# target -> (platform, backend, the custom call its lowering leaves in the module)
LOWERINGS = {
    "triton": ("cuda", "triton", "xla.gpu.triton"),
    "mosaic_gpu": ("cuda", "mosaic_gpu", "mosaic_gpu_v2"),
    "tpu": ("tpu", "triton", "tpu_custom_call"),
}


def _ratio_row(name, xla_fn, pallas_fn) -> Row:
    best = best_seconds({"xla": xla_fn, "pallas": pallas_fn}, repeats=5)
    cells = SIZE**2
    detail = (
        f"XLA {cells / best['xla'] / 1e9:.3f}, "
        f"Pallas-interpret {cells / best['pallas'] / 1e9:.3f} Gcell/s"
    )
    return Row(name, best["xla"] / best["pallas"], TARGET, detail)


@eqx.filter_jit
def _model_tendency(model, y):
    return model.momentum_tendency(y)


def _model_row() -> Row:
    """The cavity's momentum tendency: the model's XLA path (shifted arrays) against the
    padding and the fused kernel (`impl="pallas"`)."""
    grid = simlab.Grid(
        (SIZE, SIZE),
        extent=1.0,
        boundary=["dirichlet", (simlab.Dirichlet(0.0), simlab.Dirichlet(1.0))],
    )
    models = {
        impl: simlab.models.WalledNavierStokes2D(
            jnp.asarray(VISCOSITY, jnp.float32), grid, impl=impl
        )
        for impl in ("xla", "pallas")
    }
    models = jax.tree.map(lambda x: x.astype(jnp.float32) if eqx.is_inexact_array(x) else x, models)
    key = jax.random.key(0)
    y = models["xla"].project(jax.random.normal(key, (2, SIZE, SIZE), jnp.float32))
    return _ratio_row(
        f"flow kernel: cavity tendency {SIZE}² XLA/Pallas-interpret",
        lambda: _model_tendency(models["xla"], y),
        lambda: _model_tendency(models["pallas"], y),
    )


def _padded_velocity():
    return jax.random.normal(jax.random.key(1), (2, SIZE + 2, SIZE + 2), jnp.float32)


def _kernel_row() -> Row:
    """The kernel against its `jax.numpy` reference on the same padded field."""
    padded = _padded_velocity()
    fused = jax.jit(lambda p: sk.mac_momentum(p, SPACING, VISCOSITY, BODY_FORCE))
    reference = jax.jit(lambda p: sk.mac_momentum_reference(p, SPACING, VISCOSITY, BODY_FORCE))
    return _ratio_row(
        f"flow kernel: mac_momentum {SIZE}² reference/Pallas-interpret",
        lambda: reference(padded),
        lambda: fused(padded),
    )


def _lowers(target: str) -> str:
    """'ok' with the module's size, or the error, for the value and gradient on `target`."""
    platform, backend, call = LOWERINGS[target]

    def value_and_gradient(padded, viscosity):
        def loss(p, nu):
            return jnp.sum(sk.mac_momentum(p, SPACING, nu, BODY_FORCE, backend=backend) ** 2)

        return jax.value_and_grad(loss, argnums=(0, 1))(padded, viscosity)

    args = (
        jax.ShapeDtypeStruct((2, SIZE + 2, SIZE + 2), jnp.float32),
        jax.ShapeDtypeStruct((), jnp.float32),
    )
    try:
        exported = jax.export.export(
            jax.jit(value_and_gradient), platforms=[platform], disabled_checks=ALLOW_TRITON
        )(*args)
    except Exception as error:  # a failed lowering is the result this row reports
        return f"failed ({type(error).__name__}: {str(error)[:80]})"
    text = exported.mlir_module()
    return f"ok ({len(text) // 1000} kB)" if call in text else f"no {call} call"


def _lowering_row() -> Row:
    results = {target: _lowers(target) for target in LOWERINGS}
    lowered = sum(result.startswith("ok") for result in results.values())
    detail = "; ".join(f"{target} {result}" for target, result in results.items())
    return Row(
        f"flow kernel: mac_momentum {SIZE}² value+grad lowers (of 3)",
        lowered,
        ">= 3",
        detail,
    )


def rows() -> list[Row]:
    return [_model_row(), _kernel_row(), _lowering_row()]
