"""One check of the science of each capability, at tolerances that hold in float32.

Every test here is marked `accelerator`: it runs in the fast suite (float64 on the CPU) and,
with `SIMLAB_TEST_X64=0 pytest -m accelerator -p no:xdist`, in float32 on one accelerator
chip. States are in the default float dtype, so the same tests run in either precision;
the Pallas kernels get float32 explicitly (what a TPU takes). Kernels run in the Pallas
interpreter on a CPU and are compiled on an accelerator. The problems are small, so most of
the time is compiling.
"""

import functools as ft
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import GRAY_SCOTT_PARAMETERS
from jaxtyping import Array, Float

import simlab
import simlab.kernels as sk
from simlab.decomposition import Decomposed, decomposition_mesh
from simlab.integrate import brownian_path
from simlab.models import AbstractODEModel, parameter

pytestmark = pytest.mark.accelerator

FLOAT = jnp.asarray(1.0).dtype  # float64 with x64 on, float32 on an accelerator run
# Solver tolerances that float32 resolves (an rtol below 100 machine epsilons, 1.2e-5 in
# float32, chases roundoff), tight enough for the comparisons below in both precisions.
RTOL, ATOL = 3e-5, 1e-8


def _array(values):
    return jnp.asarray(values, dtype=FLOAT)


class Decay(AbstractODEModel):
    """dx/dt = -rate x: x(t) = x(0) exp(-rate t)."""

    rate: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return -self.rate * y


def oscillator(t, y, frequency):
    return jnp.stack([y[1], -(frequency**2) * y[0]])


# --- adaptive, fixed-step and stiff solves --------------------------------------------------
# Solves run under `jax.jit`, as they would in a program on an accelerator.


@jax.jit
@jax.value_and_grad
def _decay_at_5(rate):
    trajectory = simlab.simulate(
        Decay(rate=rate), _array([2.0]), _array([0.0, 5.0]), rtol=RTOL, atol=ATOL
    )
    return trajectory.ys[-1, 0]


OSCILLATOR_TS = jnp.linspace(0.0, 10.0, 21, dtype=FLOAT)


@jax.jit
def _oscillator_path(y0):
    return simlab.simulate(oscillator, y0, OSCILLATOR_TS, args=1.0, rtol=RTOL, atol=ATOL).ys


def test_adaptive_solves_match_exact_solutions_and_their_derivatives():
    # x(5) = 2 exp(-5 rate) and d x(5) / d rate = -5 x(5), through the solve in reverse mode.
    value, derivative = _decay_at_5(_array(0.7))
    assert value.dtype == FLOAT
    assert float(value) == pytest.approx(2.0 * np.exp(-3.5), rel=2e-4)
    assert float(derivative) == pytest.approx(-10.0 * np.exp(-3.5), rel=5e-4)
    ys = _oscillator_path(_array([1.0, 0.0]))
    np.testing.assert_allclose(ys[:, 0], jnp.cos(OSCILLATOR_TS), atol=5e-4)
    np.testing.assert_allclose(ys[:, 1], -jnp.sin(OSCILLATOR_TS), atol=5e-4)


@jax.jit
def _oscillator_batch(frequencies):
    def one(frequency):
        y0 = _array([1.0, 0.0])
        return simlab.simulate(oscillator, y0, OSCILLATOR_TS, args=frequency, rtol=RTOL, atol=ATOL)

    return jax.vmap(one)(frequencies)


def test_a_vmapped_adaptive_batch_saves_each_members_exact_solution():
    # Members with their own step sizes land on the 21 save times at different steps (on
    # a TPU the saves are written by selects, not a scatter): x = cos(w t), v = -w sin(w t).
    frequencies = jnp.linspace(0.5, 3.0, 64, dtype=FLOAT)
    batch = _oscillator_batch(frequencies)
    phases = frequencies[:, None] * OSCILLATOR_TS[None]
    np.testing.assert_allclose(batch.ys[..., 0], jnp.cos(phases), atol=2e-3)
    np.testing.assert_allclose(batch.ys[..., 1], -frequencies[:, None] * jnp.sin(phases), atol=5e-3)
    steps = np.asarray(batch.stats["num_steps"])
    assert steps[-1] > 2 * steps[0]  # the fastest member took its own, shorter steps


@ft.partial(jax.jit, static_argnames="integrator")
def _van_der_pol_ends(mus, integrator):
    def one(mu):
        y0, ts = _array([2.0, 0.0]), _array([0.0, 10.0])
        return simlab.simulate(
            simlab.models.VanDerPol(mu=mu), y0, ts, solver="heun", rtol=1e-4, atol=1e-4,
            dt0=1e-3, integrator=integrator, max_steps=20_000, throw=False,
        )  # fmt: skip

    batch = jax.vmap(one)(mus)
    return batch.ys[:, -1], batch.succeeded


def test_diffrax_ends_every_member_of_a_large_batch_where_the_lean_loop_does():
    # On a TPU v5e, 65,536 members (mu up to 10) is where Diffrax's interpolating save loop
    # left about 6,400 saves at t1 unwritten (inf); a CPU compiles it right, so it runs fewer.
    members = 2**16 if jax.default_backend() != "cpu" else 256
    mus = jnp.linspace(0.1, 10.0, members, dtype=FLOAT)
    diffrax_ends, diffrax_succeeded = _van_der_pol_ends(mus, "diffrax")
    lean_ends, lean_succeeded = _van_der_pol_ends(mus, "lean")
    assert np.all(diffrax_succeeded) and np.all(lean_succeeded)
    # Two Heun solves at rtol 1e-4 with different step-size controllers, after up to three
    # relaxation oscillations: they agree to about 1e-3.
    error = jnp.abs(diffrax_ends - lean_ends) / (1 + jnp.abs(lean_ends))
    assert float(jnp.max(error)) < 1e-2


@jax.jit
def _rk4_error(dt0):
    """The error of RK4 at t = 4 on the oscillator y'' = -y, with the step traced."""
    trajectory = simlab.simulate(
        oscillator, _array([1.0, 0.0]), _array([0.0, 4.0]), args=1.0, solver="rk4",
        adaptive=False, dt0=dt0, max_steps=256,
    )  # fmt: skip
    return jnp.max(jnp.abs(trajectory.ys[-1] - jnp.stack([jnp.cos(4.0), -jnp.sin(4.0)])))


def test_fixed_step_rk4_converges_at_fourth_order():
    steps = np.array([0.4, 0.2, 0.1])
    errors = np.array([float(_rk4_error(_array(h))) for h in steps])
    slope = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(slope - 4.0) < 0.3, (slope, errors)
    assert errors[-1] < 1e-5, errors


# Robertson's reaction at t = 40, the widely tabulated values (SciPy's Radau at rtol 1e-12
# agrees).
ROBERTSON_AT_40 = [0.7158270687, 9.185534764e-06, 0.2841637457]


@ft.partial(jax.jit, static_argnames="solver")
def _robertson(solver):
    ts = _array([0.0, 0.4, 4.0, 40.0])
    y0 = _array([1.0, 0.0, 0.0])
    return simlab.simulate(
        simlab.models.Robertson(), y0, ts, solver=solver, rtol=RTOL, atol=1e-10
    ).ys


@pytest.mark.parametrize("solver", ["rodas5p", "radau5"])
def test_stiff_solvers_match_robertson_at_t40_and_conserve_mass(solver):
    ys = _robertson(solver)
    np.testing.assert_allclose(ys[-1], ROBERTSON_AT_40, rtol=1e-4)
    # The reactions move mass between species: the total stays 1 up to roundoff.
    np.testing.assert_allclose(jnp.sum(ys, axis=1), 1.0, atol=1e-5)


# --- events ---------------------------------------------------------------------------------

GRAVITY = 9.81


def projectile(t, y, args):
    """Height and vertical velocity under gravity."""
    return jnp.stack([y[1], -GRAVITY * jnp.ones_like(y[1])])


def height(t, y, args):
    return y[0]


LANDING = simlab.Event(height, direction=-1)


def _landing(vz, solver):
    trajectory = simlab.simulate(
        projectile, jnp.stack([_array(2.0), vz]), _array([0.0, 1.0, 3.0]), event=LANDING,
        solver=solver, rtol=RTOL, atol=ATOL,
    )  # fmt: skip
    return trajectory.event_time, (trajectory.event_state, trajectory.ys)


_landing_only = jax.jit(_landing, static_argnames="solver")
_landing_and_derivative = jax.jit(
    jax.value_and_grad(_landing, has_aux=True), static_argnames="solver"
)


@pytest.mark.parametrize("solver", ["tsit5", "rodas5p"])
def test_the_landing_time_and_its_derivative_are_the_analytic_ones(solver):
    """From a height of 2 at an upward speed of 7: on Tsit5's steps with the derivative,
    and on Rodas5P's dense output."""
    vz = _array(7.0)
    if solver == "tsit5":
        (time, (state, ys)), derivative = _landing_and_derivative(vz, solver)
    else:
        (time, (state, ys)), derivative = _landing_only(vz, solver), None
    root = np.sqrt(7.0**2 + 2 * GRAVITY * 2.0)
    assert float(time) == pytest.approx((7.0 + root) / GRAVITY, rel=1e-5)
    np.testing.assert_allclose(state, [0.0, -root], atol=1e-4)
    assert np.isnan(np.asarray(ys[-1])).all()  # t = 3 lies after the landing
    if derivative is not None:
        # d(landing time)/d(vz) = (1 + vz / sqrt(vz^2 + 2 g z0)) / g, by the implicit
        # function theorem on the solution.
        assert float(derivative) == pytest.approx((1 + 7.0 / root) / GRAVITY, rel=1e-4)


# --- sweeps and fits ------------------------------------------------------------------------


def _final_state(trajectory):
    return {"final_state": trajectory.ys[-1]}


def test_a_sweep_in_padded_chunks_gives_each_member_its_exact_solution():
    rates, starts = np.array([0.2, 0.5, 0.8, 1.1, 1.4]), np.array([1.0, 3.0])
    result = simlab.sweep(
        Decay(rate=1.0), {"rate": rates, "x": starts}, _array([1.0]), _array([0.0, 1.0, 2.0]),
        observable=_final_state, chunk_size=4, progress=False, rtol=RTOL, atol=ATOL,
    )  # fmt: skip
    assert result.num_failed == 0
    assert result.stats["num_chunks"] == 3  # 10 members in chunks of 4: the last is padded
    rows = np.array([(rate, start) for rate in rates for start in starts])
    np.testing.assert_allclose(result.values, rows, rtol=1e-6)
    exact = rows[:, 1] * np.exp(-2.0 * rows[:, 0])
    np.testing.assert_allclose(result.observables["final_state"][:, 0], exact, rtol=2e-4)


def test_a_fit_recovers_the_rate_and_initial_value_of_a_decay_from_noiseless_data():
    ts = jnp.linspace(0.0, 4.0, 21, dtype=FLOAT)
    data = (2.0 * jnp.exp(-0.7 * ts))[:, None]
    result = simlab.fit(
        Decay(rate=0.4), ts, data, y0=_array([1.5]), params=["rate"], fit_y0=True,
        covariance=False,
    )  # fmt: skip
    assert bool(result.converged)
    assert result.params["rate"] == pytest.approx(0.7, rel=1e-4)
    np.testing.assert_allclose(result.y0, [2.0], rtol=1e-4)


class Drift(AbstractODEModel):
    """dx/dt = slope: x(t) = x(0) + slope t, linear in the slope. (test_sample.py has its
    twin, but imports matplotlib, which an accelerator machine lacks.)"""

    slope: Float[Array, ""] = parameter()
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return jnp.broadcast_to(self.slope, y.shape)


def test_a_posterior_matches_the_conjugate_closed_form():
    # A line observed with Gaussian noise of known sd, a Gaussian prior on its slope: the
    # posterior is the conjugate Gaussian. NUTS (BlackJAX) draws it, chains vmapped.
    import blackjax  # slow to import, as in simlab.sample: only this test needs it

    ts = jnp.linspace(0.0, 2.0, 10, dtype=FLOAT)
    sigma, prior_sd = 0.3, 0.5
    observations = 1.0 + 0.7 * ts + sigma * jax.random.normal(jax.random.key(0), ts.shape, FLOAT)
    result = simlab.fit(
        Drift(slope=0.1), ts, observations[:, None], y0=_array([1.0]), params=["slope"],
        noise_scale=sigma, simulate_options=dict(solver="rk4", adaptive=False, dt0=0.25),
    )  # fmt: skip
    prior = jax.tree_util.Partial(jax.scipy.stats.norm.logpdf, loc=0.0, scale=prior_sd)
    posterior = simlab.sample(
        result, priors={"slope": prior}, num_samples=1000, num_warmup=300, num_chains=4,
        key=jax.random.key(1),
    )  # fmt: skip
    t, y = np.asarray(ts, np.float64), np.asarray(observations, np.float64)
    precision = 1 / prior_sd**2 + np.sum(t**2) / sigma**2
    mean, sd = np.sum(t * (y - 1.0)) / sigma**2 / precision, precision**-0.5
    chains = posterior.samples["slope"]
    ess = float(blackjax.diagnostics.effective_sample_size(chains))
    assert chains.shape == (4, 1000) and ess > 400
    assert int(jnp.sum(posterior.divergent)) == 0
    # Monte Carlo error of the mean is sd / sqrt(ESS); of the sd about sd / sqrt(2 ESS).
    draws = np.asarray(chains, np.float64)
    assert abs(draws.mean() - mean) < 4 * sd / np.sqrt(ess)
    assert abs(draws.std() - sd) < 4 * sd / np.sqrt(2 * ess)


# --- stochastic paths -----------------------------------------------------------------------


@jax.jit
def _ornstein_uhlenbeck_ends(keys):
    model = simlab.models.OrnsteinUhlenbeck(theta=1.0, mu=0.3, sigma=0.5)

    def end(key):
        path = simlab.simulate(
            model, _array([2.3]), _array([0.0, 1.5]), key=key, adaptive=False, dt0=0.1,
            solver="sra1",
        )  # fmt: skip
        return path.ys[-1, 0]

    return jax.vmap(end)(keys)


def test_ornstein_uhlenbeck_paths_have_the_exact_mean_and_variance():
    """theta = 1, mu = 0.3, sigma = 0.5 from x = 2.3, SRA1 in steps of 0.1 to t = 1.5:
    4096 paths, whose mean and variance lie within 4 standard errors (99.99 %) of
    mu + (x0 - mu) e^{-theta t} and sigma^2 (1 - e^{-2 theta t}) / (2 theta)."""
    ends = _ornstein_uhlenbeck_ends(jax.random.split(jax.random.key(5), 4096))
    t, n = 1.5, ends.shape[0]
    mean = 0.3 + 2.0 * np.exp(-t)
    variance = 0.25 * (1 - np.exp(-2 * t)) / 2
    assert float(jnp.mean(ends)) == pytest.approx(mean, abs=4 * np.sqrt(variance / n))
    assert float(jnp.var(ends)) == pytest.approx(variance, abs=4 * variance * np.sqrt(2 / n))


GBM_TS = _array([0.0, 0.5, 1.0])
GBM_STEP = 2.0**-6


@jax.jit
def _gbm_strong_error(keys):
    """Mean |Milstein - exact| at t = 1 for geometric Brownian motion (mu = 0.5, sigma =
    0.8) in steps of 2^-6, the exact path y0 exp((mu - sigma^2/2) t + sigma W_t) on the
    solver's own W."""
    model = simlab.models.GeometricBrownianMotion(mu=0.5, sigma=0.8)

    def error(key):
        path = simlab.simulate(
            model, _array([1.0]), GBM_TS, key=key, adaptive=False, dt0=GBM_STEP,
            solver="milstein",
        )  # fmt: skip
        w = brownian_path(key, GBM_TS, GBM_STEP)[-1]
        return jnp.abs(path.ys[-1, 0] - jnp.exp((0.5 - 0.32) * GBM_TS[-1] + 0.8 * w))

    return jnp.mean(jax.vmap(error)(keys))


def test_an_expectation_and_its_pathwise_derivative():
    # Ornstein-Uhlenbeck from x0: E[X_T] = mu + (x0 - mu) exp(-theta T). The noise is
    # additive, so d X_T / d mu = 1 - exp(-theta T) on every path: the pathwise derivative
    # of the estimate has no sampling error, only the steps' (SRA1, steps of 0.01).
    theta, mu, x0, horizon = 1.0, 0.3, 2.3, 1.5

    def mean_at(mu):
        model = simlab.models.OrnsteinUhlenbeck(theta=theta, mu=mu, sigma=0.5)
        return simlab.expectation(
            model, _array([x0]), _array([0.0, horizon]), lambda path: path.ys[-1, 0],
            paths=4096, key=jax.random.key(3), dt0=0.01, solver="sra1",
        )  # fmt: skip

    estimate = jax.jit(mean_at)(_array(mu))
    exact = mu + (x0 - mu) * np.exp(-theta * horizon)
    assert abs(float(estimate.mean) - exact) < 4 * float(estimate.standard_error)
    derivative = jax.jit(jax.grad(lambda m: mean_at(m).mean))(_array(mu))
    assert float(derivative) == pytest.approx(1 - np.exp(-theta * horizon), rel=1e-4)


def test_milstein_follows_geometric_brownian_motion_on_its_own_path():
    """Milstein's strong error at this step is about 0.01 (order 1), Euler–Maruyama's 0.08
    (order 1/2): 256 paths tell them apart."""
    error = float(_gbm_strong_error(jax.random.split(jax.random.key(7), 256)))
    assert error < 2e-2, error


# --- symplectic orbits and differential-algebraic equations ---------------------------------

KEPLER_TS = jnp.linspace(0.0, 10 * 2 * np.pi, 401, dtype=FLOAT)  # ten periods of 2 pi


@jax.jit
def _kepler_orbit(y0):
    return simlab.simulate(
        simlab.models.Kepler(), y0, KEPLER_TS, solver="verlet", adaptive=False, dt0=0.005
    ).ys


def test_verlet_keeps_the_kepler_energy_bounded_and_the_angular_momentum_over_ten_orbits():
    model, eccentricity = simlab.models.Kepler(), 0.5
    speed = np.sqrt((1 + eccentricity) / (1 - eccentricity))
    y0 = _array([1 - eccentricity, 0.0, 0.0, speed])  # perihelion, semi-major axis 1
    ys = _kepler_orbit(y0)
    energy_error = np.abs(np.asarray(model.energy(ys) - model.energy(y0)))
    # Bounded: as large over the last orbit as over the first (no drift), and small.
    assert energy_error.max() < 1e-4, energy_error.max()
    assert energy_error[-40:].max() < 1.5 * energy_error[1:41].max()
    # Verlet conserves the angular momentum exactly: what changes is roundoff.
    np.testing.assert_allclose(model.angular_momentum(ys), model.angular_momentum(y0), rtol=1e-4)
    # Back at perihelion after each period, up to the phase error of the step.
    np.testing.assert_allclose(ys[-1], y0, atol=2e-2)


@jax.jit
def _pendulum_dae(y0):
    """The pendulum DAE on Rodas5P (the default for a mass matrix) to t = 3."""
    trajectory = simlab.simulate(
        simlab.models.PendulumDAE(), y0, jnp.linspace(0.0, 3.0, 31, dtype=FLOAT),
        rtol=RTOL, atol=1e-7,
    )  # fmt: skip
    return trajectory.ys


def test_the_pendulum_dae_holds_its_constraint_and_energy():
    angle, speed = 0.3, 1.0  # from the downward vertical; speed along the circle
    x, y = np.sin(angle), -np.cos(angle)
    state = _array([x, y, speed * np.cos(angle), speed * np.sin(angle), 0.0])  # tension: solved
    ys = np.asarray(_pendulum_dae(state))
    # Consistent initialisation finds the tension u^2 + v^2 - g y (unit mass and length).
    assert ys[0, 4] == pytest.approx(speed**2 - 9.81 * y, rel=1e-5)
    assert np.max(np.abs(ys[:, 0] ** 2 + ys[:, 1] ** 2 - 1.0)) < 1e-4
    energy = 0.5 * (ys[:, 2] ** 2 + ys[:, 3] ** 2) + 9.81 * ys[:, 1]
    assert np.max(np.abs(energy - energy[0])) < 1e-3


# --- incompressible flow --------------------------------------------------------------------

FLOW_GRID = simlab.Grid((32, 32), extent=2 * np.pi)


@eqx.filter_jit
def _taylor_green_error(model):
    w0 = simlab.models.taylor_green_vorticity(FLOW_GRID).astype(FLOAT)
    ys = simlab.simulate(
        model, w0, _array([0.0, 1.0, 2.0]), solver="etdrk4", adaptive=False, dt0=0.1
    ).ys
    exact = simlab.models.taylor_green_vorticity(
        FLOW_GRID, time=2.0, viscosity=model.viscosity, drag=model.drag
    )
    return jnp.linalg.norm(ys[-1] - exact) / jnp.linalg.norm(exact)


@eqx.filter_jit
def _energy_rate_and_budget(model):
    """dE/dt of a turbulent field under the model, and -2 nu Z - 2 alpha E."""
    turbulent = simlab.models.random_vorticity(jax.random.key(1), FLOW_GRID, peak_wavenumber=3.0)
    turbulent = turbulent.astype(FLOAT)
    _, rate = jax.jvp(
        lambda w: simlab.grid.kinetic_energy(w, FLOW_GRID),
        (turbulent,),
        (model(0.0, turbulent, None),),
    )
    energy = simlab.grid.kinetic_energy(turbulent, FLOW_GRID)
    enstrophy = simlab.grid.enstrophy(turbulent, FLOW_GRID)
    return rate, -2 * model.viscosity * enstrophy - 2 * model.drag * energy


def test_taylor_green_decays_at_its_exact_rate_and_energy_at_twice_viscosity_times_enstrophy():
    model = simlab.models.NavierStokes2D(grid=FLOW_GRID, viscosity=0.05, drag=0.1)
    # ETDRK4 integrates the decay exactly: the error is the roundoff of 20 steps' FFTs
    # (3e-5 on a TPU v5e in float32, where a rate 1 % off would leave 3e-3).
    assert float(_taylor_green_error(model)) < 1e-4
    # Advection moves energy between modes and conserves it: an unforced turbulent field
    # loses energy at dE/dt = -2 nu Z - 2 alpha E.
    rate, budget = _energy_rate_and_budget(model)
    assert float(rate) == pytest.approx(float(budget), rel=1e-4)


# --- a decomposed grid on one device --------------------------------------------------------


def _walled_heat():
    grid = simlab.Grid(
        (16, 12),
        extent=(1.6, 1.2),
        boundary=[(simlab.Dirichlet(1.0), simlab.Neumann(0.5)), "periodic"],
    )
    return simlab.models.Heat(diffusivity=0.3, grid=grid)


@eqx.filter_jit
def _heat_path(model, y0):
    return simlab.simulate(
        model, y0, _array([0.0, 0.02, 0.04]), solver="rk4", adaptive=False, dt0=0.005,
        throw=False,
    ).ys  # fmt: skip


def test_a_decomposed_solve_on_one_device_equals_the_plain_one():
    model = _walled_heat()
    x, y = model.grid.mesh()
    y0 = (jnp.sin(3 * x) * jnp.cos(2 * np.pi * y / 1.2) + x).astype(FLOAT)
    decomposed = Decomposed(model, decomposition_mesh((1,)))
    ys = _heat_path(model, y0)
    split = _heat_path(decomposed, decomposed.shard(y0))
    assert float(jnp.max(jnp.abs(ys[-1] - y0))) > 1e-2  # heat flowed
    np.testing.assert_allclose(split, ys, rtol=1e-5, atol=1e-5)


# --- Pallas kernels against their XLA references --------------------------------------------

F32 = jnp.float32


def _random(shape, seed=0):
    return jax.random.normal(jax.random.key(seed), shape, dtype=F32)


def _assert_close(actual, expected, tolerance=2e-5):
    """Equal to float32 roundoff of the largest value (summation orders differ)."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype == F32
    assert np.isfinite(np.asarray(actual)).all() and np.isfinite(np.asarray(expected)).all()
    scale = float(jnp.max(jnp.abs(expected))) + 1.0
    np.testing.assert_allclose(actual, expected, rtol=0, atol=tolerance * scale)


def _values_and_gradients(kernel, reference, *primals):
    """Each function's value at `primals`, and the gradient with respect to every argument
    of a weighted sum of it (fixed random weights: the kernel's transpose on them), compiled."""
    weights = jax.random.normal(jax.random.key(99), jax.eval_shape(reference, *primals).shape, F32)
    argnums = tuple(range(len(primals)))

    def derivatives(fn):
        gradient = jax.grad(lambda *p: jnp.sum(weights * fn(*p)), argnums=argnums)
        return fn(*primals), gradient(*primals)

    return jax.jit(lambda: derivatives(kernel))(), jax.jit(lambda: derivatives(reference))()


LAPLACIAN_CASES = {
    "2d 64x64 order 2": ((64, 64), 2),
    "2d 37x130 order 4": ((37, 130), 4),
    "3d 13x70x50 order 2": ((13, 70, 50), 2),
}


@pytest.mark.parametrize("case", LAPLACIAN_CASES)
def test_laplacian_kernels_and_their_gradients_equal_the_reference(case):
    interior, order = LAPLACIAN_CASES[case]
    width = order // 2
    padded = _random(tuple(n + 2 * width for n in interior))
    spacing = (0.5, 0.7, 0.6)[: len(interior)]
    kernel, reference = {
        2: (sk.laplacian2d, sk.laplacian2d_reference),
        3: (sk.laplacian3d, sk.laplacian3d_reference),
    }[len(interior)]
    (value, gradient), (expected, expected_gradient) = _values_and_gradients(
        ft.partial(kernel, spacing=spacing, order=order),
        ft.partial(reference, spacing=spacing, order=order),
        padded,
    )
    assert value.shape == interior
    _assert_close(value, expected)
    _assert_close(gradient[0], expected_gradient[0])


GRAY_SCOTT_DIFFUSIVITIES = (
    GRAY_SCOTT_PARAMETERS["diffusivity_u"],
    GRAY_SCOTT_PARAMETERS["diffusivity_v"],
)
GRAY_SCOTT_RATES = (GRAY_SCOTT_PARAMETERS["feed_rate"], GRAY_SCOTT_PARAMETERS["kill_rate"])


def test_fused_reaction_diffusion_and_its_gradients_equal_the_reference():
    grid = simlab.Grid((64, 64), extent=64.0)
    state = jax.random.uniform(jax.random.key(2), (2, *grid.shape), dtype=F32)
    padded = simlab.grid.pad(state, grid, 1)
    params = jnp.array([*GRAY_SCOTT_DIFFUSIVITIES, *GRAY_SCOTT_RATES], F32)

    def tendency(fn):
        def value(padded, q):
            fields = (q[0], q[1]), (q[2], q[3])
            return fn(padded, grid.spacing, *fields, reaction_fn=simlab.models.GrayScott.reaction)

        return value

    (value, gradients), (expected, expected_gradients) = _values_and_gradients(
        tendency(sk.reaction_diffusion), tendency(sk.reaction_diffusion_reference), padded, params
    )
    _assert_close(value, expected)
    for got, want in zip(gradients, expected_gradients, strict=True):
        _assert_close(got, want, tolerance=1e-4 if want.ndim == 1 else 2e-5)


def test_blocked_heat_steps_and_their_gradients_equal_single_steps():
    grid = simlab.Grid((64, 64), extent=(6.4, 6.4), boundary=[simlab.Dirichlet(1.0), "neumann"])

    def steps(fn, **settings):
        def run(field, diffusivity):
            return fn(
                field, grid.spacing, pad_fn=lambda f, w: simlab.grid.pad(f, grid, w),
                diffusivity=diffusivity, dt=0.002, num_steps=8, **settings,
            )  # fmt: skip

        return run

    field = _random(grid.shape, seed=3)
    (value, gradients), (expected, expected_gradients) = _values_and_gradients(
        steps(sk.heat_steps, steps_per_launch=4), steps(sk.heat_steps_reference), field, F32(1.0)
    )
    assert float(jnp.max(jnp.abs(value - field))) > 0.1  # the field did diffuse
    _assert_close(value, expected)
    _assert_close(gradients[0], expected_gradients[0])
    assert float(gradients[1]) == pytest.approx(float(expected_gradients[1]), rel=1e-4)


def test_mac_momentum_kernel_and_its_gradients_equal_the_reference():
    velocity = _random((2, 48, 70), seed=4)
    padded = jnp.pad(velocity, ((0, 0), (1, 1), (1, 1)), mode="wrap")
    spacing = (1 / 48, 1 / 70)
    (value, gradients), (expected, expected_gradients) = _values_and_gradients(
        lambda p, nu, force: sk.mac_momentum(p, spacing, nu, force),
        lambda p, nu, force: sk.mac_momentum_reference(p, spacing, nu, force),
        padded,
        F32(0.01),
        F32(0.5),
    )
    assert value.shape == velocity.shape
    _assert_close(value, expected)
    _assert_close(gradients[0], expected_gradients[0])
    for got, want in zip(gradients[1:], expected_gradients[1:], strict=True):
        assert float(got) == pytest.approx(float(want), rel=1e-4)


# --- grid models: impl="pallas" against impl="xla" ------------------------------------------
# In the default float dtype: float32 on an accelerator, where the kernels compile.


def _model_solve(model, y0):
    """Explicit Euler steps; the sum of squares of the final state, and the saved states."""
    trajectory = simlab.simulate(
        model, y0, _array([0.0, 1.0, 2.0]), solver="euler", adaptive=False, dt0=0.25
    )
    return jnp.sum(trajectory.ys[-1] ** 2), trajectory.ys


_model_path = eqx.filter_jit(lambda model, y0: _model_solve(model, y0)[1])
_model_path_and_gradient = eqx.filter_jit(eqx.filter_value_and_grad(_model_solve, has_aux=True))


def _assert_close_in_the_default_dtype(actual, expected):
    assert actual.dtype == expected.dtype == FLOAT
    assert np.isfinite(np.asarray(actual)).all() and np.isfinite(np.asarray(expected)).all()
    scale = float(jnp.max(jnp.abs(expected))) + 1.0
    np.testing.assert_allclose(actual, expected, rtol=0, atol=2e-5 * scale)


def test_gray_scott_with_the_pallas_kernel_and_its_gradient_equal_xla():
    grid = simlab.Grid((64, 64), extent=64.0)
    x, y = grid.mesh()
    seed = jnp.exp(-((x - 30.0) ** 2 + (y - 34.0) ** 2) / 20.0)
    y0 = jnp.stack([1.0 - 0.5 * seed, 0.25 * seed]).astype(FLOAT)
    solves = [
        _model_path_and_gradient(
            simlab.models.GrayScott(**GRAY_SCOTT_PARAMETERS, grid=grid, impl=impl), y0
        )
        for impl in ("pallas", "xla")
    ]
    ((_, pallas), pallas_gradient), ((_, xla), xla_gradient) = solves
    assert float(jnp.max(jnp.abs(pallas[-1] - y0))) > 1e-3  # the state did evolve
    _assert_close_in_the_default_dtype(pallas, xla)
    # Reverse mode through the solve and the kernel's derivative, wrt the feed rate.
    assert float(pallas_gradient.feed_rate) == pytest.approx(
        float(xla_gradient.feed_rate), rel=1e-4
    )


def test_heat_with_the_pallas_kernel_equals_xla():
    grid = simlab.Grid((64, 64), extent=64.0, boundary=[simlab.Dirichlet(1.0), "neumann"])
    y0 = jax.random.normal(jax.random.key(5), grid.shape, dtype=FLOAT)
    pallas, xla = (
        _model_path(simlab.models.Heat(diffusivity=0.5, grid=grid, impl=impl), y0)
        for impl in ("pallas", "xla")
    )
    assert float(jnp.max(jnp.abs(pallas[-1] - y0))) > 1e-2  # heat flowed
    _assert_close_in_the_default_dtype(pallas, xla)


def test_a_fixed_point_its_stability_and_its_gradient():
    # Lotka-Volterra's interior fixed point (gamma / delta, alpha / beta) is a centre with
    # eigenvalues +-i sqrt(alpha gamma); a TPU has no nonsymmetric eigensolver, so there
    # they come from the host, and the derivatives through them are simlab's own rule.
    lv = dict(alpha=0.55, beta=0.028, gamma=0.84, delta=0.026)

    def fixed_point(alpha, gamma):
        model = simlab.models.LotkaVolterra(**{**lv, "alpha": alpha, "gamma": gamma})
        return simlab.steady_state(model, _array([30.0, 20.0]))

    point = jax.jit(fixed_point)(_array(lv["alpha"]), _array(lv["gamma"]))
    assert bool(point.succeeded) and point.label == "hopf_pair"
    expected = [lv["gamma"] / lv["delta"], lv["alpha"] / lv["beta"]]
    np.testing.assert_allclose(point.state, expected, rtol=1e-5)
    frequency = np.sqrt(lv["alpha"] * lv["gamma"])
    np.testing.assert_allclose(np.sort(point.eigenvalues.imag), [-frequency, frequency], rtol=1e-5)
    # d(state) / d(alpha, gamma) = [[0, 1 / delta], [1 / beta, 0]] (implicit differentiation).
    jacobian = jax.jacrev(lambda a, g: fixed_point(a, g).state, argnums=(0, 1))(
        _array(lv["alpha"]), _array(lv["gamma"])
    )
    exact = [[0.0, 1 / lv["delta"]], [1 / lv["beta"], 0.0]]
    np.testing.assert_allclose(np.stack(jacobian, -1), exact, rtol=1e-4, atol=1e-4)
    # The frequency's derivative goes through the eigenvalues: d sqrt(a g) / da = g / 2 sqrt(a g).
    derivative = jax.grad(lambda a: jnp.max(fixed_point(a, _array(lv["gamma"])).eigenvalues.imag))(
        _array(lv["alpha"])
    )
    assert float(derivative) == pytest.approx(lv["gamma"] / (2 * frequency), rel=1e-4)


def test_the_brusselators_hopf_point_is_at_one_plus_a_squared():
    # Its fixed point (a, b / a) loses stability to a complex pair at b = 1 + a**2.
    model = simlab.models.Brusselator(a=1.0, b=1.0)
    points = jax.vmap(
        lambda b: simlab.steady_state(eqx.tree_at(lambda m: m.b, model, b), _array([1.0, 1.0]))
    )(_array([1.5, 2.5]))
    assert list(points.label) == ["stable", "oscillatory"]
    branch = simlab.continuation(
        model, "b", np.linspace(1.0, 3.0, 21), _array([1.0, 1.0]), oscillations=False
    )
    assert [point.kind for point in branch.bifurcations] == ["hopf"]
    assert float(branch.bifurcations[0].value) == pytest.approx(2.0, abs=1e-4)


def test_a_circuits_operating_point_and_the_eigenvalues_of_its_pencil():
    # A DAE (Kirchhoff's law is algebraic): the eigenvalues solve J v = lambda M v, found by
    # shift and invert, one infinite for the algebraic direction. The RLC circuit's DC point
    # holds the source voltage on the capacitor; its pair is -R / 2L +- i sqrt(1/LC - (R/2L)^2).
    circuit = simlab.models.RLCCircuit(
        resistance=1.0, inductance=0.5, capacitance=0.25, voltage=2.0
    )
    point = jax.jit(simlab.steady_state)(circuit, _array([1.0, 0.1, 0.1]))
    assert bool(point.succeeded) and point.label == "stable"
    np.testing.assert_allclose(point.state, [2.0, 0.0, 0.0], atol=1e-5)
    eigenvalues = np.asarray(point.eigenvalues)
    finite = np.sort_complex(eigenvalues[np.isfinite(eigenvalues)])
    decay, frequency = 1.0, np.sqrt(8.0 - 1.0)
    np.testing.assert_allclose(
        finite, [-decay - 1j * frequency, -decay + 1j * frequency], rtol=1e-5
    )
    assert np.sum(~np.isfinite(eigenvalues)) == 1
