"""`simlab.sweep` against a loop of SciPy solves, a bare `jax.vmap`, and one device.

The problem: 1024 Lorenz trajectories with the Rayleigh ratio rho swept over [1, 50],
Tsit5 (SciPy: RK45, the same Dormand–Prince family) at rtol = atol = 1e-8, t in [0, 1],
float64, keeping the final state of each. The sweep uses simlab's lean Runge–Kutta loop
(the default for explicit solvers); one row shows Diffrax's solve.

Two SciPy competitors: a loop of `solve_ivp`, one member at a time (timed on every 16th
member, so the subset spans the whole range of rho, chaotic members included, and scaled
to 1024), and one `solve_ivp` of the stacked system of all 1024 members, vectorised in
NumPy (one step size for all of them). Every contender is timed by the best of interleaved
rounds, and the accuracy of each is measured against a tight DOP853 reference.
"""

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
from _harness import Row, best_seconds

import simlab
from simlab._sweep._execute import CPU_GROUP_SIZE

NUM_MEMBERS = 1024
SCIPY_STRIDE = 16  # the SciPy loop runs every 16th member and is scaled: it is linear
TOLERANCE = 1e-8
CHUNK_SIZE = 256  # for the row on the cost of running a sweep in chunks: one group each
RHOS = np.linspace(1.0, 50.0, NUM_MEMBERS)
Y0 = np.array([1.0, 1.0, 1.0])
TS = np.linspace(0.0, 1.0, 11)
MODEL = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)


def final_state(trajectory):
    return {"final_state": trajectory.ys[-1]}


def run_sweep(mesh, integrator="lean", chunk_size=None, rhos=RHOS):
    return simlab.sweep(
        MODEL,
        {"rho": rhos},
        Y0,
        TS,
        observable=final_state,
        mesh=mesh,
        solver="tsit5",
        rtol=TOLERANCE,
        atol=TOLERANCE,
        progress=False,
        integrator=integrator,
        chunk_size=chunk_size,
    )


@eqx.filter_jit
def bare_vmap(rhos, integrator="lean"):
    def one(rho):
        model = eqx.tree_at(lambda m: m.rho, MODEL, rho)
        trajectory = simlab.simulate(
            model,
            jnp.asarray(Y0),
            jnp.asarray(TS),
            solver="tsit5",
            rtol=TOLERANCE,
            atol=TOLERANCE,
            throw=False,
            integrator=integrator,
        )
        return trajectory.ys[-1]

    return jax.vmap(one)(rhos)


def lorenz(t, y, rho):
    """The Lorenz field for one member (`y` of shape (3,)) or for all, stacked as (3, M)."""
    x, y_, z = y[0], y[1], y[2]
    return np.stack([10.0 * (y_ - x), x * (rho - z) - y_, x * y_ - 8 / 3 * z])


def scipy_loop(rhos, *, method="RK45", tolerance=TOLERANCE):
    return np.stack(
        [
            scipy.integrate.solve_ivp(
                lorenz, (0.0, 1.0), Y0, method=method, rtol=tolerance, atol=tolerance, args=(rho,)
            ).y[:, -1]
            for rho in rhos
        ]
    )


def scipy_stacked(rhos):
    """One `solve_ivp` of all members at once: the state is (3, M) flattened, the right-hand
    side one vectorised NumPy expression."""
    num = rhos.shape[0]

    def stacked(t, y):
        return lorenz(t, y.reshape(3, num), rhos).reshape(-1)

    y0 = np.repeat(Y0[:, None], num, axis=1).reshape(-1)
    solution = scipy.integrate.solve_ivp(
        stacked, (0.0, 1.0), y0, method="RK45", rtol=TOLERANCE, atol=TOLERANCE
    )
    return solution.y[:, -1].reshape(3, num).T


def relative_error(values, reference):
    return float(np.max(np.abs(values - reference) / (np.abs(reference) + 1.0)))


def rows() -> list[Row]:
    one_device = simlab.parallel.member_mesh(jax.devices()[:1])
    all_devices = simlab.parallel.member_mesh()
    result = run_sweep(one_device)
    run_sweep(one_device, chunk_size=CHUNK_SIZE)  # compiles its chunk function
    rhos = jnp.asarray(RHOS)
    subset = RHOS[::SCIPY_STRIDE]
    best = best_seconds(
        {
            "one": lambda: run_sweep(one_device),
            "all": lambda: run_sweep(all_devices),
            "chunked": lambda: run_sweep(one_device, chunk_size=CHUNK_SIZE),
            "scipy loop": lambda: scipy_loop(subset),
            "scipy stacked": lambda: scipy_stacked(RHOS),
        },
        repeats=5,
    )
    t_sweep_one, t_sweep_all = best["one"], best["all"]
    # The overhead pair alternates on its own: a call that follows a second of NumPy, or
    # the two-device sweep, runs up to 15 % slower or faster than one that follows the
    # other contender of the pair, which would swamp the few per cent measured here.
    shuffled = np.random.default_rng(0).permutation(RHOS)
    overhead = best_seconds(
        {
            "sweep": lambda: run_sweep(one_device),
            "vmap": lambda: bare_vmap(rhos),
            "shuffled sweep": lambda: run_sweep(one_device, rhos=shuffled),
        },
        repeats=15,
    )
    t_overhead_sweep, t_vmap = overhead["sweep"], overhead["vmap"]
    t_scipy = best["scipy loop"] * SCIPY_STRIDE
    t_stacked = best["scipy stacked"]
    best_diffrax = best_seconds(
        {
            "sweep": lambda: run_sweep(one_device, "diffrax"),
            "vmap": lambda: bare_vmap(rhos, "diffrax"),
        },
        repeats=5,
    )
    t_sweep_diffrax = best_diffrax["sweep"]

    # Accuracy against DOP853 at 1e-12 on the strided subset (rho from 1 to 50).
    reference = scipy_loop(subset, method="DOP853", tolerance=1e-12)
    ours = np.asarray(result.observables["final_state"])
    error = relative_error(ours[::SCIPY_STRIDE], reference)
    chaotic = subset > 24.74  # past the subcritical Hopf bifurcation of the Lorenz system
    error_chaotic = relative_error(ours[::SCIPY_STRIDE][chaotic], reference[chaotic])
    error_loop = relative_error(scipy_loop(subset), reference)
    error_stacked = relative_error(scipy_stacked(RHOS)[::SCIPY_STRIDE], reference)
    vmapped = np.asarray(bare_vmap(rhos))
    assert np.allclose(ours, vmapped, rtol=1e-12, atol=1e-12)

    num_devices = all_devices.size
    return [
        Row(
            f"sweep: {len(RHOS)} Lorenz rho (1 device) vs loop of solve_ivp RK45",
            t_scipy / t_sweep_one,
            ">= 100x",
            f"{t_sweep_one * 1e3:.0f} ms vs {t_scipy:.1f} s (every {SCIPY_STRIDE}th rho, "
            f"scaled to {len(RHOS)}); error {error:.1e}, on the {int(chaotic.sum())} "
            f"with rho > 24.74 {error_chaotic:.1e}; scipy's {error_loop:.1e}",
        ),
        Row(
            f"sweep: {len(RHOS)} Lorenz rho (1 device) vs one stacked solve_ivp",
            t_stacked / t_sweep_one,
            ">= 10x",
            f"{t_sweep_one * 1e3:.0f} ms vs {t_stacked * 1e3:.0f} ms ({3 * len(RHOS)} equations, "
            f"vectorised RK45); stacked error {error_stacked:.1e}",
        ),
        Row(
            "  same, integrator='diffrax' (diffeqsolve) vs solve_ivp loop",
            t_scipy / t_sweep_diffrax,
            "",
            f"{t_sweep_diffrax * 1e3:.0f} ms",
        ),
        Row(
            "sweep overhead: sweep / bare jax.vmap(simulate), 1 device",
            t_overhead_sweep / t_vmap,
            "<= 1.1",
            f"{t_overhead_sweep * 1e3:.2f} ms vs {t_vmap * 1e3:.2f} ms; on a CPU the sweep "
            f"runs members in groups of {CPU_GROUP_SIZE}",
        ),
        Row(
            "  same, rho shuffled (no neighbours to group)",
            overhead["shuffled sweep"] / t_vmap,
            "<= 1.1",
            f"{overhead['shuffled sweep'] * 1e3:.2f} ms: "
            f"{(overhead['shuffled sweep'] - t_vmap) * 1e3:.2f} ms more per call",
        ),
        Row(
            "  same, integrator='diffrax' (diffeqsolve)",
            t_sweep_diffrax / best_diffrax["vmap"],
            "<= 1.1",
            f"{t_sweep_diffrax * 1e3:.0f} ms vs {best_diffrax['vmap'] * 1e3:.0f} ms",
        ),
        Row(
            f"sweep in chunks of {CHUNK_SIZE} / in one chunk, 1 device",
            best["chunked"] / t_sweep_one,
            "<= 1.1",
            f"{best['chunked'] * 1e3:.1f} ms vs {t_sweep_one * 1e3:.1f} ms "
            f"({len(RHOS) // CHUNK_SIZE} chunks)",
        ),
        Row(
            f"sweep throughput: {num_devices} devices / 1 device",
            t_sweep_one / t_sweep_all,
            f"~{num_devices}x",
            f"{t_sweep_all * 1e3:.0f} ms vs {t_sweep_one * 1e3:.0f} ms "
            f"({num_devices} simulated CPU devices on {os.cpu_count()} cores)",
        ),
    ]
