"""Hamiltonian systems in float64: the symplectic loop against a bare `lax.scan`, and the
energy error on an eccentric Kepler orbit against SciPy's DOP853.

The bare loop is Störmer–Verlet on the outer solar system written as one `lax.scan`, half
drift, kick, half drift (one force evaluation a step), with the same `jax.grad` of the
same potential: what differs is simlab's loop and checks. The
Kepler row integrates e = 0.6 to t = 10⁴ with McLachlan's fourth-order method (10⁶ steps)
and with DOP853 at the loosest tolerances SciPy is given; SciPy is given at least as much
wall time, and the row is the ratio of the largest energy errors over 10⁴ save times.

The Langevin row runs BAOAB on 1024 thermostatted pendulums under `jax.vmap`, one key each,
against the same splitting written as one `lax.scan` that draws the same normals
(`fold_in(key, n)`, as the stochastic integrator does), so both give the same paths.

The adjoint rows differentiate Jupiter's position after 10⁵ Verlet steps of the outer solar
system with respect to the masses and the initial state. Memory is XLA's own account of the
compiled gradient, `memory_analysis().temp_size_in_bytes`: the scratch buffers besides
inputs and outputs, which is what stored or checkpointed states occupy. Inside `jit` the
step count is traced and default reverse mode checkpoints within `max_steps`; outside it
the count is a Python int and the steps are stored (they fit the memory budget).
"""

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
from _harness import Row, best_seconds

import simlab
from simlab.integrate._symplectic import symplectic_solve

jax.config.update("jax_enable_x64", True)  # as benchmarks/run.py: the data are float64

SOLAR_STEPS = 100_000
SOLAR_DT = 10.0  # days
KEPLER_END = 10_000.0
KEPLER_DT = 0.01
ECCENTRICITY = 0.6
SCIPY_TOLERANCES = (1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10)

LANGEVIN_MEMBERS = 1024
LANGEVIN_STEPS = 2_000
LANGEVIN_DT = 0.01

PLANETS, PLANETS_Y0 = simlab.models.NBody.outer_solar_system()
PENDULUM = simlab.models.Pendulum(length=1.0)
THERMOSTAT = simlab.models.Langevin(PENDULUM, friction=1.0, temperature=0.5)


@jax.jit
def bare_verlet(y0):
    force = jax.grad(lambda q: -PLANETS.potential(q, None))
    masses = jnp.repeat(PLANETS.masses, 3)

    def step(carry, _):
        q, p = carry
        q = q + 0.5 * SOLAR_DT * p / masses
        p = p + SOLAR_DT * force(q)
        return (q + 0.5 * SOLAR_DT * p / masses, p), None

    (q, p), _ = jax.lax.scan(step, tuple(jnp.split(y0, 2)), None, length=SOLAR_STEPS)
    return jnp.concatenate([q, p])


@jax.jit
def simlab_verlet(y0):
    ts = jnp.array([0.0, SOLAR_STEPS * SOLAR_DT])
    path = simlab.simulate(
        PLANETS, y0, ts, solver="verlet", adaptive=False, dt0=SOLAR_DT, max_steps=SOLAR_STEPS
    )
    return path.ys[-1]


@jax.jit
@jax.vmap
def bare_baoab(key):
    force = jax.grad(lambda q: -PENDULUM.potential(q, None))
    inverse_mass = 1 / (PENDULUM.mass * PENDULUM.length**2)
    h = LANGEVIN_DT
    decay = jnp.exp(-THERMOSTAT.friction * h)
    amplitude = jnp.sqrt(THERMOSTAT.temperature * (1 - decay**2) / inverse_mass)

    def step(carry, n):
        q, p = carry
        # The normals of step n as the stochastic integrator draws them: the momenta's part
        # of a full state's increment.
        xi = jax.random.normal(jax.random.split(jax.random.fold_in(key, n))[0], (2,))[1:]
        p = p + 0.5 * h * force(q)
        q = q + 0.5 * h * inverse_mass * p
        p = decay * p + amplitude * xi
        q = q + 0.5 * h * inverse_mass * p
        return (q, p + 0.5 * h * force(q)), None

    start = (jnp.zeros(1), jnp.zeros(1))
    (q, p), _ = jax.lax.scan(step, start, jnp.arange(LANGEVIN_STEPS))
    return jnp.concatenate([q, p])


@jax.jit
@jax.vmap
def simlab_baoab(key):
    ts = jnp.array([0.0, LANGEVIN_STEPS * LANGEVIN_DT])
    path = simlab.simulate(
        THERMOSTAT,
        jnp.zeros(2),
        ts,
        key=key,
        adaptive=False,
        dt0=LANGEVIN_DT,
        max_steps=LANGEVIN_STEPS,
    )
    return path.ys[-1]


def langevin_row() -> Row:
    keys = jax.random.split(jax.random.key(0), LANGEVIN_MEMBERS)
    np.testing.assert_allclose(simlab_baoab(keys), bare_baoab(keys), rtol=1e-9, atol=1e-12)
    times = best_seconds({"bare": lambda: bare_baoab(keys), "simlab": lambda: simlab_baoab(keys)})
    return Row(
        "Hamiltonian: BAOAB, simlab / bare lax.scan (throughput)",
        times["bare"] / times["simlab"],
        ">= 0.8",
        f"{LANGEVIN_MEMBERS} vmapped pendulums, {LANGEVIN_STEPS} steps, float64",
    )


def _kepler_start() -> np.ndarray:
    speed = np.sqrt((1 + ECCENTRICITY) / (1 - ECCENTRICITY))
    return np.array([1 - ECCENTRICITY, 0.0, 0.0, speed])


def _kepler_energy(ys: np.ndarray) -> np.ndarray:
    return 0.5 * (ys[..., 2] ** 2 + ys[..., 3] ** 2) - 1 / np.hypot(ys[..., 0], ys[..., 1])


KEPLER_TS = np.linspace(0.0, KEPLER_END, 10_001)


@jax.jit
def simlab_kepler(y0):
    path = simlab.simulate(
        simlab.models.Kepler(),
        y0,
        jnp.asarray(KEPLER_TS),
        solver="mclachlan4",
        adaptive=False,
        dt0=KEPLER_DT,
        max_steps=10**7,
    )
    return path.ys


def _scipy_kepler(rtol: float) -> tuple[np.ndarray, float]:
    def field(t, y):
        r3 = np.hypot(y[0], y[1]) ** 3
        return [y[2], y[3], -y[0] / r3, -y[1] / r3]

    start = time.perf_counter()
    solution = scipy.integrate.solve_ivp(
        field, (0.0, KEPLER_END), _kepler_start(), "DOP853", KEPLER_TS, rtol=rtol, atol=rtol * 1e-3
    )
    return solution.y.T, time.perf_counter() - start


def _largest_energy_error(ys: np.ndarray) -> float:
    energy = _kepler_energy(ys)
    return float(np.max(np.abs(energy - energy[0])))


def kepler_row() -> Row:
    y0 = jnp.asarray(_kepler_start())
    seconds = best_seconds({"simlab": lambda: simlab_kepler(y0)}, repeats=3)["simlab"]
    simlab_error = _largest_energy_error(np.asarray(simlab_kepler(y0)))
    # The tightest tolerance SciPy finishes within simlab's time; if none does, its fastest.
    chosen = None
    for rtol in SCIPY_TOLERANCES:
        ys, scipy_seconds = _scipy_kepler(rtol)
        if chosen is None or scipy_seconds <= seconds:
            chosen = (rtol, _largest_energy_error(ys), scipy_seconds)
        if scipy_seconds > seconds:
            break
    rtol, scipy_error, scipy_seconds = chosen
    return Row(
        "Kepler e=0.6 to t=1e4: energy error, DOP853 / simlab McLachlan4",
        scipy_error / simlab_error,
        ">= 100x",
        f"simlab {simlab_error:.1e} in {seconds:.2f} s (dt {KEPLER_DT}); DOP853 rtol {rtol:g}: "
        f"{scipy_error:.1e} in {scipy_seconds:.2f} s",
    )


ADJOINT_STEPS = 100_000
ADJOINT_TS = jnp.array([0.0, ADJOINT_STEPS * SOLAR_DT])


def _jupiter(masses, y0, solve):
    """Jupiter's x at the end: a scalar of all the masses and the whole initial state."""
    return solve(eqx.tree_at(lambda model: model.masses, PLANETS, masses), y0)[-1, 3]


def _traced_counts(adjoint):
    """The solve as `simulate` runs it inside `jit`."""

    def solve(model, y0):
        return simlab.simulate(
            model,
            y0,
            ADJOINT_TS,
            solver="verlet",
            adaptive=False,
            dt0=SOLAR_DT,
            max_steps=ADJOINT_STEPS,
            adjoint=adjoint,
        ).ys

    return solve


def _static_counts(reversible):
    """The solve as `simulate` runs it outside `jit`: a Python int of steps."""
    solver = simlab.SOLVERS["verlet"].build()

    def solve(model, y0):
        return symplectic_solve(
            model,
            solver,
            ADJOINT_TS,
            y0,
            None,
            steps_per_interval=ADJOINT_STEPS,
            max_steps=ADJOINT_STEPS,
            reversible=reversible,
        )

    return solve


def _scratch_bytes(gradient) -> int:
    compiled = gradient.lower(PLANETS.masses, PLANETS_Y0).compile()
    return compiled.memory_analysis().temp_size_in_bytes


def adjoint_rows() -> list[Row]:
    gradients = {
        name: jax.jit(jax.grad(lambda m, y, solve=solve: _jupiter(m, y, solve), argnums=(0, 1)))
        for name, solve in {
            "checkpointed": _traced_counts(None),
            "reversible": _traced_counts("reversible"),
            "stored": _static_counts(False),
            "reversible, static": _static_counts(True),
        }.items()
    }
    scratch = {name: _scratch_bytes(gradient) for name, gradient in gradients.items()}
    values = {
        name: np.concatenate([np.ravel(g) for g in gradient(PLANETS.masses, PLANETS_Y0)])
        for name, gradient in gradients.items()
    }
    times = best_seconds(
        {
            name: lambda gradient=gradients[name]: gradient(PLANETS.masses, PLANETS_Y0)
            for name in ("checkpointed", "reversible")
        },
        repeats=2,
    )
    scale = np.max(np.abs(values["checkpointed"]))
    difference = np.max(np.abs(values["reversible"] - values["checkpointed"])) / scale
    static_difference = np.max(np.abs(values["reversible, static"] - values["stored"])) / scale
    kib = {name: size / 1024 for name, size in scratch.items()}
    return [
        Row(
            "Hamiltonian gradient, 1e5 Verlet steps: memory reversible / checkpointed",
            scratch["reversible"] / scratch["checkpointed"],
            "<= 0.1",
            f"outer solar system in jit: scratch {kib['reversible']:.1f} KiB against "
            f"{kib['checkpointed']:.0f} KiB; gradients differ by {difference:.1e} of the "
            f"largest; {times['reversible']:.2f} s against {times['checkpointed']:.2f} s",
        ),
        Row(
            "Hamiltonian gradient, 1e5 Verlet steps: memory reversible / stored",
            scratch["reversible, static"] / scratch["stored"],
            "<= 0.1",
            f"a Python int of steps (outside jit): {kib['reversible, static']:.1f} KiB "
            f"against {kib['stored']:.0f} KiB; gradients differ by {static_difference:.1e}",
        ),
    ]


def rows() -> list[Row]:
    y0 = PLANETS_Y0
    np.testing.assert_allclose(simlab_verlet(y0), bare_verlet(y0), rtol=1e-9, atol=1e-12)
    times = best_seconds({"bare": lambda: bare_verlet(y0), "simlab": lambda: simlab_verlet(y0)})
    return [
        Row(
            "Hamiltonian: Verlet, simlab / bare lax.scan (throughput)",
            times["bare"] / times["simlab"],
            ">= 0.8",
            f"outer solar system, {SOLAR_STEPS} steps, float64",
        ),
        langevin_row(),
        kepler_row(),
        *adjoint_rows(),
    ]


if __name__ == "__main__":
    for row in rows():
        print(row)
