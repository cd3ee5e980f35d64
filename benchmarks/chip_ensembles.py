"""The ensemble rows measured on an accelerator, each beside the plain JAX loop of the same
method in the same run: adaptive Van der Pol (Heun 2(1)) against a vmapped
`lax.while_loop`, Ornstein–Uhlenbeck paths (Euler–Maruyama; `bench_sde.py`'s problem, with
more paths) against a `lax.scan`, fixed Lorenz steps against a scan and against the
hand-written Pallas kernel of `gpu_ensemble.py`, `sweep` against vmapped `simulate`,
forward sensitivities against the solve, and a multi-start fit of many starts against one
of few. `tpu_bench.py`'s `ensembles` section prints them; `tpu_probes.py` reuses the bare
loops.
"""

import functools as ft

import bench_fit_multistart
import bench_sde
import jax
import jax.numpy as jnp
import numpy as np

import simlab

VDP_T1, VDP_RTOL = 10.0, 1e-4


def vdp_mus(members: int) -> jax.Array:
    return jnp.linspace(0.1, 10.0, members, dtype=jnp.float32)


def _vdp(mu, y):
    return jnp.stack([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])


@jax.jit
def bare_adaptive_vdp(mus):
    """A vmapped `lax.while_loop` of Heun–Euler attempts with an I-controller, written out:
    the final states and each member's attempts. Nothing is saved but the end."""

    def one(mu):
        def attempt(carry):
            t, y, f, h, attempts = carry
            h = jnp.minimum(h, VDP_T1 - t)
            f1 = _vdp(mu, y + h * f)
            y1 = y + h / 2 * (f + f1)
            error = h / 2 * (f1 - f)
            scale = VDP_RTOL * (1 + jnp.maximum(jnp.abs(y), jnp.abs(y1)))
            norm = jnp.sqrt(jnp.mean((error / scale) ** 2))
            accept = norm <= 1
            factor = jnp.clip(0.9 * norm ** (-1 / 2), 0.2, 10.0)
            f_end = _vdp(mu, y1)
            return (
                jnp.where(accept, t + h, t),
                jnp.where(accept, y1, y),
                jnp.where(accept, f_end, f),
                h * factor,
                attempts + 1,
            )

        y0 = jnp.array([2.0, 0.0], jnp.float32)
        start = (jnp.float32(0.0), y0, _vdp(mu, y0), jnp.float32(1e-3), 0)
        _, y, _, _, attempts = jax.lax.while_loop(lambda c: c[0] < VDP_T1, attempt, start)
        return y, attempts

    return jax.vmap(one)(mus)


def _vdp_trajectory(mu, saves: int, integrator: str):
    return simlab.simulate(
        simlab.models.VanDerPol(mu=mu),
        jnp.array([2.0, 0.0], jnp.float32),
        jnp.linspace(0.0, VDP_T1, saves, dtype=jnp.float32),
        solver="heun",
        rtol=VDP_RTOL,
        atol=VDP_RTOL,
        dt0=1e-3,
        integrator=integrator,
        max_steps=20_000,
        throw=False,
    )


def simlab_adaptive_vdp(saves: int, integrator: str = "lean"):
    """jit(vmap(simulate)) of the same solve with `saves` save times: the states and steps."""

    def one(mu):
        trajectory = _vdp_trajectory(mu, saves, integrator)
        return trajectory.ys, trajectory.stats["num_steps"]

    return jax.jit(jax.vmap(one))


def vdp_integrator_of_auto(mus) -> str:
    """The integrator that `integrator="auto"` takes for a batch of these solves."""
    return jax.eval_shape(jax.vmap(lambda mu: _vdp_trajectory(mu, 2, "auto")), mus).integrator


@ft.partial(jax.jit, static_argnames="paths")
def bare_ou(key, paths):
    """`bench_sde`'s Ornstein–Uhlenbeck paths by Euler–Maruyama in a `lax.scan`, the
    increments of all `paths` drawn at once from one key."""
    increments = jnp.sqrt(jnp.float32(bench_sde.DT)) * jax.random.normal(
        key, (bench_sde.STEPS, paths), jnp.float32
    )
    return jax.lax.scan(_ou_step, jnp.zeros(paths, jnp.float32), increments)[0]


@jax.jit
def bare_ou_member_keys(keys):
    """The same, each path's increments drawn from its own key (as a path that depends
    only on its key must be)."""
    increments = jnp.sqrt(jnp.float32(bench_sde.DT)) * jax.vmap(
        lambda key: jax.random.normal(key, (bench_sde.STEPS,), jnp.float32), out_axes=1
    )(keys)
    return jax.lax.scan(_ou_step, jnp.zeros(keys.shape[0], jnp.float32), increments)[0]


def _ou_step(y, dw):
    theta, mu, sigma, dt = bench_sde.THETA, bench_sde.MU, bench_sde.SIGMA, bench_sde.DT
    return y + theta * (mu - y) * dt + sigma * dw, None


# `simulate` of the same paths, vmapped over their keys.
simlab_ou = bench_sde.simlab_paths


def ou_moments_error(ends) -> float:
    """The larger of the errors of the ends' mean and variance against the exact ones of
    the Euler–Maruyama recursion, in standard errors."""
    mean, variance = bench_sde._euler_maruyama_moments(bench_sde.STEPS)
    n = ends.shape[0]
    ends = np.asarray(ends, np.float64)
    mean_error = abs(ends.mean() - mean) / np.sqrt(variance / n)
    variance_error = abs(ends.var() - variance) / (variance * np.sqrt(2 / n))
    return float(max(mean_error, variance_error))


# The multi-start fit: `bench_fit_multistart.py`'s Lotka–Volterra problem (the lynx–hare
# records' times and first record, its parameters, bounds and Latin hypercube starts), with
# observations simulated from known parameters, which the best start must recover.
LV_TRUTH = {"alpha": 0.55, "beta": 0.028, "gamma": 0.84, "delta": 0.026}


def lotka_volterra_data() -> tuple[jax.Array, jax.Array, jax.Array]:
    """`(ts, y0, observations)` in float32: the solution from the first lynx–hare record
    at `LV_TRUTH`, by the solve the fit runs (float32's default tolerances)."""
    records = simlab.datasets.lynx_hare()
    ts = jnp.asarray(records.ts, jnp.float32)
    y0 = jnp.asarray(records.observations[0], jnp.float32)
    truth = simlab.models.LotkaVolterra(**{k: np.float32(v) for k, v in LV_TRUTH.items()})
    return ts, y0, simlab.simulate(truth, y0, ts).ys


def multistart_fit(starts: int, ts, y0, observations):
    """`simlab.fit` from `starts` Latin hypercube starts in the bounds (Levenberg–Marquardt,
    at most 200 steps a start); the best start's result, `.starts` holding them all."""
    start = simlab.models.LotkaVolterra(
        alpha=np.float32(0.5), beta=np.float32(0.02), gamma=np.float32(0.8), delta=np.float32(0.02)
    )
    return simlab.fit(
        start,
        ts,
        observations,
        y0=y0,
        params=bench_fit_multistart.PARAMS,
        starts=starts,
        bounds=bench_fit_multistart.BOUNDS,
        key=jax.random.key(0),
        progress=False,
        throw=False,
    )
