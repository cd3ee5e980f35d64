"""All-pairs gravity for N = 8,192 bodies in float32: the Pallas kernel against XLA.

On a CPU the kernel runs in the Pallas interpreter, so the ratio says what interpreting
costs, not what a GPU gains; the row is "reported", without a target. The same program is
exported for a GPU (Triton) in the same run, and its size is reported: it must lower.
"""

import jax
import jax.numpy as jnp
import numpy as np
from _harness import Row, best_seconds

import simlab.kernels as sk

BODIES = 8192
GRAVITY = (1.0, 0.01)  # G, softening


def _forces(impl):
    def forces(positions, masses):
        return impl(positions, masses, GRAVITY, pair_scale=sk.gravity_scale)

    return jax.jit(forces)


def _exported_for_gpu() -> int:
    """The length of the CUDA module's text (Triton's kernel inside)."""
    arguments = (
        jax.ShapeDtypeStruct((BODIES, 3), jnp.float32),
        jax.ShapeDtypeStruct((BODIES,), jnp.float32),
    )
    allow = [jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")]
    exported = jax.export.export(_forces(sk.pair_forces), platforms=["cuda"], disabled_checks=allow)
    text = exported(*arguments).mlir_module()
    assert "xla.gpu.triton" in text
    return len(text)


def rows() -> list[Row]:
    keys = jax.random.split(jax.random.key(0))
    positions = jax.random.normal(keys[0], (BODIES, 3), jnp.float32)
    masses = jax.random.uniform(keys[1], (BODIES,), jnp.float32) / BODIES
    pallas, xla = _forces(sk.pair_forces), _forces(sk.pair_forces_reference)
    np.testing.assert_allclose(
        pallas(positions, masses), xla(positions, masses), rtol=2e-3, atol=1e-3
    )
    times = best_seconds(
        {"pallas": lambda: pallas(positions, masses), "xla": lambda: xla(positions, masses)},
        repeats=3,
    )
    return [
        Row(
            "pairs: gravity N=8192, Pallas (interpreted) / XLA time",
            times["pallas"] / times["xla"],
            "reported",
            f"XLA {times['xla'] * 1e3:.0f} ms; exported for cuda (Triton), "
            f"{_exported_for_gpu()} characters",
        )
    ]


if __name__ == "__main__":
    for row in rows():
        print(row)
