"""Weak and strong scaling on 1, 2, 4 and 8 devices: collectives counted, times projected.

Three workloads, each on meshes of 1, 2, 4 and 8 simulated CPU devices:

- a 2-D heat equation split into slabs with `Decomposed` (halo exchange by ppermute),
  fixed-step RK4, float32;
- a `sweep` of the Lorenz system over rho, members split over the devices, fixed-step RK4;
- all-pairs gravity with the bodies split over the devices and the sources passed round a
  ring (`simlab.decomposition.ring_pair_forces`), projected from its flops.

For every configuration the program is compiled once and its HLO is parsed for
collectives (collective-permute, all-reduce, all-gather, all-to-all, reduce-scatter): how
many run per time step (inside the step loop) and how many bytes each moves. Wall time is
measured on the simulated CPU devices, which share the machine's few cores, so it shows
overheads, not speedups (the sweep is timed through `simlab.sweep`, and its chunk program
compiled once more for its HLO). Time per step on real hardware is projected instead, from stated
assumptions: compute time = bytes moved per device / HBM bandwidth, plus, for each
collective of a step, latency + bytes / link bandwidth, with no overlap of the two.

Usage: `python benchmarks/scaling.py` writes `benchmarks/results/scaling.txt`.
"""

import jax

jax.config.update("jax_num_cpu_devices", 8)

import math  # noqa: E402
import os  # noqa: E402
import pathlib  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _harness import best_seconds  # noqa: E402
from _scaling_model import (  # noqa: E402
    HARDWARE,
    Configuration,
    collectives,
    communication_seconds,
    describe,
    efficiency,
    projected_step_seconds,
    split_by_loop,
)

import simlab  # noqa: E402
from simlab._sweep._execute import chunk_program, compiled_chunk  # noqa: E402  (sweep's program)
from simlab.decomposition import Decomposed, decomposition_mesh  # noqa: E402

DEVICE_COUNTS = (1, 2, 4, 8)
RESULTS_PATH = pathlib.Path(__file__).parent / "results" / "scaling.txt"
ITEMSIZE = 4  # float32 throughout
# An ideally fused RK4 step with the right-hand side carried between steps reads and
# writes the state 17 times: 3 stages of (read y and the previous stage, write a stage),
# then y1 from y and 4 stages, then f(y1) from y1.
ARRAY_PASSES_PER_RK4_STEP = 17
TIMING_REPEATS = 5

HEAT_NUM_STEPS = 20
HEAT_DT = 1e-6
HEAT_SPACING = 1.0 / 512
HEAT_WIDTH = 512  # cells along the unsplit axis, measured runs
HEAT_ROWS_PER_DEVICE = 128  # measured weak scaling: 128 x 512 cells per device
HEAT_STRONG_ROWS = 512  # measured strong scaling: 512 x 512 cells in all
PROJECTED_WIDTH = 8192  # projected runs: 8192 cells along the unsplit axis
PROJECTED_ROWS_PER_DEVICE = 2048  # projected weak scaling: 2048 x 8192 cells per device
PROJECTED_STRONG_ROWS = 8192  # projected strong scaling: 8192 x 8192 cells in all

SWEEP_NUM_STEPS = 200
SWEEP_DT = 1e-3
SWEEP_MEMBERS_PER_DEVICE = 256  # measured weak scaling
SWEEP_STRONG_MEMBERS = 1024  # measured strong scaling
PROJECTED_SWEEP_MEMBERS_PER_DEVICE = 2**20
PROJECTED_SWEEP_STRONG_MEMBERS = 2**23
LORENZ = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)
LORENZ_STATE_SIZE = 3


# --- Workload (a): heat equation, slabs with halo exchange ----------------------------


def best_of(run: Callable[[], object]) -> float:
    """Best wall time of `run` over a few calls, after a warm-up call."""
    return best_seconds({"run": run}, repeats=TIMING_REPEATS)["run"]


def heat_final_state(model, y0):
    ts = jnp.array([0.0, HEAT_NUM_STEPS * HEAT_DT], dtype=y0.dtype)
    trajectory = simlab.simulate(
        model, y0, ts, solver="rk4", adaptive=False, dt0=HEAT_DT, throw=False
    )
    return trajectory.ys[-1]


def decomposed_heat(shape: tuple[int, int], num_devices: int) -> Decomposed:
    grid = simlab.Grid(shape, spacing=(HEAT_SPACING, HEAT_SPACING), boundary="periodic")
    mesh = decomposition_mesh((num_devices,), devices=jax.devices()[:num_devices])
    return Decomposed(simlab.models.Heat(diffusivity=0.5, grid=grid), mesh)


def heat_measured(shape: tuple[int, int], num_devices: int) -> tuple[Configuration, float]:
    """Compiles and times the solve on the simulated devices; returns it and s per step."""
    model = decomposed_heat(shape, num_devices)
    x, y = model.grid.mesh()
    y0 = model.shard((jnp.sin(x * 2 * jnp.pi) * jnp.cos(y * 2 * jnp.pi)).astype(jnp.float32))
    compiled = jax.jit(heat_final_state).lower(model, y0).compile()
    seconds = best_of(lambda: compiled(model, y0)) / HEAT_NUM_STEPS
    return heat_configuration(shape, num_devices, compiled.as_text()), seconds


def heat_projected(shape: tuple[int, int], num_devices: int) -> Configuration:
    """Compiles the solve at a size too large to run here (nothing is allocated)."""
    model = decomposed_heat(shape, num_devices)
    y0 = jax.ShapeDtypeStruct(shape, jnp.float32, sharding=model.sharding)
    compiled = jax.jit(heat_final_state).lower(model, y0).compile()
    return heat_configuration(shape, num_devices, compiled.as_text())


def heat_configuration(shape, num_devices: int, hlo_text: str) -> Configuration:
    cells_per_device = shape[0] * shape[1] // num_devices
    return Configuration(
        num_devices,
        f"{shape[0]}x{shape[1]} cells",
        *split_by_loop(collectives(hlo_text)),
        cells_per_device * ARRAY_PASSES_PER_RK4_STEP * ITEMSIZE,
    )


def heat_shapes(rows_per_device: int, strong_rows: int, width: int) -> dict:
    return {
        "weak": [(rows_per_device * n, width) for n in DEVICE_COUNTS],
        "strong": [(strong_rows, width)] * len(DEVICE_COUNTS),
    }


def heat_section() -> list[str]:
    measured_shapes = heat_shapes(HEAT_ROWS_PER_DEVICE, HEAT_STRONG_ROWS, HEAT_WIDTH)
    projected_shapes = heat_shapes(
        PROJECTED_ROWS_PER_DEVICE, PROJECTED_STRONG_ROWS, PROJECTED_WIDTH
    )
    lines = [
        "(a) 2-D heat equation, Decomposed into slabs along axis 0, periodic, fixed-step RK4,",
        f"    float32, {HEAT_NUM_STEPS} steps. Each right-hand side exchanges 2 halo rows; the",
        "    HLO has one right-hand side before the step loop (the first stage, carried from",
        "    step to step) and 4 per step. No overlap of halo and stencil is assumed.",
    ]
    tables, _ = scaling_tables(heat_measured, heat_projected, measured_shapes, projected_shapes)
    return lines + tables


# --- Workload (b): sweep of an ODE model, members over devices ------------------------


def final_state(trajectory):
    return {"final_state": trajectory.ys[-1]}


SWEEP_OPTIONS = simlab.SolveOptions(solver="rk4", adaptive=False, dt0=SWEEP_DT)
SWEEP_TS = jnp.array([0.0, SWEEP_NUM_STEPS * SWEEP_DT], dtype=jnp.float32)
SWEEP_Y0 = jnp.ones(LORENZ_STATE_SIZE, dtype=jnp.float32)


def rhos(num_members: int) -> np.ndarray:
    return np.linspace(1.0, 50.0, num_members, dtype=np.float32)


def run_sweep(num_members: int, mesh):
    return simlab.sweep(
        LORENZ,
        {"rho": rhos(num_members)},
        SWEEP_Y0,
        SWEEP_TS,
        observable=final_state,
        mesh=mesh,
        chunk_size=num_members,
        progress=False,
        options=SWEEP_OPTIONS,
    )


def sweep_hlo(num_members: int, mesh) -> str:
    """The compiled program `sweep` runs for a chunk of `num_members` (compiled, not run)."""
    dynamic, static = eqx.partition((LORENZ, SWEEP_Y0, SWEEP_TS), eqx.is_array)
    problem = eqx.combine(simlab.parallel.replicate(dynamic, mesh), static)
    rows = simlab.parallel.shard_rows(rhos(num_members)[:, None], mesh)
    statics = dict(names=("rho",), observable=final_state, settings=SWEEP_OPTIONS, event=None)
    arrays, chunk_statics = chunk_program(*problem, mesh=mesh, **statics)
    return compiled_chunk.lower(arrays, rows, chunk_statics).compile().as_text()


def sweep_configuration(num_members: int, num_devices: int) -> Configuration:
    mesh = simlab.parallel.member_mesh(jax.devices()[:num_devices])
    members_per_device = num_members // num_devices
    bytes_per_member = ARRAY_PASSES_PER_RK4_STEP * LORENZ_STATE_SIZE * ITEMSIZE
    return Configuration(
        num_devices,
        f"{num_members} members",
        *split_by_loop(collectives(sweep_hlo(num_members, mesh))),
        members_per_device * bytes_per_member,
    )


def sweep_measured(num_members: int, num_devices: int) -> tuple[Configuration, float]:
    mesh = simlab.parallel.member_mesh(jax.devices()[:num_devices])
    seconds = best_of(lambda: run_sweep(num_members, mesh)) / SWEEP_NUM_STEPS
    return sweep_configuration(num_members, num_devices), seconds


def sweep_members(per_device: int, total: int) -> dict:
    return {"weak": [per_device * n for n in DEVICE_COUNTS], "strong": [total] * len(DEVICE_COUNTS)}


def sweep_section() -> list[str]:
    measured_members = sweep_members(SWEEP_MEMBERS_PER_DEVICE, SWEEP_STRONG_MEMBERS)
    projected_members = sweep_members(
        PROJECTED_SWEEP_MEMBERS_PER_DEVICE, PROJECTED_SWEEP_STRONG_MEMBERS
    )
    lines = [
        f"(b) sweep of Lorenz over rho, fixed-step RK4, float32, {SWEEP_NUM_STEPS} steps, one",
        "    chunk; measured: the whole simlab.sweep call (host work included); HLO: the",
        "    chunk program sweep compiles (shard_map over devices of vmap over members).",
    ]
    tables, configurations = scaling_tables(
        sweep_measured, sweep_configuration, measured_members, projected_members
    )
    found = sum(len(c.step) + len(c.once) for c in configurations)
    output_bytes = LORENZ_STATE_SIZE * ITEMSIZE
    notes = [
        f"  HLO of the chunk program, all {len(configurations)} configurations: {found} "
        "collectives, in the loop or out of it.",
        "  The final gather is not in that program: sweep copies each chunk's sharded outputs",
        "  to the host after it (gather_to_host), each device over its own host link,",
        f"  {output_bytes} B per member here; not projected.",
    ]
    return lines + tables + notes


# --- Workload (c): all-pairs gravity, particles over devices, sources round a ring ----

NBODY_MEASURED = {"weak": 256, "strong": 1024}  # bodies on one device / in all, measured
NBODY_PROJECTED = {"weak": 2**16, "strong": 2**18}  # the same, projected
# float32 vector peak of an H200 (NVIDIA datasheet): all-pairs forces are compute bound.
# A TPU v5e's float32 vector peak is not published, so it is not projected.
H200_FLOAT32_FLOPS = 67e12
GRAVITY = (1.0, 0.01)  # G, softening


def nbody_forces(mesh):
    def forces(positions, masses):
        return simlab.decomposition.ring_pair_forces(
            positions, masses, GRAVITY, pair_scale=simlab.kernels.gravity_scale, mesh=mesh
        )

    return jax.jit(forces)


def flops_per_pair() -> float:
    """From XLA's cost analysis of the jax.numpy reference on the CPU (256 bodies)."""
    bodies = jax.ShapeDtypeStruct((256, 3), jnp.float32)
    reference = jax.jit(
        lambda x: simlab.kernels.pair_forces_reference(
            x, 1.0, GRAVITY, pair_scale=simlab.kernels.gravity_scale
        )
    )
    analysis = reference.lower(bodies).compile().cost_analysis()
    analysis = analysis[0] if isinstance(analysis, list | tuple) else analysis
    return analysis["flops"] / 256**2


def nbody_program(bodies: int, num_devices: int):
    mesh = decomposition_mesh((num_devices,), devices=jax.devices()[:num_devices])
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
    positions = jax.ShapeDtypeStruct((bodies, 3), jnp.float32, sharding=sharding)
    masses = jax.ShapeDtypeStruct((bodies,), jnp.float32, sharding=sharding)
    return mesh, nbody_forces(mesh).lower(positions, masses).compile()


def nbody_row(bodies: int, num_devices: int) -> tuple[int, list]:
    """One force evaluation is the step: every collective of the program counts."""
    _, compiled = nbody_program(bodies, num_devices)
    return num_devices, collectives(compiled.as_text())


def nbody_measured(bodies: int, num_devices: int) -> float:
    mesh, compiled = nbody_program(bodies, num_devices)
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
    positions = jax.device_put(
        jax.random.normal(jax.random.key(0), (bodies, 3), jnp.float32), sharding
    )
    masses = jax.device_put(jnp.full((bodies,), 1.0 / bodies, jnp.float32), sharding)
    return best_of(lambda: compiled(positions, masses))


def nbody_projected_seconds(bodies: int, found: list, num_devices: int, flops: float) -> float:
    hardware = HARDWARE[0]
    compute = bodies / num_devices * bodies * flops / H200_FLOAT32_FLOPS
    return compute + communication_seconds(found, num_devices, hardware)


def nbody_bodies(base: int, num_devices: int, *, weak: bool) -> int:
    """Strong: `base` bodies in all. Weak: the pairs per device fixed (N^2 / n = base^2, so
    N grows as sqrt(n)), N rounded to a multiple of 8 bodies per device."""
    if not weak:
        return base
    quantum = 8 * num_devices
    return quantum * round(base * math.sqrt(num_devices) / quantum)


def nbody_section() -> list[str]:
    flops = flops_per_pair()
    lines = [
        "(c) all-pairs gravity (softened), float32, ring_pair_forces: each device keeps its",
        "    bodies and the source blocks pass round the ring by ppermute (n - 1 sends);",
        f"    one step = one force evaluation. {flops:.0f} flops per pair (XLA cost analysis).",
        "    Projected on the H200 only: compute = pairs per device x flops / 67 TFLOP/s",
        "    (float32, datasheet), plus the sends; a TPU v5e's float32 peak is not published.",
        "    Measured times run the Pallas interpreter on the CPU: overheads only.",
    ]
    for scaling in ("weak", "strong"):
        weak = scaling == "weak"
        measured_bodies = [
            nbody_bodies(NBODY_MEASURED[scaling], n, weak=weak) for n in DEVICE_COUNTS
        ]
        seconds = [
            nbody_measured(b, n) for b, n in zip(measured_bodies, DEVICE_COUNTS, strict=True)
        ]
        projected_bodies = [
            nbody_bodies(NBODY_PROJECTED[scaling], n, weak=weak) for n in DEVICE_COUNTS
        ]
        rows = [nbody_row(b, n) for b, n in zip(projected_bodies, DEVICE_COUNTS, strict=True)]
        projected = [
            nbody_projected_seconds(b, found, n, flops)
            for b, (n, found) in zip(projected_bodies, rows, strict=True)
        ]
        measured_efficiency = efficiency(seconds, list(DEVICE_COUNTS), weak=weak)
        projected_efficiency = efficiency(projected, list(DEVICE_COUNTS), weak=weak)
        lines += [
            f"  {scaling} scaling ({'pairs per device fixed' if weak else 'bodies fixed'}):",
            f"    {'dev':>3}  {'measured':<14} {'CPU ms':>8} {'eff':>5}  {'projected':<14} "
            f"{'H200 us':>9} {'eff':>5}  collectives (HLO)",
        ]
        for i, n in enumerate(DEVICE_COUNTS):
            lines.append(
                f"    {n:>3}  {measured_bodies[i]:<8} bodies {1e3 * seconds[i]:>8.2f} "
                f"{measured_efficiency[i]:>5.2f}  {projected_bodies[i]:<7} bodies "
                f"{1e6 * projected[i]:>9.1f} {projected_efficiency[i]:>5.2f}  "
                f"{describe(rows[i][1])}"
            )
    return lines


# --- Report ------------------------------------------------------------------------------


def scaling_tables(
    measure: Callable, project: Callable, measured_sizes: dict, projected_sizes: dict
) -> tuple[list[str], list[Configuration]]:
    """Weak and strong tables, measured at small sizes and projected at large ones."""
    lines, configurations = [], []
    for scaling in ("weak", "strong"):
        measured = [
            measure(size, n) for size, n in zip(measured_sizes[scaling], DEVICE_COUNTS, strict=True)
        ]
        projected = [
            project(size, n)
            for size, n in zip(projected_sizes[scaling], DEVICE_COUNTS, strict=True)
        ]
        weak = scaling == "weak"
        lines += measured_table(f"{scaling} scaling, measured", measured, weak=weak)
        lines += projected_table(f"{scaling} scaling, projected", projected, weak=weak)
        configurations += [configuration for configuration, _ in measured] + projected
    once = sorted({describe(configuration.once) for configuration in configurations})
    lines.append("  outside the step loop (once per solve), by configuration: " + "; ".join(once))
    return lines, configurations


def measured_table(title: str, rows: list[tuple[Configuration, float]], *, weak: bool) -> list[str]:
    counts = [configuration.num_devices for configuration, _ in rows]
    seconds = [s for _, s in rows]
    lines = [
        f"  {title}:",
        f"    {'dev':>3}  {'size':<22} {'CPU ms/step':>11} {'eff':>5}  collectives per step (HLO)",
    ]
    for (configuration, s), e in zip(rows, efficiency(seconds, counts, weak=weak), strict=True):
        lines.append(
            f"    {configuration.num_devices:>3}  {configuration.size:<22} {1e3 * s:>11.2f} "
            f"{e:>5.2f}  {describe(configuration.step)}"
        )
    return lines


def projected_table(title: str, rows: list[Configuration], *, weak: bool) -> list[str]:
    """Per hardware: compute and communication time per step, their sum, efficiency."""
    counts = [configuration.num_devices for configuration in rows]
    groups = "".join(f"  {f'--- {hardware.name} ---':^32}" for hardware in HARDWARE)
    columns = f"  {'compute':>8} {'comm':>6} {'us/step':>9} {'eff':>5}" * len(HARDWARE)
    lines = [
        f"  {title}:",
        f"    {'':>3}  {'':<22}{groups}",
        f"    {'dev':>3}  {'size':<22}{columns}  collectives per step (HLO)",
    ]
    per_hardware = []
    for hardware in HARDWARE:
        times = [
            projected_step_seconds(c.bytes_per_device, c.step, c.num_devices, hardware)
            for c in rows
        ]
        per_hardware.append((hardware, times, efficiency(times, counts, weak=weak)))
    for i, configuration in enumerate(rows):
        line = f"    {configuration.num_devices:>3}  {configuration.size:<22}"
        for hardware, times, efficiencies in per_hardware:
            communication = communication_seconds(
                configuration.step, configuration.num_devices, hardware
            )
            compute = times[i] - communication
            line += (
                f"  {1e6 * compute:>8.1f} {1e6 * communication:>6.1f} {1e6 * times[i]:>9.1f}"
                f" {efficiencies[i]:>5.2f}"
            )
        lines.append(line + f"  {describe(configuration.step)}")
    return lines + latency_notes(rows[-1])


def latency_notes(configuration: Configuration) -> list[str]:
    """How much of the communication of a step is latency, on each hardware."""
    if not configuration.step:
        return []
    notes = []
    for hardware in HARDWARE:
        total = communication_seconds(configuration.step, configuration.num_devices, hardware)
        latency = len(configuration.step) * hardware.latency_s
        notes.append(f"{hardware.name} {1e6 * latency:.1f} of {1e6 * total:.1f} us")
    return [
        f"    latency share of comm at {configuration.num_devices} devices: " + "; ".join(notes)
    ]


def header_lines() -> list[str]:
    return [
        "How to read: MEASURED = wall time on 8 simulated CPU devices; they share this machine's "
        f"{os.cpu_count()} cores, so these times show overheads, not speedups (and vary from "
        "run to run on a shared machine).",
        "PROJECTED = time per step on real hardware from the stated assumptions below; "
        "collectives per step are COUNTED in the compiled HLO of each configuration.",
        "eff = parallel efficiency: weak t(1)/t(n) at fixed work per device, strong "
        "t(1)/(n t(n)) at fixed total work.",
        "",
        f"jax {jax.__version__}, {jax.device_count()} devices ({jax.devices()[0].platform}).",
        "Assumptions of the projection (compute and communication do not overlap):",
        f"  compute per step = bytes per device / HBM bandwidth; an RK4 step moves "
        f"{ARRAY_PASSES_PER_RK4_STEP} passes over the state",
        f"  ({ARRAY_PASSES_PER_RK4_STEP * ITEMSIZE} B per float32 cell or state component); "
        "projected compute and comm times are in us.",
        "  each collective = latency + link bytes / link bandwidth (a permute sends its whole "
        "result; ring all-reduce 2(n-1)/n of it).",
        *(f"  {hardware.name}: {hardware.source}." for hardware in HARDWARE),
        "",
    ]


# Each function returns the lines of one workload's section of the report.
WORKLOADS: list[Callable[[], list[str]]] = [heat_section, sweep_section, nbody_section]


def main() -> None:
    lines = header_lines()
    print("\n".join(lines), flush=True)
    for workload in WORKLOADS:
        start = time.perf_counter()
        section = workload()
        section += [f"  ({time.perf_counter() - start:.0f} s to compile and run here)", ""]
        print("\n".join(section), flush=True)
        lines += section
    RESULTS_PATH.write_text("".join(line.rstrip() + "\n" for line in lines))
    print(f"wrote {RESULTS_PATH}")


if __name__ == "__main__":
    main()
