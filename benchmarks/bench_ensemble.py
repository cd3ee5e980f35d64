"""Ensembles: vmapped `simulate` against a hand-written vmapped `lax.scan` RK4 (the bare loop).

Throughput is right-hand-side evaluations per second on 1024 Lorenz systems with different
`rho`, so solvers with different stage counts compare fairly: RK4 costs 4 evaluations per
step, Tsit5 6 (7 stages, first same as last), and an adaptive solve counts every attempted
step of every member. One more row does the same for 2048 Van der Pol oscillators with
`mu` from 0.1 to 10 (adaptive Tsit5, 11 save times), against the bare loop of the same
members. One contender is an adaptive Tsit5 loop written directly in JAX (a
vmapped `lax.while_loop` of attempts, nothing saved): what the adaptive rows would cost
without simlab. The bare loop and each contender are timed in turn, round after
round, and each keeps its best round: on a shared machine the load shifts between rounds,
and interleaving spreads it over all of them alike.

`python benchmarks/bench_ensemble.py` prints the profile behind docs/performance.md.
"""

import functools as ft
import time

import diffrax as dfx
import jax
import jax.numpy as jnp
from _harness import Row

import simlab

BATCH = 1024
FIXED_STEPS = 1000
DT = 1e-3
STAGES = {"rk4": 4, "tsit5": 6}
VDP_BATCH, VDP_TOLERANCE = 2048, 1e-6


def _lorenz(y, rho):
    x, y_, z = y[0], y[1], y[2]
    return jnp.stack([10.0 * (y_ - x), x * (rho - z) - y_, x * y_ - 8 / 3 * z])


def _van_der_pol(y, mu):
    return jnp.stack([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])


def _rk4_step(field, y, p):
    k1 = field(y, p)
    k2 = field(y + DT / 2 * k1, p)
    k3 = field(y + DT / 2 * k2, p)
    k4 = field(y + DT * k3, p)
    return y + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def scan_rk4(field):
    """The reference for `field(y, p)`: `lax.scan` over `FIXED_STEPS` steps of a vmapped
    RK4 step, nothing else (4 evaluations a step)."""
    step = jax.vmap(ft.partial(_rk4_step, field))

    @jax.jit
    def loop(y0, p):
        return jax.lax.scan(lambda y, _: (step(y, p), None), y0, None, length=FIXED_STEPS)[0]

    return loop


bare_loop = scan_rk4(_lorenz)
bare_van_der_pol_loop = scan_rk4(_van_der_pol)


def _tsit5_attempt(field, y, f0, h, p):
    """One Tsit5 step of `field(y, p)` from `(y, f0 = f(y))`: the new state, its error
    estimate, f there."""
    tableau = dfx.Tsit5.tableau
    stages = [f0]
    for a_row in tableau.a_lower:
        increment = sum(float(a) * k for a, k in zip(a_row, stages, strict=False))
        stages.append(field(y + h * increment, p))
    y1 = y + h * sum(float(b) * k for b, k in zip(tableau.b_sol, stages, strict=True))
    error = h * sum(float(e) * k for e, k in zip(tableau.b_error, stages, strict=True))
    return y1, error, stages[-1]


def hand_written_adaptive(t1, tolerance, field=_lorenz):
    """What a vmapped adaptive Tsit5 loop written directly in JAX costs: per trajectory, a
    `lax.while_loop` of attempts of `field(y, p)` with an I-controller (no saves, no
    status), vmapped. Returns the final states and the attempts each trajectory made."""

    def one(y0, p):
        attempt = ft.partial(_plain_attempt, field, t1, tolerance, p)
        start = (0.0, y0, field(y0, p), DT, 0)
        _, y, _, _, attempts = jax.lax.while_loop(lambda c: c[0] < t1, attempt, start)
        return y, attempts

    return jax.jit(jax.vmap(one))


def _plain_attempt(field, t1, tolerance, p, carry):
    """One attempt of `hand_written_adaptive`'s loop."""
    t, y, f, h, attempts = carry
    h = jnp.minimum(h, t1 - t)
    y1, error, f1 = _tsit5_attempt(field, y, f, h, p)
    scale = tolerance * (1 + jnp.maximum(jnp.abs(y), jnp.abs(y1)))
    error_norm = jnp.sqrt(jnp.mean((error / scale) ** 2))
    accept = error_norm <= 1
    factor = jnp.clip(0.9 * error_norm ** (-1 / 5), 0.2, 10.0)
    return (
        jnp.where(accept, t + h, t),
        jnp.where(accept, y1, y),
        jnp.where(accept, f1, f),
        h * factor,
        attempts + 1,
    )


def flops_per_evaluation_ratio(field, y, p) -> float:
    """XLA's count of floating-point operations per evaluation of `field` in a vmapped RK4
    step, over that in a vmapped attempt of the plain adaptive Tsit5 loop: what an
    adaptive loop can reach against the bare scan per evaluation, running at its flop
    rate with every member busy."""
    rk4 = jax.jit(jax.vmap(ft.partial(_rk4_step, field)))
    attempt = jax.jit(jax.vmap(lambda p, carry: _plain_attempt(field, 1.0, 1e-6, p, carry)))
    carry = (jnp.zeros(p.shape), y, jax.vmap(field)(y, p), jnp.full(p.shape, DT), 0 * p)

    def flops(fn, *args):
        return fn.lower(*args).compile().cost_analysis()["flops"]

    return (flops(rk4, y, p) / STAGES["rk4"]) / (flops(attempt, p, carry) / STAGES["tsit5"])


def inputs(batch=BATCH):
    key = jax.random.PRNGKey(0)
    y0 = jnp.array([1.0, 1.0, 1.0]) + 0.1 * jax.random.normal(key, (batch, 3))
    return y0, jnp.linspace(20.0, 30.0, batch)


def _lorenz_model(rho):
    return simlab.models.Lorenz(sigma=10.0, rho=rho, beta=8 / 3)


def vmapped_simulate(ts, model=_lorenz_model, **settings):
    """jit(vmap(simulate)) over (y0, p), the model `model(p)` (Lorenz of `rho` unless
    given); returns the states and the steps taken."""

    def one(y0, p):
        trajectory = simlab.simulate(model(p), y0, ts, throw=False, **settings)
        return trajectory.ys, trajectory.stats["num_steps"]

    return jax.jit(jax.vmap(one))


def van_der_pol_inputs(batch=VDP_BATCH):
    """Van der Pol oscillators from (2, 0), `mu` evenly from 0.1 (nearly harmonic) to 10
    (relaxation oscillations, stiff on the slow parts)."""
    return jnp.tile(jnp.array([2.0, 0.0]), (batch, 1)), jnp.linspace(0.1, 10.0, batch)


def vmapped_diffeqsolve(saveat, controller, adjoint, *, dt0=DT, t1=1.0):
    """Plain vmapped `diffrax.diffeqsolve` with the given choices (for the profile)."""

    def one(y0, rho):
        model = simlab.models.Lorenz(sigma=10.0, rho=rho, beta=8 / 3)
        solution = dfx.diffeqsolve(
            dfx.ODETerm(model),
            dfx.Tsit5(),
            0.0,
            t1,
            dt0,
            y0,
            saveat=saveat,
            stepsize_controller=controller,
            adjoint=adjoint,
            max_steps=4096,
            throw=False,
        )
        return solution.ys, solution.stats["num_steps"]

    return jax.jit(jax.vmap(one))


def interleaved_best_seconds(fns, args, *, rounds=7):
    """Best wall time of each `fn(*args)` (already compiled), timed in turn per round."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def first_call_seconds(fn, args):
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return time.perf_counter() - start, out


def _contenders():
    fixed_ts = jnp.linspace(0.0, FIXED_STEPS * DT, 11)
    adaptive_ts = jnp.linspace(0.0, 10.0, 11)
    fixed = dict(adaptive=False, dt0=DT)
    adaptive = dict(rtol=1e-6, atol=1e-6)
    return {
        # name: (function, stages per step, target, "before" name)
        "fixed RK4, lean": (vmapped_simulate(fixed_ts, solver="rk4", **fixed), "rk4", ">= 0.5"),
        "fixed Tsit5, lean": (vmapped_simulate(fixed_ts, **fixed), "tsit5", ">= 0.5"),
        "fixed Tsit5, diffrax": (
            vmapped_simulate(fixed_ts, integrator="diffrax", **fixed),
            "tsit5",
            "before",
        ),
        "adaptive Tsit5, lean": (
            vmapped_simulate(adaptive_ts, integrator="lean", **adaptive),
            "tsit5",
            ">= 0.3",
        ),
        "adaptive Tsit5, diffrax": (
            vmapped_simulate(adaptive_ts, integrator="diffrax", **adaptive),
            "tsit5",
            "before",
        ),
        "adaptive Tsit5, plain JAX": (
            hand_written_adaptive(10.0, 1e-6),
            "tsit5",
            "before",
        ),
    }


def _van_der_pol_rows() -> list[Row]:
    """Adaptive Tsit5 on `VDP_BATCH` Van der Pol oscillators with 11 save times, per
    right-hand-side evaluation, against the bare RK4 scan of the same members; and the
    same members by the adaptive loop written directly in JAX (nothing saved), which
    shows what a vmapped adaptive loop itself allows on this machine."""
    args = van_der_pol_inputs()
    ts = jnp.linspace(0.0, 10.0, 11)
    simlab_run = vmapped_simulate(
        ts,
        model=lambda mu: simlab.models.VanDerPol(mu=mu),
        solver="tsit5",
        rtol=VDP_TOLERANCE,
        atol=VDP_TOLERANCE,
    )
    plain_run = hand_written_adaptive(10.0, VDP_TOLERANCE, field=_van_der_pol)
    ys, steps = jax.block_until_ready(simlab_run(*args))
    if not bool(jnp.all(jnp.isfinite(ys))):
        raise RuntimeError("a Van der Pol member of the adaptive Tsit5 solve failed")
    plain_ys, plain_steps = jax.block_until_ready(plain_run(*args))
    if not bool(jnp.all(jnp.isfinite(plain_ys))):
        raise RuntimeError("a Van der Pol member of the plain adaptive loop failed")
    # What the lean loop evaluates per member: f at the start and once more to choose the
    # first step (Hairer's rule), then 6 per attempted step, accepted or rejected (7
    # stages, the first of an attempt being the last of the step before, or the same f
    # again after a rejection). Interpolating at the save times evaluates nothing: the
    # loop lands a step on each. Under vmap the loop runs as many attempts as the longest
    # member takes; a finished member's idle attempts are not counted. The plain loop
    # evaluates f once at the start and 6 times per attempt.
    lean_evaluations = float(jnp.sum(6 * steps + 2))
    plain_evaluations = float(jnp.sum(6 * plain_steps + 1))
    jax.block_until_ready(bare_van_der_pol_loop(*args))
    bare_seconds, lean_seconds, plain_seconds = interleaved_best_seconds(
        [bare_van_der_pol_loop, simlab_run, plain_run], args
    )
    bare_rate = STAGES["rk4"] * FIXED_STEPS * VDP_BATCH / bare_seconds
    rows = []
    for name, elapsed, counts, evaluations, target in (
        ("lean", lean_seconds, steps, lean_evaluations, ">= 0.3"),
        ("plain JAX, nothing saved", plain_seconds, plain_steps, plain_evaluations, "reported"),
    ):
        rate = evaluations / elapsed
        rows.append(
            Row(
                f"ensemble adaptive Tsit5, Van der Pol, {name} / bare scan (evals/s)",
                rate / bare_rate,
                target,
                f"{VDP_BATCH} members, mu 0.1-10, to t = 10, tol {VDP_TOLERANCE:g}: "
                f"{rate / 1e6:.0f} vs {bare_rate / 1e6:.0f} M evals/s; "
                f"{float(jnp.mean(counts)):.0f} steps a member, most {int(jnp.max(counts))} "
                f"(the loop's width is busy {float(jnp.mean(counts) / jnp.max(counts)):.0%} "
                f"of its attempts); {elapsed * 1e3:.1f} vs {bare_seconds * 1e3:.1f} ms",
            )
        )
    # Per evaluation, Tsit5's seven stages, error estimate and controller cost about three
    # times RK4's arithmetic, and under vmap every member waits for the slowest.
    ceiling = flops_per_evaluation_ratio(_van_der_pol, *args)
    busy = float(jnp.mean(steps) / jnp.max(steps))
    rows.append(
        Row(
            "ensemble adaptive Tsit5, Van der Pol, ceiling by XLA's flop count",
            ceiling * busy,
            "reported",
            f"flops per evaluation, RK4 step / adaptive Tsit5 attempt {ceiling:.3f}, times "
            f"the lean loop's busy share {busy:.0%}: an adaptive loop at the bare scan's "
            "flop rate",
        )
    )
    return rows


def rows() -> list[Row]:
    args = inputs()
    contenders = _contenders()
    compile_seconds, evaluations = {}, {}
    for name, (fn, solver, _) in contenders.items():
        compile_seconds[name], (_, steps) = first_call_seconds(fn, args)
        evaluations[name] = float(jnp.sum(steps)) * STAGES[solver]
    jax.block_until_ready(bare_loop(*args))
    seconds = interleaved_best_seconds([bare_loop, *(c[0] for c in contenders.values())], args)
    bare_rate = STAGES["rk4"] * FIXED_STEPS * BATCH / seconds[0]
    table = []
    for (name, (_, _, target)), elapsed in zip(contenders.items(), seconds[1:], strict=True):
        rate = evaluations[name] / elapsed
        table.append(
            Row(
                f"ensemble {name} / bare scan (RHS evals/s)",
                rate / bare_rate,
                target,
                f"{rate / 1e6:.0f} vs {bare_rate / 1e6:.0f} M evals/s, "
                f"{elapsed / (evaluations[name] / BATCH) * 1e9 / 1e3:.2f} us/eval/batch",
            )
        )
    table.extend(_van_der_pol_rows())
    for name in ("fixed Tsit5, lean", "adaptive Tsit5, lean", "adaptive Tsit5, diffrax"):
        table.append(
            Row(
                f"first call (trace + compile) of vmapped {name}, s",
                compile_seconds[name],
                "<= 3" if "lean" in name else "before",
                "batch 1024, float64",
            )
        )
    return table


def profile() -> None:
    """Per step per trajectory costs of the variants the performance page discusses."""
    args = inputs()
    ts = jnp.linspace(0.0, FIXED_STEPS * DT, 11)
    constant = dfx.ConstantStepSize()
    checkpoint = dfx.RecursiveCheckpointAdjoint()
    variants = {
        "bare scan RK4": bare_loop,
        "diffrax Tsit5 fixed, SaveAt(ts), checkpoint": vmapped_diffeqsolve(
            dfx.SaveAt(ts=ts), constant, checkpoint
        ),
        "diffrax Tsit5 fixed, SaveAt(t1), checkpoint": vmapped_diffeqsolve(
            dfx.SaveAt(t1=True), constant, checkpoint
        ),
        "diffrax Tsit5 fixed, SaveAt(ts), ForwardMode": vmapped_diffeqsolve(
            dfx.SaveAt(ts=ts), constant, dfx.ForwardMode()
        ),
        "diffrax Tsit5 fixed, SaveAt(ts), DirectAdjoint": vmapped_diffeqsolve(
            dfx.SaveAt(ts=ts), constant, dfx.DirectAdjoint()
        ),
        "diffrax Tsit5 PID 1e-6, SaveAt(ts), checkpoint": vmapped_diffeqsolve(
            dfx.SaveAt(ts=ts), dfx.PIDController(rtol=1e-6, atol=1e-6), checkpoint
        ),
        "simlab lean RK4 fixed": vmapped_simulate(ts, solver="rk4", adaptive=False, dt0=DT),
        "simlab lean Tsit5 fixed": vmapped_simulate(ts, adaptive=False, dt0=DT),
        "simlab lean Tsit5 adaptive 1e-6": vmapped_simulate(
            ts, integrator="lean", rtol=1e-6, atol=1e-6
        ),
    }
    steps = {}
    for name, fn in variants.items():
        out = jax.block_until_ready(fn(*args))
        steps[name] = FIXED_STEPS if name.startswith("bare") else float(jnp.max(out[1]))
    seconds = interleaved_best_seconds(list(variants.values()), args)
    for (name, _), elapsed in zip(variants.items(), seconds, strict=True):
        per_step = elapsed / steps[name] / BATCH * 1e9
        print(f"{name:<50} {steps[name]:6.0f} steps {per_step:8.1f} ns/step/trajectory")


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    profile()
