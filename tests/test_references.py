"""simlab against references written here from the equations, not from simlab itself.

Every vector field is compared with its docstring's formula written out in NumPy; the
integrators with the analytic solution of a forced oscillator; the fit's optimum,
covariance and prediction band with SciPy's `curve_fit` and a finite-difference delta
method; the stencils with exact shifts and a manufactured solution.
"""

import math
from typing import ClassVar
from unittest import mock

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.optimize
from jaxtyping import Array, Float

import simlab
from simlab import models
from simlab.integrate import _loops
from simlab.models import AbstractODEModel, parameter

RNG_SEED = 20261202


# --- ODE vector fields against the docstring equations ----------------------------------


def lotka_volterra(y, alpha, beta, gamma, delta):
    x, p = y
    return [alpha * x - beta * x * p, delta * x * p - gamma * p]


def lorenz(y, sigma, rho, beta):
    x, y_, z = y
    return [sigma * (y_ - x), x * (rho - z) - y_, x * y_ - beta * z]


def sir(y, beta, gamma, population):
    s, i, _ = y
    return [-beta * s * i / population, beta * s * i / population - gamma * i, gamma * i]


def damped_pendulum(y, length, damping, gravity):
    theta, omega = y
    return [omega, -gravity / length * math.sin(theta) - damping * omega]


def van_der_pol(y, mu):
    x, v = y
    return [v, mu * (1 - x**2) * v - x]


def robertson(y, k1, k2, k3):
    y1, y2, y3 = y
    return [-k1 * y1 + k3 * y2 * y3, k1 * y1 - k2 * y2**2 - k3 * y2 * y3, k2 * y2**2]


ODE_FORMULAS = [
    (models.LotkaVolterra, lotka_volterra, ("alpha", "beta", "gamma", "delta"), 2),
    (models.Lorenz, lorenz, ("sigma", "rho", "beta"), 3),
    (models.SIR, sir, ("beta", "gamma", "population"), 3),
    (models.DampedPendulum, damped_pendulum, ("length", "damping", "gravity"), 2),
    (models.VanDerPol, van_der_pol, ("mu",), 2),
    (models.Robertson, robertson, ("k1", "k2", "k3"), 3),
]


@pytest.mark.parametrize(("cls", "formula", "names", "size"), ODE_FORMULAS)
def test_ode_vector_fields_equal_their_equations(cls, formula, names, size):
    rng = np.random.default_rng(RNG_SEED)
    for _ in range(3):
        values = {
            name: float(v) for name, v in zip(names, rng.uniform(0.2, 3.0, len(names)), strict=True)
        }
        y = rng.uniform(-2.0, 5.0, size)
        got = cls(**values)(rng.uniform(0, 10), jnp.asarray(y), None)
        np.testing.assert_allclose(got, formula(y, **values), rtol=1e-13, atol=1e-13)


def test_hybrid_model_adds_the_scaled_network_to_the_physics():
    physics = models.LotkaVolterra(alpha=0.55, beta=0.028, gamma=0.84, delta=0.026)
    model = models.HybridModel(
        physics, key=jr.key(0), width=5, depth=2, state_scale=(30.0, 5.0), correction_scale=0.7
    )
    keys = jr.split(jr.key(1), len(model.correction.layers))
    # Random weights everywhere, the last layer's too (it starts at zero).
    layers = [
        (jr.normal(k, layer.weight.shape), jr.normal(jr.fold_in(k, 1), layer.bias.shape))
        for k, layer in zip(keys, model.correction.layers, strict=True)
    ]
    model = eqx.tree_at(
        lambda m: [leaf for layer in m.correction.layers for leaf in (layer.weight, layer.bias)],
        model,
        [leaf for pair in layers for leaf in pair],
    )
    y = np.array([20.0, 6.0])
    hidden = y / np.array([30.0, 5.0])
    for index, (weight, bias) in enumerate(layers):
        hidden = np.asarray(weight) @ hidden + np.asarray(bias)
        if index < len(layers) - 1:
            hidden = np.tanh(hidden)
    expected = np.array(lotka_volterra(y, 0.55, 0.028, 0.84, 0.026)) + 0.7 * hidden
    np.testing.assert_allclose(model(0.0, jnp.asarray(y), None), expected, rtol=1e-12)


# --- PDE vector fields: NumPy stencils with hand-made ghost cells -----------------------


def ghost_padded(u, conditions, spacing):
    """`u` with one ghost cell per side of each trailing axis, from the conditions' formulas:
    periodic copies the far side, Dirichlet g gives 2g - u, Neumann q gives u + q h."""
    ndim = len(conditions)
    for axis, ((low, high), h) in enumerate(zip(conditions, spacing, strict=True)):
        array_axis = u.ndim - ndim + axis
        first = np.take(u, [0], axis=array_axis)
        last = np.take(u, [-1], axis=array_axis)
        ghosts = []
        for condition, mirror, opposite in ((low, first, last), (high, last, first)):
            kind, value = condition
            if kind == "periodic":
                ghosts.append(opposite)
            elif kind == "dirichlet":
                ghosts.append(2 * value - mirror)
            else:
                ghosts.append(mirror + value * h)
        u = np.concatenate([ghosts[0], u, ghosts[1]], axis=array_axis)
    return u


def neighbours(p, axis, ndim):
    """(u_{i-1}, u_i, u_{i+1}) along spatial `axis` of a ghost-padded array."""
    inner = [slice(1, -1)] * ndim
    lead = (Ellipsis,)
    views = []
    for start, stop in ((0, -2), (1, -1), (2, None)):
        index = list(inner)
        index[axis] = slice(start, stop)
        views.append(p[lead + tuple(index)])
    return views


def laplacian2(u, conditions, spacing):
    p = ghost_padded(u, conditions, spacing)
    ndim = len(spacing)
    total = 0.0
    for axis, h in enumerate(spacing):
        low, centre, high = neighbours(p, axis, ndim)
        total = total + (high - 2 * centre + low) / h**2
    return total


def laplacian4_periodic(u, spacing):
    ndim = len(spacing)
    total = 0.0
    for axis, h in enumerate(spacing):
        a = u.ndim - ndim + axis

        def r(k, a=a):
            return np.roll(u, -k, axis=a)

        total = total + (-r(-2) + 16 * r(-1) - 30 * u + 16 * r(1) - r(2)) / (12 * h**2)
    return total


def coefficient_conditions(conditions):
    return [
        (("periodic", 0.0),) * 2 if low[0] == "periodic" else (("neumann", 0.0),) * 2
        for low, _ in conditions
    ]


def variable_diffusion(u, diffusivity, conditions, spacing):
    p = ghost_padded(u, conditions, spacing)
    d = ghost_padded(diffusivity, coefficient_conditions(conditions), spacing)
    ndim = len(spacing)
    total = 0.0
    for axis, h in enumerate(spacing):
        u_low, u_c, u_high = neighbours(p, axis, ndim)
        d_low, d_c, d_high = neighbours(d, axis, ndim)
        total = (
            total + ((d_c + d_high) / 2 * (u_high - u_c) - (d_c + d_low) / 2 * (u_c - u_low)) / h**2
        )
    return total


def upwind_advection(u, velocity, conditions, spacing):
    """(v·∇)u with one-sided differences from where the flow comes (v per axis, or fields)."""
    p = ghost_padded(u, conditions, spacing)
    ndim = len(spacing)
    total = 0.0
    for axis, h in enumerate(spacing):
        low, centre, high = neighbours(p, axis, ndim)
        v = velocity[axis]
        total = total + np.where(v > 0, v * (centre - low) / h, v * (high - centre) / h)
    return total


def central_advection(u, velocity, conditions, spacing):
    p = ghost_padded(u, conditions, spacing)
    ndim = len(spacing)
    total = 0.0
    for axis, h in enumerate(spacing):
        low, _, high = neighbours(p, axis, ndim)
        total = total + velocity[axis] * (high - low) / (2 * h)
    return total


def condition(entry):
    kind, value = entry
    return {
        "periodic": simlab.Periodic,
        "dirichlet": simlab.Dirichlet,
        "neumann": simlab.Neumann,
    }[kind](*(() if kind == "periodic" else (value,)))


def make_grid(shape, spacing, conditions):
    return simlab.Grid(
        shape,
        spacing=spacing,
        boundary=[(condition(low), condition(high)) for low, high in conditions],
    )


PERIODIC = (("periodic", 0.0), ("periodic", 0.0))
WALLS = (("dirichlet", 0.3), ("neumann", -0.7))
LAYOUTS = [
    ((7,), (0.3,), [PERIODIC]),
    ((7,), (0.3,), [WALLS]),
    ((5, 6), (0.4, 0.25), [PERIODIC, WALLS]),
    ((6, 5), (0.2, 0.5), [(("neumann", 0.5), ("dirichlet", -1.0)), PERIODIC]),
]


@pytest.fixture(params=LAYOUTS, ids=["1d-periodic", "1d-walls", "2d-mixed", "2d-mixed-swapped"])
def layout(request):
    shape, spacing, conditions = request.param
    rng = np.random.default_rng(RNG_SEED)
    return shape, spacing, conditions, make_grid(shape, spacing, conditions), rng


def test_heat_vector_field_equals_the_stencil_formulas(layout):
    shape, spacing, conditions, grid, rng = layout
    u = rng.normal(size=shape)
    got = models.Heat(diffusivity=0.7, grid=grid, impl="xla")(0.0, jnp.asarray(u), None)
    np.testing.assert_allclose(got, 0.7 * laplacian2(u, conditions, spacing), rtol=1e-12)
    field = rng.uniform(0.5, 2.0, shape)
    got = models.Heat(diffusivity=jnp.asarray(field), grid=grid, impl="xla")(0.0, u, None)
    expected = variable_diffusion(u, field, conditions, spacing)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_fourth_order_heat_and_wave_equal_the_five_point_stencil():
    shape, spacing = (9, 8), (0.3, 0.2)
    grid = make_grid(shape, spacing, [PERIODIC, PERIODIC])
    rng = np.random.default_rng(RNG_SEED)
    u, w = rng.normal(size=shape), rng.normal(size=shape)
    heat = models.Heat(diffusivity=0.4, grid=grid, order=4, impl="xla")
    np.testing.assert_allclose(heat(0.0, u, None), 0.4 * laplacian4_periodic(u, spacing), 1e-12)
    wave = models.Wave(wave_speed=1.7, grid=grid, order=4, impl="xla")
    got = wave(0.0, jnp.stack([u, w]), None)
    np.testing.assert_allclose(got[0], w, rtol=1e-14)
    np.testing.assert_allclose(got[1], 1.7**2 * laplacian4_periodic(u, spacing), rtol=1e-12)


def test_wave_vector_field_equals_its_first_order_system(layout):
    shape, spacing, conditions, grid, rng = layout
    u, w, c = rng.normal(size=shape), rng.normal(size=shape), rng.uniform(0.5, 2.0, shape)
    got = models.Wave(wave_speed=jnp.asarray(c), grid=grid, impl="xla")(
        0.0, jnp.stack([u, w]), None
    )
    np.testing.assert_allclose(got[0], w, rtol=1e-14)
    np.testing.assert_allclose(got[1], c**2 * laplacian2(u, conditions, spacing), rtol=1e-12)


@pytest.mark.parametrize("scheme", ["upwind", "central"])
def test_advection_diffusion_vector_field_equals_the_formulas(layout, scheme):
    shape, spacing, conditions, grid, rng = layout
    ndim = len(shape)
    u = rng.normal(size=shape)
    advect = upwind_advection if scheme == "upwind" else central_advection
    # Constant velocities of both signs, then a velocity field that changes sign.
    for velocity in (rng.uniform(0.5, 2.0, ndim) * np.array([1, -1])[:ndim], None):
        if velocity is None:
            velocity = rng.normal(size=(ndim, *shape))
            broadcast = velocity
        else:
            broadcast = velocity.reshape((ndim,) + (1,) * ndim) * np.ones((ndim, *shape))
        model = models.AdvectionDiffusion(
            diffusivity=0.3, velocity=jnp.asarray(velocity), grid=grid, scheme=scheme, impl="xla"
        )
        expected = 0.3 * laplacian2(u, conditions, spacing) - advect(
            u, broadcast, conditions, spacing
        )
        np.testing.assert_allclose(model(0.0, u, None), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("scheme", ["upwind", "central"])
def test_burgers_vector_field_equals_the_formulas(layout, scheme):
    shape, spacing, conditions, grid, rng = layout
    ndim = len(shape)
    advect = upwind_advection if scheme == "upwind" else central_advection
    model = models.Burgers(viscosity=0.2, grid=grid, scheme=scheme, impl="xla")
    if ndim == 1:
        u = rng.normal(size=shape)
        transport = advect(u, u[None], conditions, spacing)
        expected = 0.2 * laplacian2(u, conditions, spacing) - transport
    else:
        u = rng.normal(size=(ndim, *shape))
        expected = 0.2 * laplacian2(u, conditions, spacing) - advect(u, u, conditions, spacing)
    np.testing.assert_allclose(model(0.0, u, None), expected, rtol=1e-12, atol=1e-12)


def test_gray_scott_vector_field_equals_its_equations(layout):
    shape, spacing, conditions, grid, rng = layout
    u, v = rng.uniform(0, 1, shape), rng.uniform(0, 1, shape)
    feed, kill, du, dv = 0.035, 0.065, 0.2, rng.uniform(0.05, 0.15, shape)
    model = models.GrayScott(
        feed_rate=feed,
        kill_rate=kill,
        diffusivity_u=du,
        diffusivity_v=jnp.asarray(dv),
        grid=grid,
        impl="xla",
    )
    got = model(0.0, jnp.stack([u, v]), None)
    expected_u = du * laplacian2(u, conditions, spacing) - u * v**2 + feed * (1 - u)
    expected_v = variable_diffusion(v, dv, conditions, spacing) + u * v**2 - (feed + kill) * v
    np.testing.assert_allclose(got[0], expected_u, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[1], expected_v, rtol=1e-12, atol=1e-12)


# --- advection direction: upwind Euler at Courant number 1 is an exact shift ------------


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_upwind_euler_at_courant_number_one_shifts_the_field_by_one_cell(sign):
    shape, spacing = (8, 6), (0.25, 0.5)
    grid = make_grid(shape, spacing, [PERIODIC, PERIODIC])
    u = np.random.default_rng(RNG_SEED).normal(size=shape)
    for axis in range(2):
        speed = np.zeros(2)
        speed[axis] = sign * 3.0
        model = models.AdvectionDiffusion(
            diffusivity=0.0, velocity=jnp.asarray(speed), grid=grid, impl="xla"
        )
        dt = spacing[axis] / 3.0  # |v| dt / h = 1
        stepped = u + dt * np.asarray(model(0.0, jnp.asarray(u), None))
        np.testing.assert_allclose(stepped, np.roll(u, int(sign), axis=axis), atol=1e-12)


def test_upwind_advection_of_a_step_creates_no_new_extrema():
    grid = simlab.Grid((64,), extent=1.0)
    (x,) = grid.coordinates()
    step = jnp.where((x > 0.35) & (x < 0.65), 1.0, 0.0)
    for speed in (0.8, -0.8):
        model = models.AdvectionDiffusion(
            diffusivity=0.0, velocity=jnp.array([speed]), grid=grid, impl="xla"
        )
        dt = 0.5 * grid.spacing[0] / abs(speed)  # forward Euler, Courant number 0.5
        ys = simlab.simulate(
            model, step, jnp.linspace(0.0, 0.25, 6), solver="euler", dt0=dt, adaptive=False
        ).ys
        assert float(ys.min()) >= -1e-12 and float(ys.max()) <= 1 + 1e-12
        # The mass moved downstream: the centre of mass follows the flow.
        centre = float(jnp.sum(x * ys[-1]) / jnp.sum(ys[-1]))
        np.testing.assert_allclose(centre, 0.5 + 0.25 * speed, atol=0.01)


# --- variable-coefficient diffusion: a manufactured solution, second order -------------


def manufactured_error(num_points, two_d):
    """max |∇·(D∇u) - exact| for u = cos(2πx) (· cos(2πy)), D = 1 + sin²-like fields."""
    shape = (num_points, num_points) if two_d else (num_points,)
    grid = simlab.Grid(shape, extent=1.0)
    if two_d:
        x, y = grid.mesh()
        k = 2 * np.pi
        u = np.cos(k * x) * np.cos(k * y)
        d = 1.5 + np.sin(k * x) * np.cos(k * y)
        ux, uy = -k * np.sin(k * x) * np.cos(k * y), -k * np.cos(k * x) * np.sin(k * y)
        dx, dy = k * np.cos(k * x) * np.cos(k * y), -k * np.sin(k * x) * np.sin(k * y)
        exact = dx * ux + dy * uy + d * (-2 * k**2 * u)
    else:
        (x,) = grid.coordinates()
        k = 2 * np.pi
        u, d = np.cos(k * x), 1.5 + np.sin(k * x)
        exact = k * np.cos(k * x) * (-k * np.sin(k * x)) + d * (-(k**2) * u)
    got = simlab.grid.diffusion(jnp.asarray(u), jnp.asarray(d), grid, impl="xla")
    return float(np.max(np.abs(np.asarray(got) - exact)))


@pytest.mark.parametrize("two_d", [False, True], ids=["1d", "2d"])
def test_variable_diffusion_converges_at_second_order_to_a_manufactured_solution(two_d):
    sizes = [16, 32, 64]
    errors = [manufactured_error(n, two_d) for n in sizes]
    slope = -np.polyfit(np.log(sizes), np.log(errors), 1)[0]
    assert abs(slope - 2.0) < 0.2, (slope, errors)


# --- a time-dependent vector field: the forced oscillator ------------------------------

OMEGA, DRIVE, FORCE = 2.0, 1.3, 0.8  # y'' + ω² y = F cos(Ω t), y(0) = 1, y'(0) = 0


def forced_oscillator(t, y, args):
    return jnp.stack([y[1], -(OMEGA**2) * y[0] + FORCE * jnp.cos(DRIVE * t)])


def forced_solution(t):
    amplitude = FORCE / (OMEGA**2 - DRIVE**2)
    position = (1 - amplitude) * np.cos(OMEGA * t) + amplitude * np.cos(DRIVE * t)
    velocity = -(1 - amplitude) * OMEGA * np.sin(OMEGA * t) - amplitude * DRIVE * np.sin(DRIVE * t)
    return np.stack([position, velocity], axis=-1)


@pytest.mark.parametrize("integrator", ["lean", "diffrax"])
@pytest.mark.parametrize(
    "settings",
    [
        dict(solver="rk4", dt0=0.01, adaptive=False),
        dict(solver="tsit5", rtol=1e-10, atol=1e-12),
        dict(solver="bosh3", rtol=1e-9, atol=1e-12),
    ],
    ids=["rk4-fixed", "tsit5-adaptive", "bosh3-adaptive"],
)
def test_forced_oscillator_matches_its_analytic_solution(integrator, settings):
    # Save times off the step grid's origin: the stages must use the time of the step.
    ts = jnp.linspace(0.5, 6.5, 13)
    y0 = jnp.asarray(forced_solution(0.5))
    trajectory = simlab.simulate(forced_oscillator, y0, ts, integrator=integrator, **settings)
    assert trajectory.integrator == integrator
    np.testing.assert_allclose(trajectory.ys, forced_solution(np.asarray(ts)), atol=1e-7)


@pytest.mark.parametrize("solver, order", [("rk4", 4), ("heun", 2), ("bosh3", 3)])
def test_forced_oscillator_fixed_steps_converge_at_the_solvers_order(solver, order):
    ts = jnp.array([0.5, 3.5])
    y0 = jnp.asarray(forced_solution(0.5))
    steps = np.array([0.1, 0.05, 0.025])
    errors = [
        float(
            np.max(
                np.abs(
                    simlab.simulate(
                        forced_oscillator, y0, ts, solver=solver, dt0=dt, adaptive=False
                    ).ys[-1]
                    - forced_solution(3.5)
                )
            )
        )
        for dt in steps
    ]
    slope = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(slope - order) < 0.2, (slope, errors)


# --- the checkpointed rollout computes the same values and gradients -------------------


def test_checkpointed_rollout_equals_the_stored_one_for_a_non_square_step_count():
    ts = jnp.array([0.5, 1.2, 1.9])  # 7 steps of 0.1 each: not a perfect square

    def final(drive, budget):
        with mock.patch.object(_loops, "STORED_STEPS_BUDGET", budget):
            # A fresh function each time, so the loop is traced under this budget.
            def field(t, y, args):
                return jnp.stack([y[1], -(OMEGA**2) * y[0] + args * jnp.cos(DRIVE * t)])

            return simlab.simulate(
                field,
                jnp.array([1.0, 0.0]),
                ts,
                args=drive,
                solver="rk4",
                dt0=0.1,
                adaptive=False,
                integrator="lean",
            ).ys

    stored = final(FORCE, _loops.STORED_STEPS_BUDGET)
    checkpointed = final(FORCE, 16)  # bytes: every rollout above it checkpoints
    np.testing.assert_allclose(checkpointed, stored, rtol=1e-14, atol=1e-14)

    def loss(drive, budget):
        return jnp.sum(final(drive, budget)[-1] ** 2)

    np.testing.assert_allclose(
        jax.grad(loss)(FORCE, 16), jax.grad(loss)(FORCE, _loops.STORED_STEPS_BUDGET), rtol=1e-12
    )


# --- the fit against SciPy's curve_fit on the same problem ------------------------------


class Relaxation(AbstractODEModel):
    """dx/dt = source - rate x: x(t) = source/rate + (x0 - source/rate) exp(-rate t)."""

    rate: Float[Array, ""] = parameter(lower=0.0)
    source: Float[Array, ""] = parameter()
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return self.source - self.rate * y


def relaxation(t, rate, source, x0):
    level = source / rate
    return level + (x0 - level) * np.exp(-rate * t)


FIT_TS = np.linspace(0.0, 3.0, 9)  # N = 9 points, p = 3 parameters: N/(N - p) = 1.5


@pytest.fixture(scope="module")
def relaxation_fit():
    truth = (1.3, 0.9, 2.0)
    noise = np.random.default_rng(RNG_SEED).normal(0.0, 0.03, FIT_TS.shape)
    observations = relaxation(FIT_TS, *truth) + noise
    result = simlab.fit(
        Relaxation(rate=1.0, source=1.0),
        jnp.asarray(FIT_TS),
        jnp.asarray(observations[:, None]),
        y0=jnp.array([observations[0]]),
        params=["rate", "source"],
        fit_y0=True,
        simulate_options=dict(rtol=1e-12, atol=1e-12),
    )
    optimum, covariance = scipy.optimize.curve_fit(
        relaxation, FIT_TS, observations, p0=(1.0, 1.0, observations[0]), xtol=1e-14, ftol=1e-14
    )
    return result, optimum, covariance


def test_fitted_optimum_equals_scipys(relaxation_fit):
    result, optimum, _ = relaxation_fit
    assert result.covariance_labels == ("rate", "source", "y0.x")
    fitted = [result.params["rate"], result.params["source"], result.y0[0]]
    np.testing.assert_allclose(fitted, optimum, rtol=1e-5)


def test_covariance_and_standard_errors_equal_scipys(relaxation_fit):
    result, _, covariance = relaxation_fit
    # curve_fit's pcov is s²(JᵀJ)⁻¹ with s² = Σr²/(N − p), its absolute_sigma=False default.
    np.testing.assert_allclose(result.covariance, covariance, rtol=1e-4)
    np.testing.assert_allclose(
        [result.stderr["rate"], result.stderr["source"], result.y0_stderr[0]],
        np.sqrt(np.diag(covariance)),
        rtol=1e-4,
    )
    residuals = (
        relaxation(FIT_TS, *relaxation_fit[1])
        - np.asarray(result.problem.experiments[0].observations).ravel()
    )
    np.testing.assert_allclose(
        result.noise_variance, np.sum(residuals**2) / (len(FIT_TS) - 3), rtol=1e-6
    )


def test_prediction_band_equals_a_finite_difference_delta_method(relaxation_fit):
    result, _, _ = relaxation_fit
    ts = np.linspace(0.0, 4.0, 9)
    theta = np.array([result.params["rate"], result.params["source"], result.y0[0]])
    # Central differences of the closed-form prediction, one column per parameter.
    jacobian = np.stack(
        [
            (relaxation(ts, *(theta + step)) - relaxation(ts, *(theta - step))) / (2 * 1e-6)
            for step in 1e-6 * np.eye(3)
        ],
        axis=-1,
    )
    covariance = np.asarray(result.covariance)
    expected = np.sqrt(np.einsum("tp,pq,tq->t", jacobian, covariance, jacobian))
    # The parameters are correlated: without the cross terms the band would differ.
    uncorrelated = np.sqrt(np.einsum("tp,p,tp->t", jacobian, np.diag(covariance), jacobian))
    assert np.min(np.abs(uncorrelated / expected - 1)[1:]) > 0.5  # (at t = 0 only x0 counts)
    prediction, stderr = result.predict(jnp.asarray(ts))
    np.testing.assert_allclose(prediction[:, 0], relaxation(ts, *theta), rtol=1e-9)
    np.testing.assert_allclose(stderr[:, 0], expected, rtol=1e-5)


def test_two_data_sets_with_their_own_initial_states_equal_curve_fit_on_the_stacked_problem():
    rng = np.random.default_rng(RNG_SEED + 1)
    starts = (2.0, 0.2)
    observed = [
        relaxation(FIT_TS, 1.3, 0.9, x0) + rng.normal(0, 0.03, FIT_TS.shape) for x0 in starts
    ]
    result = simlab.fit(
        Relaxation(rate=1.0, source=1.0),
        [jnp.asarray(FIT_TS)] * 2,
        [jnp.asarray(o[:, None]) for o in observed],
        y0=[jnp.array([o[0]]) for o in observed],
        params=["rate", "source"],
        fit_y0=True,
        simulate_options=dict(rtol=1e-12, atol=1e-12),
    )
    assert result.covariance_labels == ("rate", "source", "y0[0].x", "y0[1].x")

    def stacked(t, rate, source, first, second):
        half = len(FIT_TS)
        return np.concatenate(
            [relaxation(t[:half], rate, source, first), relaxation(t[half:], rate, source, second)]
        )

    optimum, covariance = scipy.optimize.curve_fit(
        stacked,
        np.concatenate([FIT_TS, FIT_TS]),
        np.concatenate(observed),
        p0=(1.0, 1.0, observed[0][0], observed[1][0]),
        xtol=1e-14,
        ftol=1e-14,
    )
    fitted = [result.params["rate"], result.params["source"], *np.ravel(result.y0)]
    np.testing.assert_allclose(fitted, optimum, rtol=1e-5)
    np.testing.assert_allclose(result.covariance, covariance, rtol=1e-4)


class RowDecays(models.AbstractModel):
    """A 2 × 2 state whose rows decay at their own rates: x_ij(t) = x_ij(0) exp(-rates_i t).

    A vector parameter and a grid-shaped state: its covariance entries are labelled by index.
    """

    rates: Float[Array, "2"] = parameter(lower=0.0)

    @property
    def state_shape(self):
        return (2, 2)

    @property
    def is_stiff(self):
        return False

    def max_stable_step(self, solver, y0):
        return None

    def __call__(self, t, y, args):
        return -self.rates[:, None] * y


def row_decays(t, rate_0, rate_1, *x0):
    """The exact solution, flattened as the fit's observations are: (len(t), 4)."""
    rates = np.repeat([rate_0, rate_1], 2)
    return (np.asarray(x0) * np.exp(-np.outer(t, rates))).ravel()


def test_a_vector_parameter_and_a_grid_state_are_labelled_by_index_and_equal_curve_fit():
    truth = (0.5, 1.5, 1.0, 2.0, 3.0, 0.5)
    noise = np.random.default_rng(RNG_SEED + 2).normal(0.0, 0.02, (len(FIT_TS), 4))
    observed = row_decays(FIT_TS, *truth).reshape(-1, 4) + noise
    result = simlab.fit(
        RowDecays(rates=jnp.array([1.0, 1.0])),
        jnp.asarray(FIT_TS),
        jnp.asarray(observed),
        y0=jnp.asarray(observed[0].reshape(2, 2)),
        params=["rates"],
        fit_y0=True,
        simulate_options=dict(rtol=1e-12, atol=1e-12),
    )
    assert result.covariance_labels == (
        "rates[0]", "rates[1]", "y0[0,0]", "y0[0,1]", "y0[1,0]", "y0[1,1]"
    )  # fmt: skip
    optimum, covariance = scipy.optimize.curve_fit(
        row_decays,
        FIT_TS,
        observed.ravel(),
        p0=(1.0, 1.0, *observed[0]),
        xtol=1e-14,
        ftol=1e-14,
    )
    fitted = [*result.params["rates"], *np.ravel(result.y0)]
    np.testing.assert_allclose(fitted, optimum, rtol=1e-5)
    # In label order: curve_fit's columns are the rates, then the state in NumPy's order.
    # The two rows are independent problems: their cross-covariances are zero (to 1e-19).
    np.testing.assert_allclose(result.covariance, covariance, rtol=1e-4, atol=1e-15)
    np.testing.assert_allclose(result.stderr["rates"], np.sqrt(np.diag(covariance)[:2]), rtol=1e-4)
