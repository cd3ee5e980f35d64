"""Probes of where the time goes on a TPU: the measurements behind the kernels' tiles, the
Laplacian's reads past the end of its array, the XLA Laplacian's form on a TPU, and what
bounds the temporally blocked heat kernel and `pair_forces`, and which primitives of a vector
field the kernel integrator compiles (`fields`, kept in `benchmarks/results/tpu-fields.txt`),
and which adaptive loops inside a Pallas kernel compile, and at what speed (`adaptive_loops`).
`benchmarks/tpu.sh --probes` runs it and keeps the output in
`benchmarks/results/tpu-probes.txt`.

Usage: `python benchmarks/tpu_probes.py [--quick] [--sections bandwidth,...]`. `--quick`
runs every probe at small sizes on a CPU, the kernels in the Pallas interpreter: a check
of the script, not a measurement.
"""

import argparse
import functools as ft
import sys
import time

import chip_ensembles
import gpu_kernels
import jax
import jax.lax as lax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from tpu_bench import _grid_models, _initial_state, _solve, median_seconds

import simlab
import simlab.kernels as sk
from simlab._results import status_code
from simlab.grid import _operators
from simlab.integrate import _lean
from simlab.kernels import _layouts, _pairs
from simlab.kernels._pallas import extend_high

SECTIONS = (
    "bandwidth",
    "laplacian",
    "heat",
    "forms",
    "burgers",
    "pairs",
    "saves",
    "fields",
    "adaptive_loops",
)
CLOCK_HZ = 1.5e9  # the TPU v5e's TensorCore clock, to count cycles
VREG_CELLS = 8 * 128  # float32 values in one vector register


def attempt(label, fn):
    """Runs `fn`, printing the first line of any error: a tile that does not compile is a
    result too."""
    try:
        return fn()
    except Exception as error:
        print(f"  {label}: FAILED {type(error).__name__}: {str(error).splitlines()[0][:160]}")
        return None


def _pallas_double(rows: int, interpret: bool):
    """`y = 2x` by Pallas in `(rows, whole row)` blocks: the copy the DMA engines reach."""

    def kernel(x_ref, y_ref):
        y_ref[...] = 2 * x_ref[...]

    def run(x):
        spec = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))
        out = jax.ShapeDtypeStruct(x.shape, x.dtype)
        grid = (x.shape[0] // rows,)
        call = pl.pallas_call(
            kernel, out_shape=out, grid=grid, in_specs=[spec], out_specs=spec, interpret=interpret
        )
        return call(x)

    return jax.jit(run)


def bandwidth(quick: bool):
    size = 256 if quick else 8192
    x = jnp.ones((size, size), jnp.float32)
    print(f"copy bandwidth, y = 2x at {size}² float32 (read and write)")
    xla = median_seconds(jax.jit(lambda x: 2 * x), x)
    print(
        f"  XLA                          {xla * 1e3:7.3f} ms  {2 * x.nbytes / xla / 1e9:6.1f} GB/s"
    )
    for rows in (64, 128):
        seconds = attempt(
            f"Pallas {rows} rows", lambda rows=rows: median_seconds(_pallas_double(rows, quick), x)
        )
        if seconds:
            print(
                f"  Pallas ({rows}, {size}) blocks     {seconds * 1e3:7.3f} ms  "
                f"{2 * x.nbytes / seconds / 1e9:6.1f} GB/s"
            )


def laplacian(quick: bool):
    """The Laplacian with its windows reading past the end of the array (the TPU launch)
    against the same launch on an extended copy (what it did before), over tiles."""
    size = 256 if quick else 8192
    padded = jax.random.normal(jax.random.key(1), (size + 2, size + 2), jnp.float32)
    want = sk.laplacian2d_reference(padded, (1.0, 1.0))
    copy_s = median_seconds(jax.jit(lambda x: 2 * x), padded[1:-1, 1:-1])
    print(f"laplacian2d at {size}², against the XLA copy of the field (8 bytes a cell each)")
    extension = jax.jit(lambda p: extend_high(p, (size + 8, size + 128)))
    extension_s = median_seconds(extension, padded)
    print(f"  the extended copy alone (8 rows, 128 columns more): {extension_s * 1e3:.3f} ms")
    tiles = (
        [(8, 128)] if quick else [(64, 2048), (128, 2048), (256, 1024), (128, 8192), (512, 2048)]
    )
    reads_past_the_end = _layouts._reads_past_the_end
    for label, past in (
        ("past the end", reads_past_the_end),
        ("extended copy", lambda plan: False),
    ):
        _layouts._reads_past_the_end = past
        jax.clear_caches()
        for block in tiles:
            fn = jax.jit(ft.partial(sk.laplacian2d, spacing=(1.0, 1.0), block_shape=block))

            def timed(fn=fn):
                error = float(jnp.max(jnp.abs(fn(padded) - want)))
                return median_seconds(fn, padded), error

            result = attempt(f"{block} {label}", timed)
            if result:
                seconds, error = result
                print(
                    f"  tile {str(block):<12} {label:<14} {seconds * 1e3:7.3f} ms  "
                    f"{copy_s / seconds:4.2f} of the copy; max error {error:.1e}"
                )
    _layouts._reads_past_the_end = reads_past_the_end
    jax.clear_caches()


def heat(quick: bool):
    """The temporally blocked heat kernel, 8 steps, over steps a launch and tiles. A launch
    moves the field once (read and write); the rest of its time is arithmetic."""
    size = 256 if quick else 8192
    field = jax.random.normal(jax.random.key(1), (size, size), jnp.float32)
    grid = simlab.Grid((size, size), boundary="periodic")
    settings = gpu_kernels.heat_settings(grid, diffusivity=0.2, dt=1.0, num_steps=8)
    want = jax.jit(ft.partial(sk.heat_steps_reference, **settings))(field)
    move_s = median_seconds(jax.jit(lambda x: 2 * x), field)
    print(f"heat, 8 steps at {size}²; moving the field once takes {move_s * 1e3:.3f} ms")
    runs = [(1, None), (2, None), (4, None), (8, None)]
    if not quick:
        runs += [(8, (256, 256)), (8, (256, 1024)), (8, (512, 512))]
    for per_launch, block in runs:
        fn = jax.jit(
            ft.partial(sk.heat_steps, steps_per_launch=per_launch, block_shape=block, **settings)
        )

        def timed(fn=fn):
            error = float(jnp.max(jnp.abs(fn(field) - want)))
            return median_seconds(fn, field), error

        result = attempt(f"{per_launch}/launch {block}", timed)
        if result:
            seconds, error = result
            launches = 8 // per_launch
            arithmetic = (seconds - launches * move_s) / 8
            tiles = block or "table"
            print(
                f"  {per_launch}/launch, tile {str(tiles):<12} {seconds * 1e3:7.3f} ms "
                f"{8 * size * size / seconds / 1e9:6.1f} Gcell/s; less {launches} move(s): "
                f"{arithmetic * 1e3:.3f} ms of arithmetic a step = "
                f"{arithmetic / (size * size / VREG_CELLS) * CLOCK_HZ:.1f} cycles a vreg; "
                f"max error {error:.1e}"
            )


def forms(quick: bool):
    """The XLA Laplacian's two forms (edge slabs, one padded copy) by channels: 400 Euler
    steps at 1024²."""
    n, steps = (64, 4) if quick else (1024, 400)
    print(f"the XLA Laplacian's forms, {steps} Euler steps at {n}² float32")
    for boundary in ("periodic", "dirichlet"):
        grid = simlab.Grid((n, n), extent=1.0, boundary=boundary)
        for channels in ((), (2,), (3,)):
            y0 = jax.random.normal(jax.random.key(0), (*channels, n, n), jnp.float32)
            listing = []
            for name, form in (
                ("slabs", _operators.slab_laplacian),
                ("padded", _operators.padded_laplacian),
            ):

                def step(i, u, form=form, grid=grid):
                    return u + 1e-7 * form(u, grid, 1, 2)

                run = jax.jit(lambda y, step=step: jax.lax.fori_loop(0, steps, step, y))
                listing.append(f"{name} {median_seconds(run, y0) * 1e3:7.2f} ms")
            print(f"  {boundary:<9} channels {str(channels):<5} " + ", ".join(listing))


def burgers(quick: bool):
    """Burgers at 1024², 400 RK4 steps, through XLA, and its two terms alone."""
    n, steps = (32, 10) if quick else (1024, 400)
    build, dt, solver = _grid_models(n)["Burgers"]
    model = build("xla")
    y0 = _initial_state(model, jax.random.key(5))
    print(f"Burgers, {steps} RK4 steps at {n}² float32, XLA")
    call = simlab.models.Burgers.__call__
    terms = {
        "both terms": call,
        "diffusion alone": lambda self, t, y, args: self.affine_terms(t, y, args),
        "advection alone": lambda self, t, y, args: self.other_terms(t, y, args),
    }
    for label, term in terms.items():
        simlab.models.Burgers.__call__ = term  # the solver calls the model's vector field
        jax.clear_caches()
        run = jax.jit(ft.partial(_solve, dt=float(dt), steps=steps, solver=solver))
        seconds = attempt(label, lambda run=run: median_seconds(run, model, y0, repeats=3))
        if seconds:
            print(f"  {label:<16} {seconds * 1e3:8.2f} ms")
    simlab.models.Burgers.__call__ = call
    jax.clear_caches()


def pairs(quick: bool):
    """pair_forces (gravity) over target groups and source rows, beside XLA; and the cost of
    the reciprocal square root, to count what bounds a pair."""
    count = 512 if quick else 8192
    positions = jax.random.normal(jax.random.key(4), (count, 3), jnp.float32)
    masses = jax.random.uniform(jax.random.key(5), (count,), jnp.float32, 0.5, 1.5)
    settings = dict(parameters=(1.0, 0.05), pair_scale=sk.gravity_scale)
    reference = jax.jit(ft.partial(sk.pair_forces_reference, **settings))
    want = reference(positions, masses)
    print(f"gravity pair_forces, {count} bodies ({count * count / VREG_CELLS:.0f} vregs of pairs)")
    # Groups of 8 targets a program holds, rows of 128 sources a loop step reads.
    blocks = [(4, 2)] if quick else [(2, 8), (4, 4), (4, 8), (8, 4), (8, 8), (16, 2)]
    saved = dict(_pairs.TARGET_GROUPS), dict(_pairs.SOURCE_ROWS)
    target = "interpret" if quick else "tpu"
    for groups, rows in blocks:
        _pairs.TARGET_GROUPS[target], _pairs.SOURCE_ROWS[target] = groups, rows
        jax.clear_caches()
        pallas = jax.jit(ft.partial(sk.pair_forces, **settings))

        def timed(pallas=pallas):
            error = float(jnp.max(jnp.abs(pallas(positions, masses) - want)))
            return median_seconds(pallas, positions, masses), error

        result = attempt(f"({groups}, {rows})", timed)
        xla_s = median_seconds(reference, positions, masses)
        if result:
            seconds, error = result
            cycles = seconds / (count * count / VREG_CELLS) * CLOCK_HZ
            print(
                f"  target groups {groups:<3} source rows {rows:<3} {seconds * 1e3:7.3f} ms "
                f"({cycles:4.1f} cycles a vreg of pairs), XLA {xla_s * 1e3:7.3f} ms "
                f"({xla_s / seconds:.2f}x XLA); max error {error:.1e}"
            )
    _pairs.TARGET_GROUPS.update(saved[0])
    _pairs.SOURCE_ROWS.update(saved[1])
    jax.clear_caches()
    _chain_costs(256 if quick else 8192)


def _chain_costs(size):
    """The arithmetic cost of an operation: a chain of 33 of it against one, fused into one
    pass over a field (the extra 32 cost arithmetic only)."""
    x = jax.random.uniform(jax.random.key(0), (size, size), jnp.float32) + 1.0
    operations = {
        "rsqrt(y + 1)": lambda y: jax.lax.rsqrt(y + 1.0),
        "rsqrt(y + 1)**3": lambda y: jax.lax.rsqrt(y + 1.0) ** 3,
        "0.999 y + 0.5": lambda y: 0.999 * y + 0.5,
    }
    for name, operation in operations.items():

        def chain(y, length, operation=operation):
            for _ in range(length):
                y = operation(y)
            return y

        one = median_seconds(jax.jit(ft.partial(chain, length=1)), x)
        more = median_seconds(jax.jit(ft.partial(chain, length=33)), x)
        cycles = (more - one) / 32 / (x.size / VREG_CELLS) * CLOCK_HZ
        print(f"  {name:<16} {cycles:4.1f} cycles a vreg (one pass {one * 1e3:.3f} ms)")


def _no_write(saved, rows, y, layout):
    return saved


def _rows_where_landed(saved, rows, y, layout):
    """Each row of the save array rewritten only in an iteration where a member landed on
    its save time (`lax.cond` per row)."""
    member_rows = _lean._per_member(rows, y)
    for row in range(saved.shape[0]):
        hit = member_rows == row
        saved = lax.cond(
            jnp.any(hit), lambda s, hit=hit, row=row: s.at[row].set(jnp.where(hit, y, s[row])),
            lambda s: s, saved,
        )  # fmt: skip
    return saved


def saves(quick: bool):
    """The adaptive lean loop of a members-last batch with its saves written, and each
    member's next save time looked up, by a scatter and a gather (as on a CPU) or by
    selects over the save times (as on a TPU), and with no writes at all (a lower bound)."""
    members = 256 if quick else 2**16
    mus = chip_ensembles.vdp_mus(members)
    bare = median_seconds(chip_ensembles.bare_adaptive_vdp, mus, repeats=3)
    bare_steps = float(jnp.sum(chip_ensembles.bare_adaptive_vdp(mus)[1]))
    print(f"saves: {members} Van der Pol, adaptive Heun, per member-step against the bare loop")
    print(f"  bare vmapped while loop {bare * 1e3:9.2f} ms")
    variants = {
        "scatter and gather": (False, _lean._write_saves),
        "selects": (True, _lean._write_saves),
        "selects, rows where one landed": (True, _rows_where_landed),
        "selects, no write (a bound)": (True, _no_write),
    }
    original = _lean._scatters_are_slow, _lean._write_saves
    try:
        for saves_count in (2, 11):
            for name, (dense, write) in variants.items():
                _lean._scatters_are_slow = lambda dense=dense: dense
                _lean._write_saves = write
                jax.clear_caches()
                run = chip_ensembles.simlab_adaptive_vdp(saves_count)
                seconds = median_seconds(run, mus, repeats=3)
                steps = float(jnp.sum(run(mus)[1]))
                print(
                    f"  {saves_count:3d} save times, {name:<28} {seconds * 1e3:9.2f} ms  "
                    f"{steps / seconds / (bare_steps / bare):5.2f} of bare per member-step",
                    flush=True,
                )
    finally:
        _lean._scatters_are_slow, _lean._write_saves = original
        jax.clear_caches()
    _unfinished_diffrax_members(mus)


def _unfinished_diffrax_members(mus):
    """Which members of the Van der Pol batch `integrator="diffrax"` leaves short of t1,
    and with what status."""

    @jax.jit
    def run(mus):
        def one(mu):
            trajectory = simlab.simulate(
                simlab.models.VanDerPol(mu=mu), jnp.array([2.0, 0.0], jnp.float32),
                jnp.array([0.0, chip_ensembles.VDP_T1], jnp.float32), solver="heun",
                rtol=chip_ensembles.VDP_RTOL, atol=chip_ensembles.VDP_RTOL, dt0=1e-3,
                integrator="diffrax", max_steps=20_000, throw=False,
            )  # fmt: skip
            code = status_code(trajectory.result)
            return trajectory.ys[-1], code, trajectory.stats["num_steps"]

        return jax.vmap(one)(mus)

    ends, codes, steps = run(mus)
    short = ~jnp.all(jnp.isfinite(ends), axis=-1)
    print(f"  diffrax: {int(jnp.sum(short))} of {mus.shape[0]} members short of t1", end="")
    if bool(jnp.any(short)):
        bad = jnp.where(short, mus, jnp.nan)
        print(
            f"; mu in [{float(jnp.nanmin(bad)):.3f}, {float(jnp.nanmax(bad)):.3f}], status "
            f"codes {sorted(set(int(c) for c in codes[short]))}, steps up to "
            f"{int(jnp.max(jnp.where(short, steps, 0)))}"
        )
    print()


# --- fields: which primitives of a vector field the kernel integrator compiles ----------

_MATRIX = ((-1.0, 0.2, 0.0), (0.1, -2.0, 0.3), (0.0, 0.4, -0.5))

# One field a family of primitives, each `f(t, y, p)` on a state of three components.
FIELDS = {
    "arithmetic (Lorenz)": lambda t, y, p: jnp.stack(
        [10 * (y[1] - y[0]), y[0] * (p - y[2]) - y[1], y[0] * y[1] - 8 / 3 * y[2]]
    ),
    "exp, tanh, logistic": lambda t, y, p: -p * jnp.exp(-y) * jnp.tanh(y) + jax.nn.sigmoid(y),
    "sin, cos, time": lambda t, y, p: -p * jnp.sin(y) + 0.1 * jnp.cos(y) + jnp.sin(t),
    "log, log1p": lambda t, y, p: -p * jnp.log(2 + y) * jnp.log1p(y * y),
    "expm1": lambda t, y, p: -p * jnp.expm1(y),
    "sqrt, rsqrt, pow": lambda t, y, p: (
        -p * jnp.sqrt(1 + y * y) * lax.rsqrt(1 + y * y) * y - (1 + y * y) ** 0.75 * y
    ),
    "division, integer powers": lambda t, y, p: p * y**2 / (0.5 + y**2) - y**3,
    "abs, max, min, clip, sign": lambda t, y, p: (
        -p * jnp.clip(y, -1, 1) + 0.01 * jnp.maximum(jnp.abs(y), 0.1) * jnp.sign(y)
    ),
    "where on y > 0": lambda t, y, p: jnp.where(y > 0, -p * y, -2 * p * y),
    "where on (y > 0) & (y <= 2)": lambda t, y, p: jnp.where((y > 0) & (y <= 2), -p * y, -y),
    "where on y == 0": lambda t, y, p: -p * y + jnp.where(y == 0, 1.0, 0.0),
    "where on (y != 0) & (y >= -1), square": lambda t, y, p: jnp.where(
        (y != 0) & (y >= -1), -p * jnp.square(y) * y, -y
    ),
    "erf, floor": lambda t, y, p: -p * jax.scipy.special.erf(y) + 0.01 * jnp.floor(y),
    "sum, mean, max over the state": lambda t, y, p: (
        -p * (y - jnp.mean(y)) + 0.01 * (jnp.sum(y) + jnp.max(y) - jnp.min(y))
    ),
    "lax.cond on a parameter": lambda t, y, p: lax.cond(p > 1.5, lambda: -y, lambda: -2 * y),
    "concatenate": lambda t, y, p: jnp.concatenate([-p * y[:1], y[:2] - y[1:]]),
    "gather at constant indices": lambda t, y, p: -p * y[jnp.array([2, 0, 1])],
    "matrix product": lambda t, y, p: p * (jnp.asarray(_MATRIX, y.dtype) @ y),
    "cumulative sum": lambda t, y, p: -p * jnp.cumsum(y) / 3,
}


def fields(quick: bool):
    """Each of `FIELDS` under `integrator="kernel"` against the lean loop (2048 members x
    100 RK4 steps, float32): whether Mosaic compiles it, and which integrator `"auto"`
    takes for it here."""
    members = 256 if quick else 2048
    print(f"fields: kernel against lean, {members} members x 100 RK4 steps, float32")
    ts = jnp.linspace(0.0, 1.0, 3).astype(jnp.float32)
    ps = jnp.linspace(1.0, 2.0, members, dtype=jnp.float32)
    y0 = jnp.broadcast_to(jnp.asarray([0.5, -0.3, 0.2], jnp.float32), (members, 3))
    for name, field in FIELDS.items():

        def solve(p, y0, integrator, field=field):
            return simlab.simulate(
                lambda t, y, args: field(t, y, p), y0, ts, solver="rk4", adaptive=False,
                dt0=0.01, integrator=integrator, throw=False,
            )  # fmt: skip

        lean = jax.jit(jax.vmap(ft.partial(solve, integrator="lean")))(ps, y0).ys
        # Which one auto takes is decided from the field's program, before any compile.
        auto = jax.eval_shape(ft.partial(solve, integrator="auto"), ps[0], y0[0]).integrator
        kernel = attempt(
            f"{name:<32} auto takes {auto:<6}",
            lambda solve=solve: jax.jit(jax.vmap(ft.partial(solve, integrator="kernel")))(ps, y0),
        )
        if kernel is not None:
            difference = float(jnp.max(jnp.abs(kernel.ys - lean) / (1 + jnp.abs(lean))))
            print(f"  {name:<32} auto takes {auto:<6}: compiles, against lean {difference:.1e}")


# --- adaptive_loops: adaptive Heun attempts on Van der Pol members inside a Pallas kernel ---

VDP_T1, VDP_RTOL = chip_ensembles.VDP_T1, chip_ensembles.VDP_RTOL


def _vdp_tiles(mu, a, b):
    return b, mu * (1 - a * a) * b - a


def _vdp_attempt(mu, carry):
    """One masked Heun–Euler attempt of every member of the tiles, as the bare loop's."""
    t, a, b, fa, fb, h, n = carry
    running = t < VDP_T1
    h = jnp.minimum(h, VDP_T1 - t)
    ga, gb = _vdp_tiles(mu, a + h * fa, b + h * fb)
    a1, b1 = a + h / 2 * (fa + ga), b + h / 2 * (fb + gb)
    sa = VDP_RTOL * (1 + jnp.maximum(jnp.abs(a), jnp.abs(a1)))
    sb = VDP_RTOL * (1 + jnp.maximum(jnp.abs(b), jnp.abs(b1)))
    norm = jnp.sqrt((((ga - fa) * h / 2 / sa) ** 2 + ((gb - fb) * h / 2 / sb) ** 2) / 2)
    accept = (norm <= 1) & running
    factor = jnp.clip(0.9 * lax.rsqrt(norm), 0.2, 10.0)
    na, nb = _vdp_tiles(mu, a1, b1)
    return (
        jnp.where(accept, t + h, t),
        jnp.where(accept, a1, a),
        jnp.where(accept, b1, b),
        jnp.where(accept, na, fa),
        jnp.where(accept, nb, fb),
        jnp.where(running, h * factor, h),
        n + running.astype(jnp.int32),
    )


def _vdp_start(mu, splat: bool):
    """The carry's first value: from constants (`splat`) or computed from the loaded `mu`."""
    zero = jnp.zeros_like(mu) if splat else mu - mu
    a, b = zero + 2.0, zero
    fa, fb = _vdp_tiles(mu, a, b)
    count = jnp.zeros(mu.shape, jnp.int32) if splat else zero.astype(jnp.int32)
    return (zero, a, b, fa, fb, zero + 1e-3, count)


ADAPTIVE_TESTS = {
    "any": lambda t: jnp.any(t < VDP_T1),
    "min": lambda t: jnp.min(t) < VDP_T1,
    "max of where": lambda t: jnp.max(jnp.where(t < VDP_T1, 1.0, 0.0)) > 0.0,
    "integer sum": lambda t: jnp.sum((t < VDP_T1).astype(jnp.int32)) > 0,
}


def _adaptive_program(test, attempts: int | None, splat: bool = False):
    """A kernel of the members' attempts: a `while_loop` testing `test` after every
    `attempts` of them, or (`test` None) a fixed loop of `attempts` masked ones."""

    def kernel(mu_ref, a_ref, b_ref, n_ref):
        mu = mu_ref[...]
        start = _vdp_start(mu, splat)
        if test is None:
            final = lax.fori_loop(0, attempts, lambda _, c: _vdp_attempt(mu, c), start)
        else:

            def body(carry):
                return lax.fori_loop(0, attempts, lambda _, c: _vdp_attempt(mu, c), carry)

            final = lax.while_loop(lambda c: test(c[0]), body, start)
        a_ref[...], b_ref[...], n_ref[...] = final[1], final[2], final[6]

    return kernel


def _adaptive_launch(kernel, members: int, rows: int, interpret: bool):
    spec = pl.BlockSpec((rows, 128), lambda i: (i, 0))
    shape = (members // 128, 128)
    call = pl.pallas_call(
        kernel,
        grid=(members // (rows * 128),),
        in_specs=[spec],
        out_specs=[spec, spec, spec],
        out_shape=[
            jax.ShapeDtypeStruct(shape, jnp.float32),
            jax.ShapeDtypeStruct(shape, jnp.float32),
            jax.ShapeDtypeStruct(shape, jnp.int32),
        ],
        interpret=interpret,
    )
    return jax.jit(lambda mus: call(mus.reshape(shape)))


def adaptive_loops(quick: bool):
    """Adaptive steps inside a kernel: 2^16 Van der Pol members (mu in [0.1, 10], Heun
    2(1), rtol 1e-4, to t = 10, the bare loop's problem) a block of rows x 128 a program,
    each member masked once done, the program looping while any of its members is not:
    the loop's test after every attempt or every eight, by each reduction; a fixed loop of
    the most attempts; and the carry started from constants, which Mosaic cannot compile."""
    members = 4096 if quick else 2**16
    mus = chip_ensembles.vdp_mus(members)
    bare_s = median_seconds(chip_ensembles.bare_adaptive_vdp, mus, repeats=5)
    bare_end, bare_attempts = chip_ensembles.bare_adaptive_vdp(mus)
    most = int(jnp.max(bare_attempts))
    print(f"  bare vmapped while_loop {bare_s * 1e3:.2f} ms, attempts at most {most}")
    variants = {f"while on {name}, a test an attempt": (test, 1, 8, False)
                for name, test in ADAPTIVE_TESTS.items()}  # fmt: skip
    for rows in (8, 16, 32):
        variants[f"while on min, a test every 8, {rows} rows"] = (
            ADAPTIVE_TESTS["min"],
            8,
            rows,
            False,
        )
    variants[f"fixed loop of {most} masked attempts"] = (None, most, 8, False)
    variants["the same, carry from constants"] = (None, most, 8, True)
    for label, (test, attempts, rows, splat) in variants.items():
        run = _adaptive_launch(_adaptive_program(test, attempts, splat), members, rows, quick)

        def measure(run=run, label=label):
            a, b, n = jax.block_until_ready(run(mus))
            seconds = median_seconds(run, mus, repeats=5)
            end = jnp.stack([a.reshape(-1), b.reshape(-1)], axis=1)
            error = float(jnp.max(jnp.abs(end - bare_end) / (1 + jnp.abs(bare_end))))
            same = bool(jnp.all(n.reshape(-1) == bare_attempts))
            print(f"  {label:<42} {seconds * 1e3:7.2f} ms  bare/this {bare_s / seconds:5.2f}  "
                  f"|end - bare| {error:.1e}  the bare loop's attempts: {same}")  # fmt: skip

        attempt(label, measure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a check on a CPU")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"of {SECTIONS}")
    options = parser.parse_args()
    print(
        f"simlab TPU probes — jax {jax.__version__}, device {jax.devices()[0].device_kind}\n",
        flush=True,
    )
    for section in options.sections.split(","):
        start = time.perf_counter()
        globals()[section](options.quick)
        print(f"[{section}: {time.perf_counter() - start:.0f} s]\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
