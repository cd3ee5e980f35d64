"""SDE ensembles: 10⁴ Ornstein–Uhlenbeck paths × 1,000 Euler–Maruyama steps in float32.

The bare loop is a `lax.scan` over the steps of the whole batch, its increments drawn at
once beforehand (the fastest way to write it, and it stores every increment). simlab draws
each step's increments inside its loop from the member's key. Diffrax solves the same
paths with `diffeqsolve(Euler())`, vmapped, with an `UnsafeBrownianPath` (its cheapest
path, fixed steps and forward only) and with a `VirtualBrownianTree` (what its adaptive
steps and reverse mode need).
"""

import diffrax as dfx
import jax
import jax.numpy as jnp
from _harness import Row, best_seconds

import simlab

PATHS = 10_000
STEPS = 1_000
T = 1.0
DT = T / STEPS
THETA, MU, SIGMA = 1.0, 0.5, 0.3
DTYPE = jnp.float32


@jax.jit
def bare_loop(key):
    increments = jnp.sqrt(jnp.asarray(DT, DTYPE)) * jax.random.normal(key, (STEPS, PATHS), DTYPE)

    def step(y, dW):
        return y + THETA * (MU - y) * DT + SIGMA * dW, None

    return jax.lax.scan(step, jnp.zeros(PATHS, DTYPE), increments)[0]


def _model(sigma=SIGMA):
    return simlab.models.OrnsteinUhlenbeck(
        theta=jnp.asarray(THETA, DTYPE), mu=jnp.asarray(MU, DTYPE), sigma=jnp.asarray(sigma, DTYPE)
    )


def _simlab_end(key, sigma=SIGMA):
    ts = jnp.array([0.0, T], DTYPE)
    path = simlab.simulate(
        _model(sigma),
        jnp.zeros(1, DTYPE),
        ts,
        key=key,
        solver="euler_maruyama",
        adaptive=False,
        dt0=DT,
        throw=False,
    )
    return path.ys[-1, 0]


@jax.jit
def simlab_paths(keys):
    return jax.vmap(_simlab_end)(keys)


@jax.jit
def simlab_mean_gradient(keys):
    return jax.grad(lambda sigma: jnp.mean(jax.vmap(lambda k: _simlab_end(k, sigma))(keys)))(
        jnp.asarray(SIGMA, DTYPE)
    )


def _diffrax_paths(brownian, adjoint):
    drift = dfx.ODETerm(lambda t, y, args: THETA * (MU - y))

    def one(key):
        noise = dfx.ControlTerm(lambda t, y, args: jnp.full((1,), SIGMA, DTYPE), brownian(key))
        solution = dfx.diffeqsolve(
            dfx.MultiTerm(drift, noise),
            dfx.Euler(),
            0.0,
            T,
            DT,
            jnp.zeros(1, DTYPE),
            saveat=dfx.SaveAt(t1=True),
            max_steps=STEPS + 1,
            adjoint=adjoint,
        )
        return solution.ys[-1, 0]

    return jax.jit(jax.vmap(one))


def rows() -> list[Row]:
    key = jax.random.key(0)
    keys = jax.random.split(key, PATHS)
    unsafe = _diffrax_paths(lambda k: dfx.UnsafeBrownianPath(shape=(), key=k), dfx.ForwardMode())
    tree = _diffrax_paths(
        lambda k: dfx.VirtualBrownianTree(0.0, T, tol=DT / 2, shape=(), key=k),
        dfx.RecursiveCheckpointAdjoint(),
    )
    times = best_seconds(
        {
            "bare": lambda: bare_loop(key),
            "simlab": lambda: simlab_paths(keys),
            "gradient": lambda: simlab_mean_gradient(keys),
            "unsafe": lambda: unsafe(keys),
        },
        repeats=5,
    )
    times |= best_seconds({"tree": lambda: tree(keys)}, repeats=1)
    detail = f"{PATHS} paths x {STEPS} steps, float32"
    return [
        Row(
            "SDE: OU ensemble, simlab / bare scan (throughput)",
            times["bare"] / times["simlab"],
            ">= 0.8",
            detail,
        ),
        Row(
            "SDE: OU ensemble vs Diffrax + UnsafeBrownianPath",
            times["unsafe"] / times["simlab"],
            ">= 2.5x",
            detail,
        ),
        Row(
            "SDE: OU ensemble vs Diffrax + VirtualBrownianTree",
            times["tree"] / times["simlab"],
            ">= 30x",
            detail,
        ),
        Row(
            "SDE: pathwise reverse gradient of the mean / solve",
            times["gradient"] / times["simlab"],
            "<= 4",
            detail,
        ),
    ]


if __name__ == "__main__":
    for row in rows():
        print(row)
