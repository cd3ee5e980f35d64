"""The TPU benchmark of simlab: kernels compiled by Mosaic TPU against their references,
their throughput beside the roofline model, tiles measured on the chip, `impl="auto"`
against `"xla"` and `"pallas"` end to end in `simulate`, the stiff solvers' accuracy in
float32, and the ensemble rows. `benchmarks/tpu.sh` runs it (with the accelerator tests)
and keeps the output in `benchmarks/results/tpu.txt`.

Usage: `python benchmarks/tpu_bench.py [--quick] [--sections kernels,tiles,...]`. On a CPU,
`--quick` runs every section at small sizes, the kernels in the Pallas interpreter: a
check of the script, not a measurement.
"""

import argparse
import functools as ft
import statistics
import sys
import time

import bench_ensemble
import bench_sde
import chip_ensembles
import gpu_ensemble
import gpu_kernels
import jax
import jax.numpy as jnp
import numpy as np
from gpu_model import chip_rates

import simlab
import simlab.kernels as sk

# `tiles` runs alone (`--sections tiles`): every candidate is a Mosaic compile, and the
# temporally blocked ones at 8192² took the machine's 40 GB of host memory.
SECTIONS = ("kernels", "models", "pairs", "stiff", "ensembles")


def median_seconds(fn, *args, repeats=5):
    """Median wall time of `fn(*args)` after one call that compiles and warms up."""
    jax.block_until_ready(fn(*args))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def verdict(name, value, target, met):
    print(f"  target {name}: {value:.2f} (target {target}): {'met' if met else 'NOT met'}")


# --- kernels: correctness, throughput, targets -------------------------------------------


def kernels(quick: bool) -> int:
    interpret = None if not quick else True
    shapes = [((37, 29), (9, 7, 11))] if quick else [((1000, 777), (130, 70, 50))]
    # Shapes that are not whole (8, 128) tiles: one program along a short axis.
    shapes.append(((64, 64), (13, 70, 50)))
    failed = sum(
        gpu_kernels.correctness(shape2d, shape3d, ["tpu"], interpret, dtypes=("float32",))
        for shape2d, shape3d in shapes
    )
    size = 64 if quick else 8192
    copy = gpu_kernels.copy_bandwidth(size, repeats=10)
    model = chip_rates("TPU v5e", "tpu")
    rates = gpu_kernels.throughput(
        size, ["tpu"], interpret, repeats=10, steps=8, model=model, targets={}
    )
    laplacian = rates.get("[tpu] laplacian2d Pallas")
    if laplacian:
        verdict(
            "laplacian2d GB/s / copy GB/s",
            laplacian * 8 / copy,
            ">= 0.8",
            laplacian * 8 >= 0.8 * copy,
        )
    single, blocked = (
        rates.get("[tpu] heat 8 steps, 1/launch"),
        rates.get("[tpu] heat 8 steps, 8/launch"),
    )
    if single and blocked:
        verdict("heat 8/launch over 1/launch", blocked / single, ">= 4", blocked >= 4 * single)
        share = blocked / model["heat, 8 steps/launch"]
        verdict("heat 8/launch of the model", share, ">= 0.3", share >= 0.3)
    return failed


# --- tiles measured on the chip ---------------------------------------------------------


def _tile_candidates(quick):
    if quick:
        return {"laplacian2d": [(8, 128), (16, 128)]}
    two_d = [(64, 2048), (128, 1024), (128, 2048), (256, 1024), (512, 512), (32, 8192)]
    return {
        "laplacian2d": two_d,
        "reaction_diffusion": [(64, 1024), (128, 512), (128, 1024), (256, 512)],
    }


def _tile_runs(size):
    key = jax.random.key(3)
    padded = jax.random.normal(key, (size + 2, size + 2), jnp.float32)
    state = jax.random.uniform(key, (2, size + 2, size + 2), jnp.float32)
    return {
        "laplacian2d": lambda b: sk.laplacian2d(padded, (1.0, 1.0), block_shape=b),
        "reaction_diffusion": lambda b: sk.reaction_diffusion(
            state, **gpu_kernels.GRAY_SCOTT, block_shape=b
        ),
    }


def tiles(quick: bool) -> int:
    size = 256 if quick else 8192
    print(f"tiles measured on the chip ({size}² float32; the table's first)")
    runs = _tile_runs(size)
    for kernel, candidates in _tile_candidates(quick).items():
        table = sk.default_block_shape(kernel, (size,) * len(candidates[0]), "tpu")
        run = jax.jit(runs[kernel], static_argnums=0)
        try:
            best, timings = sk.autotune_block_shape(run, [table, *candidates], repeats=3)
        except ValueError as error:
            print(f"  {kernel:<20} FAILED {error}")
            continue
        jax.clear_caches()  # each tile's executable holds host memory
        ranked = sorted(timings.items(), key=lambda item: item[1])[:5]
        listing = ", ".join(f"{b}: {t * 1e3:.3f} ms" for b, t in ranked)
        print(
            f"  {kernel:<20} table {table}: {timings.get(table, float('nan')) * 1e3:.3f} ms; "
            f"best {best} ({len(timings)} of {len(candidates) + 1} ran; fastest {listing})",
            flush=True,
        )
    print()
    return 0


# --- all-pairs forces -------------------------------------------------------------------


def pairs(quick: bool) -> int:
    count = 512 if quick else 8192
    key = jax.random.key(4)
    positions = jax.random.normal(key, (count, 3), jnp.float32)
    masses = jax.random.uniform(key, (count,), jnp.float32, 0.5, 1.5)
    settings = dict(parameters=(1.0, 0.05), pair_scale=sk.gravity_scale)
    pallas = jax.jit(ft.partial(sk.pair_forces, **settings))
    reference = jax.jit(ft.partial(sk.pair_forces_reference, **settings))
    error = jnp.max(jnp.abs(pallas(positions, masses) - reference(positions, masses)))
    error = float(error / jnp.max(jnp.abs(reference(positions, masses))))
    xla_s = median_seconds(reference, positions, masses)
    pallas_s = median_seconds(pallas, positions, masses)
    print(
        f"gravity pair_forces, {count} bodies: XLA {xla_s * 1e3:.3f} ms, Pallas "
        f"{pallas_s * 1e3:.3f} ms (Pallas/XLA speed {xla_s / pallas_s:.2f}); relative "
        f"difference {error:.1e}"
    )
    verdict("pair_forces Pallas over XLA", xla_s / pallas_s, ">= 1.0", xla_s >= pallas_s)
    print()
    return int(not error < 1e-4)


# --- impl="auto" end to end -------------------------------------------------------------

# The kernel whose choice decides each model's path (the Laplacian for the others).
MODEL_KERNELS = {"GrayScott": "reaction_diffusion", "WalledNavierStokes2D": "mac_momentum"}


def _grid_models(n):
    grid = simlab.Grid((n, n), extent=1.0, boundary="periodic")
    # The cavity's pressure solve dominates its step: a quarter of the side keeps it short.
    cavity = simlab.Grid(
        (n // 4, n // 4),
        extent=1.0,
        boundary=["dirichlet", (simlab.Dirichlet(0.0), simlab.Dirichlet(1.0))],
    )
    h = grid.spacing[0]
    f32 = np.float32
    return {
        # name: (constructor of impl, step, solver)
        "Heat": (lambda i: simlab.models.Heat(f32(1.0), grid, impl=i), 0.2 * h**2, "rk4"),
        "AdvectionDiffusion": (
            lambda i: simlab.models.AdvectionDiffusion(
                f32(1.0), np.array([1.0, 0.5], f32), grid, impl=i
            ),
            0.2 * h**2,
            "rk4",
        ),
        "Wave": (lambda i: simlab.models.Wave(f32(1.0), grid, impl=i), 0.3 * h, "rk4"),
        "Burgers": (lambda i: simlab.models.Burgers(f32(0.01), grid, impl=i), 0.1 * h, "rk4"),
        "GrayScott": (
            lambda i: simlab.models.GrayScott(
                f32(0.035), f32(0.065), f32(0.2), f32(0.1), simlab.Grid((n, n)), impl=i
            ),
            0.9,
            "rk4",
        ),
        "StochasticHeat": (
            lambda i: simlab.models.StochasticHeat(f32(1.0), f32(0.1), grid, impl=i),
            0.2 * h**2,
            "euler_maruyama",
        ),
        "StochasticAllenCahn": (
            lambda i: simlab.models.StochasticAllenCahn(f32(0.05), f32(0.1), grid, impl=i),
            0.2 * h**2,
            "euler_maruyama",
        ),
        "WalledNavierStokes2D": (
            lambda i: simlab.models.WalledNavierStokes2D(f32(0.01), cavity, impl=i),
            0.1 * cavity.spacing[0],
            "rk4",
        ),
    }


def _initial_state(model, key):
    shape = model.state_shape
    y0 = 0.1 * jax.random.normal(key, shape, jnp.float32)
    if isinstance(model, simlab.models.GrayScott):
        y0 = jnp.abs(y0).at[0].add(0.9)
    if isinstance(model, simlab.models.WalledNavierStokes2D):
        y0 = model.project(y0)
    return y0


def _solve(model, y0, dt, steps, solver):
    ts = jnp.asarray([0.0, steps * dt], jnp.float32)
    settings = dict(solver=solver, adaptive=False, dt0=dt, max_steps=steps + 1, throw=False)
    if solver == "euler_maruyama":
        settings["key"] = jax.random.key(7)
    return simlab.simulate(model, y0, ts, **settings).ys[-1]


def models(quick: bool) -> int:
    n, steps = (32, 10) if quick else (1024, 400)
    print(
        f"impl='auto' against 'xla' and 'pallas' in simulate ({n}², {steps} fixed steps, float32)"
    )
    failed = 0
    for name, (build, dt, solver) in _grid_models(n).items():
        kernel = MODEL_KERNELS.get(name, "laplacian")
        y0 = _initial_state(build("xla"), jax.random.key(5))
        seconds, finals = {}, {}
        for impl in ("xla", "pallas", "auto"):
            run = jax.jit(ft.partial(_solve, dt=float(dt), steps=steps, solver=solver))
            model = build(impl)
            try:
                finals[impl] = run(model, y0)
                seconds[impl] = median_seconds(run, model, y0, repeats=3)
            except ValueError as error:  # no Pallas path for one of its operators
                print(f"  {name:<22} {impl:<6} refused: {str(error)[:100]}")
            except Exception as error:  # a path the chip cannot take is a result too
                print(f"  {name:<22} {impl:<6} FAILED {type(error).__name__}: {str(error)[:120]}")
                failed += 1
        if "xla" not in seconds or "auto" not in seconds:
            failed += 1
            continue
        scale = float(jnp.max(jnp.abs(finals["xla"]))) + 1e-30
        differences = {
            impl: float(jnp.max(jnp.abs(finals[impl] - finals["xla"]))) / scale for impl in finals
        }
        best = min(seconds.get("xla"), seconds.get("pallas", float("inf")))
        listing = ", ".join(f"{impl} {s * 1e3:8.2f} ms" for impl, s in seconds.items())
        choice = simlab.grid.resolve_impl("auto", kernel)
        print(
            f"  {name:<22} {listing}; auto/best {seconds['auto'] / best:.3f} (auto took "
            f"{choice} for {kernel}); |pallas - xla| {differences.get('pallas', float('nan')):.1e}",
            flush=True,
        )
        failed += int(not differences.get("pallas", 0.0) < 1e-3)
    print()
    return failed


# --- stiff solvers in float32 -----------------------------------------------------------


def _robertson_reference(t1):
    from scipy.integrate import solve_ivp

    def rhs(t, y):
        return [
            -0.04 * y[0] + 1e4 * y[1] * y[2],
            0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
            3e7 * y[1] ** 2,
        ]

    solution = solve_ivp(rhs, (0, t1), [1.0, 0.0, 0.0], method="Radau", rtol=1e-12, atol=1e-14)
    return solution.y[:, -1]


def stiff(quick: bool) -> int:
    t1 = 40.0
    reference = _robertson_reference(t1)
    model = simlab.models.Robertson()
    y0 = jnp.asarray([1.0, 0.0, 0.0], jnp.float32)
    failed = 0
    print(f"stiff solvers, Robertson to t = {t1:g}, float32, rtol 1e-4 (SciPy Radau reference)")
    for solver in ("rodas5p", "radau5"):
        trajectory = simlab.simulate(
            model, y0, jnp.asarray([0.0, t1]), solver=solver, rtol=1e-4, atol=1e-8
        )
        error = np.max(
            np.abs(np.asarray(trajectory.ys[-1], np.float64) - reference)
            / np.maximum(np.abs(reference), 1e-6)
        )
        print(
            f"  {solver:<8} max relative error {error:.1e} ({trajectory.stats['num_steps']} steps)"
        )
        failed += int(not error < 1e-3)
    print()
    return failed


# --- ensembles --------------------------------------------------------------------------


def _row(label, seconds, bare):
    print(f"  {label:<52} {seconds * 1e3:9.2f} ms   bare/this {bare / seconds:5.2f}", flush=True)


def ensembles(quick: bool) -> int:
    fixed_batch, adaptive_batch = (256, 256) if quick else (2**18, 2**16)
    y0, rho = bench_ensemble.inputs(fixed_batch)
    y0, rho = y0.astype(jnp.float32), rho.astype(jnp.float32)
    steps, dt = bench_ensemble.FIXED_STEPS, bench_ensemble.DT
    print(f"ensembles, float32: {fixed_batch} Lorenz x {steps} fixed RK4 steps")
    bare = median_seconds(bench_ensemble.bare_loop, y0, rho, repeats=3)
    _row("bare lax.scan RK4", bare, bare)
    for saves in (2, 11, 101):
        ts = jnp.linspace(0.0, steps * dt, saves, dtype=jnp.float32)
        for integrator in ("lean", "diffrax"):
            run = bench_ensemble.vmapped_simulate(
                ts, solver="rk4", adaptive=False, dt0=dt, integrator=integrator
            )
            _row(
                f"simlab {integrator}, {saves} saves", median_seconds(run, y0, rho, repeats=3), bare
            )
    print(f"ensembles, float32: {adaptive_batch} Lorenz, adaptive Tsit5 to t = 1, tolerance 1e-4")
    y0, rho = bench_ensemble.inputs(adaptive_batch)
    y0, rho = y0.astype(jnp.float32), rho.astype(jnp.float32)
    hand = bench_ensemble.hand_written_adaptive(1.0, 1e-4)
    bare = median_seconds(hand, y0, rho, repeats=3)
    _row("bare vmapped lax.while_loop", bare, bare)
    ts = jnp.asarray([0.0, 1.0], jnp.float32)
    for integrator in ("lean", "diffrax"):
        run = bench_ensemble.vmapped_simulate(ts, rtol=1e-4, atol=1e-4, integrator=integrator)
        _row(f"simlab {integrator}, save at t1", median_seconds(run, y0, rho, repeats=3), bare)
    members = 2**10 if quick else 2**20
    parameters, lorenz0 = gpu_ensemble.ensemble_inputs(members, jax.random.key(0))
    print(f"ensembles, float32: {members} Lorenz x 1000 fixed Tsit5 steps (gpu_ensemble.py)")
    kernel = ft.partial(gpu_ensemble.pallas_ensemble, num_steps=1000, dt=1e-3, interpret=quick)
    lean = ft.partial(gpu_ensemble.simlab_ensemble, num_steps=1000, dt=1e-3)
    kernel_s = median_seconds(kernel, parameters, lorenz0, repeats=3)
    _row("hand-written Pallas kernel, state in registers", kernel_s, kernel_s)
    _row("simlab lean", median_seconds(lean, parameters, lorenz0, repeats=3), kernel_s)
    simlab_kernel = ft.partial(
        gpu_ensemble.simlab_ensemble, num_steps=1000, dt=1e-3, integrator="kernel"
    )
    _row("simlab kernel", median_seconds(simlab_kernel, parameters, lorenz0, repeats=3), kernel_s)
    hand_written = kernel(parameters, lorenz0)
    difference = jnp.max(jnp.abs(hand_written - lean(parameters, lorenz0)))
    print(f"  max |kernel - lean| {float(difference):.1e}")
    kernel_difference = jnp.max(jnp.abs(hand_written - simlab_kernel(parameters, lorenz0)))
    print(f"  max |kernel - simlab kernel| {float(kernel_difference):.1e}\n")
    failed = int(not difference < 1e-2) + int(not kernel_difference < 1e-2)
    return (
        failed
        + _adaptive_vdp_rows(quick)
        + _ou_rows(quick)
        + _sensitivity_row(quick)
        + _multistart_fit_rows(quick)
    )


def _adaptive_vdp_rows(quick: bool) -> int:
    """Adaptive Van der Pol per member-step against the bare while loop; `sweep` against
    vmapped `simulate`."""
    members = 256 if quick else 2**16
    mus = chip_ensembles.vdp_mus(members)
    print(
        f"ensembles, float32: {members} Van der Pol, mu in [0.1, 10], adaptive Heun 2(1), "
        f"rtol {chip_ensembles.VDP_RTOL}, to t = {chip_ensembles.VDP_T1}; per member-step"
    )
    bare_s = median_seconds(chip_ensembles.bare_adaptive_vdp, mus, repeats=3)
    bare_end, bare_steps = chip_ensembles.bare_adaptive_vdp(mus)
    bare_rate = float(jnp.sum(bare_steps)) / bare_s
    _row("bare vmapped lax.while_loop, end state only", bare_s, bare_s)
    failed, seconds = 0, {}
    runs = [(2, "lean"), (11, "lean"), (2, "kernel"), (11, "kernel"), (2, "diffrax")]
    for saves, integrator in runs:
        run = chip_ensembles.simlab_adaptive_vdp(saves, integrator)
        seconds[saves, integrator] = elapsed = median_seconds(run, mus, repeats=3)
        ys, steps = run(mus)
        rate = float(jnp.sum(steps)) / elapsed
        print(
            f"  simlab {integrator}, {saves} save times{'':<22} {elapsed * 1e3:9.2f} ms   "
            f"per member-step {rate / bare_rate:5.2f} of bare ({float(jnp.mean(steps)):.0f} "
            f"steps a member, bare {float(jnp.mean(bare_steps)):.0f})",
            flush=True,
        )
        # Both end where the bare loop ends, within what two solves at this tolerance
        # (whose step sizes differ) can differ after a relaxation oscillation or two.
        error = float(jnp.max(jnp.abs(ys[:, -1] - bare_end) / (1 + jnp.abs(bare_end))))
        print(f"    largest difference from the bare loop's end states {error:.1e}")
        failed += int(not error < 1e-2)
    for integrator in ("lean", "kernel"):
        ratio = seconds[11, integrator] / seconds[2, integrator]
        print(f"  11 save times / 2, {integrator}: {ratio:.3f} (target <= 1.2)")
    auto = chip_ensembles.vdp_integrator_of_auto(mus)
    print(f"  integrator='auto' takes {auto!r}")
    _sweep_rows(quick, auto)
    return failed


def _sweep_rows(quick: bool, integrator: str) -> None:
    """`sweep` against the vmapped `simulate` of the same solve (both through
    `integrator`, the one `"auto"` takes), and against that solve with its outputs copied
    to the host, as a sweep returns them: the least a call that hands back host arrays
    costs."""
    # The model, initial state and save times are built once, as the vmapped solve's are
    # (when it is traced): the rows time what `sweep` adds to the solve.
    sweep = ft.partial(
        _vdp_sweep,
        simlab.models.VanDerPol(mu=1.0),
        jnp.array([2.0, 0.0], jnp.float32),
        jnp.linspace(0.0, chip_ensembles.VDP_T1, 2, dtype=jnp.float32),
    )
    solve = chip_ensembles.simlab_adaptive_vdp(2, integrator)
    for members in (512, 2048) if quick else (2**16, 2**20):
        mus = chip_ensembles.vdp_mus(members)
        solve_s = median_seconds(solve, mus, repeats=11)
        copied_s = median_seconds(lambda mus: jax.device_get(solve(mus)), mus, repeats=11)
        sweep_s = median_seconds(sweep, mus, repeats=11)
        print(
            f"  sweep of {members} members {sweep_s * 1e3:.2f} ms, vmapped simulate "
            f"{solve_s * 1e3:.2f} ms, with its outputs copied to the host {copied_s * 1e3:.2f} "
            f"ms: sweep / vmapped simulate {sweep_s / solve_s:.2f} (target <= 1.05), "
            f"/ simulate and copy {sweep_s / copied_s:.2f}",
            flush=True,
        )
    print()


def _vdp_sweep(model, y0, ts, mus):
    return simlab.sweep(
        model,
        {"mu": mus},
        y0,
        ts,
        observable=_end_state,
        solver="heun",
        rtol=chip_ensembles.VDP_RTOL,
        atol=chip_ensembles.VDP_RTOL,
        dt0=1e-3,
        max_steps=20_000,
        progress=False,
    ).observables["end"]


def _end_state(trajectory):
    return {"end": trajectory.ys[-1]}


def _ou_rows(quick: bool) -> int:
    paths = 4096 if quick else 2**20
    print(
        f"ensembles, float32: {paths} Ornstein-Uhlenbeck paths x {bench_sde.STEPS} "
        "Euler-Maruyama steps"
    )
    key = jax.random.key(1)
    keys = jax.random.split(key, paths)
    bare = median_seconds(chip_ensembles.bare_ou, key, paths, repeats=3)
    _row("bare lax.scan, increments drawn at once, one key", bare, bare)
    _row(
        "bare lax.scan, increments drawn from each path's key",
        median_seconds(chip_ensembles.bare_ou_member_keys, keys, repeats=3),
        bare,
    )
    failed = 0
    ends = {}
    for integrator in ("sde", "kernel"):
        seconds = median_seconds(chip_ensembles.simlab_ou, keys, integrator, repeats=3)
        _row(f"simlab {integrator}", seconds, bare)
        ends[integrator] = chip_ensembles.simlab_ou(keys, integrator)
        error = chip_ensembles.ou_moments_error(ends[integrator])
        print(f"  mean and variance against the exact ones: {error:.1f} standard errors")
        failed += int(not error < 5)
    auto = jax.eval_shape(
        lambda: simlab.simulate(
            bench_sde._model(),
            jnp.zeros(1, jnp.float32),
            np.array([0.0, bench_sde.T], np.float32),
            key=key,
            solver="euler_maruyama",
            adaptive=False,
            dt0=bench_sde.DT,
        )  # fmt: skip
    ).integrator
    difference = float(jnp.max(jnp.abs(ends["kernel"] - ends["sde"])))
    print(f"  max |kernel - sde| {difference:.1e}; integrator='auto' takes {auto!r}\n")
    return failed + int(not difference < 1e-4)


def _sensitivity_row(quick: bool) -> int:
    members = 256 if quick else 2**16
    y0, rho = bench_ensemble.inputs(members)
    y0, rho = y0.astype(jnp.float32), rho.astype(jnp.float32)
    ts = jnp.linspace(0.0, 1.0, 11, dtype=jnp.float32)

    def solve(parameters, y0, integrator):
        model = simlab.models.Lorenz(*parameters)
        return simlab.simulate(
            model, y0, ts, solver="tsit5", adaptive=False, dt0=1e-3, integrator=integrator,
            adjoint="forward",
        ).ys  # fmt: skip

    def parameters_of(rho):
        return jnp.stack([jnp.float32(10.0), rho, jnp.float32(8 / 3)])

    print(f"ensembles, float32: {members} Lorenz x 1000 fixed Tsit5 steps, 11 save times")
    jacobians = {}
    for integrator in ("lean", "kernel"):
        one = ft.partial(solve, integrator=integrator)
        solves = jax.jit(jax.vmap(lambda rho, y0, one=one: one(parameters_of(rho), y0)))
        sensitivities = jax.jit(
            jax.vmap(lambda rho, y0, one=one: jax.jacfwd(one)(parameters_of(rho), y0))
        )
        solve_s = median_seconds(solves, rho, y0, repeats=3)
        _row(f"{integrator}: solve", solve_s, solve_s)
        _row(
            f"{integrator}: forward sensitivities to 3 parameters",
            median_seconds(sensitivities, rho, y0, repeats=3),
            solve_s,
        )
        jacobians[integrator] = sensitivities(rho, y0)
    scale = jnp.max(jnp.abs(jacobians["lean"]))
    difference = float(jnp.max(jnp.abs(jacobians["kernel"] - jacobians["lean"])) / scale)
    print(f"  max |kernel - lean| sensitivities / max |lean| {difference:.1e}")
    print("  (target: sensitivities / solve <= 4.5, i.e. bare/this >= 0.22)\n")
    return int(not difference < 1e-3)


def _multistart_fit_rows(quick: bool) -> int:
    """A multi-start fit of many starts against one of few: a start's share of the time in
    each, which says how well the starts batch (the fit gathers its unfinished starts into
    batches of at most 128 every 25 steps). Each fit's first call, which compiles, is timed
    apart; the best start must recover the parameters the data were simulated from."""
    few, many = (16, 64) if quick else (100, 10_000)
    ts, y0, observations = chip_ensembles.lotka_volterra_data()
    print(
        f"ensembles, float32: multi-start fit, Lotka-Volterra (4 parameters) to {ts.shape[0]} "
        "records simulated from known parameters, Levenberg-Marquardt (bench_fit_multistart.py)"
    )
    failed, seconds = 0, {}
    for starts in (few, many):
        fit = ft.partial(chip_ensembles.multistart_fit, starts, ts, y0, observations)
        first_s, result = _timed(fit)
        samples = [_timed(fit)[0] for _ in range(3 if starts == few else 1)]
        seconds[starts] = statistics.median(samples)
        ends = result.starts.params
        error = max(
            abs(float(result.params[name]) / value - 1)
            for name, value in chip_ensembles.LV_TRUTH.items()
        )
        recovered = np.all(
            [
                np.abs(np.asarray(ends[name]) / value - 1) < 1e-3
                for name, value in chip_ensembles.LV_TRUTH.items()
            ],
            axis=0,
        )
        print(
            f"  {starts} starts{'':<{45 - len(str(starts))}} {seconds[starts] * 1e3:9.2f} ms   "
            f"(first call {first_s:.1f} s); best start {int(result.num_steps)} steps (at most "
            f"{result.max_steps}), its largest relative error {error:.1e}; "
            f"{int(np.sum(result.starts.converged))} converged, {int(np.sum(recovered))} end "
            "within 1e-3 of the known parameters",
            flush=True,
        )
        failed += int(not (bool(result.converged) and error < 1e-3))
    share = (seconds[few] / few) / (seconds[many] / many)
    print(
        f"  a start's time among {few} / among {many}: {share:.2f} (> 1: a start costs less "
        "among many, the starts batch; 1: the same)\n",
        flush=True,
    )
    return failed


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    jax.block_until_ready(out.loss)
    return time.perf_counter() - start, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a check on a CPU")
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"of {SECTIONS + ('tiles',)}"
    )
    options = parser.parse_args()
    print(
        f"simlab TPU benchmark — jax {jax.__version__}, device {jax.devices()[0].device_kind}, "
        f"x64 {jax.config.jax_enable_x64}\n",
        flush=True,
    )
    failed = 0
    for section in options.sections.split(","):
        start = time.perf_counter()
        try:
            failed += globals()[section](options.quick)
        except Exception as error:  # one section's failure must not lose the others
            failed += 1
            print(f"section {section} FAILED: {type(error).__name__}: {str(error)[:300]}\n")
        print(f"[{section}: {time.perf_counter() - start:.0f} s]\n", flush=True)
    print(f"{failed} check(s) failed" if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
