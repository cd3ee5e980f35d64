"""The GPU benchmark of `simlab.kernels`: correctness of the compiled kernels on the
device, then cells/s and GB/s for XLA and Pallas, single step and temporally blocked.

Usage (on a GPU machine; `benchmarks/gpu.sh` runs it and keeps the output):

    python benchmarks/gpu_kernels.py                # full run, 4096² to 16384²
    python benchmarks/gpu_kernels.py --interpret    # CPU: the checks in interpret mode, small

Bandwidths count the bytes a kernel must move at least (each input read once, each output
written once); the copy bandwidth measured first (`y = 2x`, one read and one write) is the
practical roofline. Failures to lower (a backend that cannot take a kernel) are printed,
not hidden, and the run goes on.
"""

import argparse
import functools as ft
import statistics
import sys
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np
from gpu_model import chip_rates

import simlab
import simlab.kernels as sk

# Gray–Scott through the fused kernel: (D_u, D_v), (F, k) and the model's reaction.
GRAY_SCOTT = dict(
    spacing=(1.0, 1.0),
    diffusivities=(0.2, 0.1),
    parameters=(0.035, 0.065),
    reaction_fn=simlab.models.GrayScott.reaction,
)
# Staggered-grid momentum: cell sizes, viscosity and body force.
MAC = dict(spacing=(0.5, 0.7), viscosity=0.01, body_force=0.3)
TARGETS = {"laplacian2d": 400.0, "temporal": 600.0, "gray_scott": 200.0}  # Gcell/s, H200


def heat_settings(grid, **settings):
    """The keywords of `sk.heat_steps` for a field on `grid`, padded by its conditions."""
    return dict(
        spacing=grid.spacing, pad_fn=lambda u, width: simlab.grid.pad(u, grid, width), **settings
    )


def seconds(fn, arg, *, repeats):
    jax.block_until_ready(fn(arg))  # compile and warm up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(arg))
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def attempt(label, fn):
    """Runs `fn`, printing the first line of any error instead of stopping the run."""
    try:
        return fn()
    except Exception as error:  # a lowering that is not supported is a result too
        first = (str(error).strip().splitlines() or [""])[0][:160]
        print(f"  {label:<46} FAILED {type(error).__name__}: {first}", flush=True)
        if "--traceback" in sys.argv:
            traceback.print_exc()
        return None


def check(label, kernel_fn, reference_fn, arg, tolerance):
    """Compares a jitted kernel with its jitted reference on `arg`."""
    actual = np.asarray(jax.jit(kernel_fn)(arg), np.float64)
    expected = np.asarray(jax.jit(reference_fn)(arg), np.float64)
    error = float(np.max(np.abs(actual - expected)) / (np.max(np.abs(expected)) + 1.0))
    ok = actual.shape == expected.shape and error <= tolerance
    print(f"  {label:<46} {'PASS' if ok else 'FAIL'}  relative error {error:.2e}", flush=True)
    return ok


def report(label, fn, arg, *, cells, num_bytes, repeats, model, target=None):
    """Times `fn(arg)` and prints cells/s and GB/s, the roofline model's prediction
    (`benchmarks/gpu_model.py`) and the target, if there is one."""
    elapsed = seconds(jax.jit(fn), arg, repeats=repeats)
    rate = cells / elapsed / 1e9
    verdict = ""
    if target is not None:
        verdict = f"  target >= {target:.0f}: {'met' if rate >= target else 'NOT met'}"
    print(
        f"  {label:<46} {elapsed * 1e3:9.3f} ms {rate:9.1f} Gcell/s "
        f"{num_bytes / elapsed / 1e9:8.1f} GB/s  model {model:6.0f} ({rate / model:4.0%})"
        f"{verdict}",
        flush=True,
    )
    return rate


def _same(fn):
    return fn


def _gradient(fn):
    return jax.grad(lambda p: jnp.sum(jnp.sin(fn(p))))


def launch_options(backend, interpret):
    """The keywords a kernel takes for `backend`: `"tpu"` names the platform (a TPU has one
    lowering, so the kernel takes no backend there)."""
    return dict(interpret=interpret, backend=None if backend == "tpu" else backend)


TOLERANCES = {"float32": 1e-5, "float64": 1e-12}


def correctness_cases(shape2d, shape3d, backend, interpret, dtypes=("float32", "float64")):
    """(label, kernel_fn, reference_fn, argument, tolerance) for one backend."""
    options = launch_options(backend, interpret)
    key = jax.random.key(0)
    cases = []
    for dtype, tolerance in ((jnp.dtype(d), TOLERANCES[d]) for d in dtypes):
        name = f"[{backend}] {{}} {jnp.dtype(dtype).name}"
        for order in (2, 4):
            padded = jax.random.normal(key, tuple(n + order for n in shape2d), dtype)
            cases.append(
                (
                    name.format(f"laplacian2d order {order}"),
                    ft.partial(sk.laplacian2d, spacing=(0.5, 0.7), order=order, **options),
                    ft.partial(sk.laplacian2d_reference, spacing=(0.5, 0.7), order=order),
                    padded,
                    tolerance,
                )
            )
        padded = jax.random.normal(key, tuple(n + 2 for n in shape2d), dtype)
        cases.append(
            (
                name.format("laplacian2d gradient"),
                _gradient(ft.partial(sk.laplacian2d, spacing=(0.5, 0.7), **options)),
                _gradient(ft.partial(sk.laplacian2d_reference, spacing=(0.5, 0.7))),
                padded,
                tolerance,
            )
        )
        for label, transform in (("laplacian3d", _same), ("laplacian3d gradient", _gradient)):
            cases.append(
                (
                    name.format(label),
                    transform(ft.partial(sk.laplacian3d, spacing=(0.5, 0.6, 0.7), **options)),
                    transform(ft.partial(sk.laplacian3d_reference, spacing=(0.5, 0.6, 0.7))),
                    jax.random.normal(key, tuple(n + 2 for n in shape3d), dtype),
                    tolerance,
                )
            )
        for label, transform in (("gray_scott", _same), ("gray_scott gradient", _gradient)):
            cases.append(
                (
                    name.format(label),
                    transform(ft.partial(sk.reaction_diffusion, **GRAY_SCOTT, **options)),
                    transform(ft.partial(sk.reaction_diffusion_reference, **GRAY_SCOTT)),
                    jax.random.uniform(key, (2, *(n + 2 for n in shape2d)), dtype),
                    tolerance,
                )
            )
        velocity = jax.random.normal(key, (2, *(n + 2 for n in shape2d)), dtype)
        for label, transform in (("mac_momentum", _same), ("mac_momentum gradient", _gradient)):
            cases.append(
                (
                    name.format(label),
                    transform(ft.partial(sk.mac_momentum, **MAC, **options)),
                    transform(ft.partial(sk.mac_momentum_reference, **MAC)),
                    velocity,
                    tolerance,
                )
            )
        grid = simlab.Grid(shape2d, boundary=["periodic", "neumann"])
        heat = heat_settings(grid, diffusivity=0.2, dt=0.5, num_steps=8)
        cases.append(
            (
                name.format("heat 8 steps, 4 per launch"),
                ft.partial(sk.heat_steps, steps_per_launch=4, **heat, **options),
                ft.partial(sk.heat_steps_reference, **heat),
                jax.random.normal(key, shape2d, dtype),
                tolerance,
            )
        )
    return cases


def correctness(shape2d, shape3d, backends, interpret, dtypes=("float32", "float64")):
    mode = "interpret" if interpret else "compiled"
    print(f"correctness (2-D {shape2d}, 3-D {shape3d}; {mode})")
    results = [
        attempt(label, ft.partial(check, label, kernel_fn, reference_fn, arg, tolerance))
        for backend in backends
        for label, kernel_fn, reference_fn, arg, tolerance in correctness_cases(
            shape2d, shape3d, backend, interpret, dtypes
        )
    ]
    failed = sum(result is not True for result in results)
    print(f"  {len(results) - failed} of {len(results)} checks passed\n", flush=True)
    return failed


def copy_bandwidth(size, repeats):
    """Measures and prints the bandwidth of `y = 2x` (GB/s), the practical roofline."""
    x = jnp.ones((size, size), jnp.float32)
    elapsed = seconds(jax.jit(lambda x: 2 * x), x, repeats=repeats)
    bandwidth = 2 * x.nbytes / elapsed / 1e9
    print(
        f"copy bandwidth (y = 2x, {size}² float32): {bandwidth:.1f} GB/s, so the single-step "
        f"5-point roofline is {bandwidth / 8:.0f} Gcell/s (8 bytes a cell)\n",
        flush=True,
    )
    return bandwidth


def throughput_cases(size, backends, interpret, steps, targets=TARGETS):
    """(label, model kernel, fn, argument, cells, bytes, target) at one size, float32; the
    model kernel names the row of `benchmarks/gpu_model.py` that predicts it."""
    cells, word = size * size, 4
    padded = jax.random.normal(jax.random.key(1), (size + 2, size + 2), jnp.float32)
    state = jax.random.uniform(jax.random.key(2), (2, size + 2, size + 2), jnp.float32)
    field = padded[1:-1, 1:-1]
    grid = simlab.Grid((size, size), boundary="periodic")
    heat = heat_settings(grid, diffusivity=0.2, dt=1.0, num_steps=steps)

    def target(name):
        return None if interpret else targets.get(name)

    cases = [
        (
            "laplacian2d XLA",
            "laplacian2d order 2",
            ft.partial(sk.laplacian2d_reference, spacing=(1.0, 1.0)),
            padded,
            cells,
            2 * cells * word,
            None,
        ),
        (
            "gray_scott XLA",
            "gray_scott (fused)",
            ft.partial(sk.reaction_diffusion_reference, **GRAY_SCOTT),
            state,
            cells,
            4 * cells * word,
            None,
        ),
        (
            "mac_momentum XLA",
            "mac_momentum (fused)",
            ft.partial(sk.mac_momentum_reference, **MAC),
            state,
            cells,
            4 * cells * word,
            None,
        ),
        (
            f"heat {steps} steps XLA (pad + step)",
            "heat, 1 steps/launch",
            ft.partial(sk.heat_steps_reference, **heat),
            field,
            cells * steps,
            2 * cells * word * steps,
            None,
        ),
    ]
    for backend in backends:
        options = launch_options(backend, interpret)
        cases += [
            (
                f"[{backend}] laplacian2d Pallas",
                "laplacian2d order 2",
                ft.partial(sk.laplacian2d, spacing=(1.0, 1.0), **options),
                padded,
                cells,
                2 * cells * word,
                target("laplacian2d"),
            ),
            (
                f"[{backend}] gray_scott Pallas (fused)",
                "gray_scott (fused)",
                ft.partial(sk.reaction_diffusion, **GRAY_SCOTT, **options),
                state,
                cells,
                4 * cells * word,
                target("gray_scott"),
            ),
            (
                f"[{backend}] mac_momentum Pallas (fused)",
                "mac_momentum (fused)",
                ft.partial(sk.mac_momentum, **MAC, **options),
                state,
                cells,
                4 * cells * word,
                None,
            ),
        ]
        for per_launch in (1, 4, 8):
            cases.append(
                (
                    f"[{backend}] heat {steps} steps, {per_launch}/launch",
                    f"heat, {per_launch} steps/launch",
                    ft.partial(sk.heat_steps, steps_per_launch=per_launch, **heat, **options),
                    field,
                    cells * steps,
                    2 * cells * word * -(-steps // per_launch),
                    None if per_launch == 1 else target("temporal"),
                )
            )
    return cases


def throughput(size, backends, interpret, repeats, steps, model=None, targets=TARGETS):
    """Times every case at one size and returns {label: Gcell/s} of those that ran."""
    mode = "interpret: NOT a speed measurement" if interpret else "compiled"
    print(f"throughput {size}² float32 ({mode})")
    model = chip_rates("H200") if model is None else model
    rates = {}
    for label, model_kernel, fn, arg, cells, num_bytes, target in throughput_cases(
        size, backends, interpret, steps, targets
    ):
        rates[label] = attempt(
            label,
            ft.partial(
                report,
                label,
                fn,
                arg,
                cells=cells,
                num_bytes=num_bytes,
                repeats=repeats,
                model=model[model_kernel],
                target=target,
            ),
        )
    print(flush=True)
    return {label: rate for label, rate in rates.items() if rate is not None}


def autotune(size, interpret):
    padded = jax.random.normal(jax.random.key(3), (size + 2, size + 2), jnp.float32)
    run = jax.jit(
        lambda block: sk.laplacian2d(padded, (1.0, 1.0), block_shape=block, interpret=interpret),
        static_argnums=0,
    )
    candidates = (
        [(8, 8), (16, 16)]
        if interpret
        else [(16, 64), (16, 128), (32, 64), (32, 128), (64, 64), (8, 256)]
    )
    best, timings = sk.autotune_block_shape(run, candidates, repeats=3)
    listing = ", ".join(f"{b}: {t * 1e3:.3f} ms" for b, t in timings.items())
    print(f"autotune laplacian2d {size}²: best {best} ({listing})\n", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--interpret",
        action="store_true",
        help="run on CPU in interpret mode at small sizes (checks only)",
    )
    parser.add_argument("--backends", default="triton,mosaic_gpu")
    parser.add_argument("--sizes", default="4096,8192,16384")
    parser.add_argument("--traceback", action="store_true")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)  # float64 checks; the benchmarks are float32
    backends = args.backends.split(",")
    print(f"simlab.kernels GPU benchmark — jax {jax.__version__}, device {jax.devices()[0]}\n")
    if args.interpret:
        failed = correctness((37, 29), (9, 7, 11), backends[:1], interpret=True)
        throughput(64, backends[:1], interpret=True, repeats=1, steps=8)
        autotune(32, interpret=True)
        return 1 if failed else 0
    if jax.default_backend() != "gpu":
        print("no GPU: run with --interpret for the CPU checks")
        return 2
    failed = correctness((1000, 777), (130, 70, 50), backends, interpret=False)
    copy_bandwidth(16384, repeats=10)
    for size in (int(s) for s in args.sizes.split(",")):
        throughput(size, backends, interpret=False, repeats=10, steps=8)
    autotune(8192, interpret=False)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
