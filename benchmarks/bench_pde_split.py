"""Split PDE solvers side by side: simlab's ETDRK4 against Exponax's ETDRK4 on
Kuramoto–Sivashinsky (1-D and 2-D, same step, resolution and initial condition), and
Gray–Scott 256² to t = 5000, time to solution at equal accuracy, ETDRK4 against the explicit
path, and heat with a Robin wall against py-pde on the same grid. Times are the best of
interleaved rounds (`_harness.best_seconds`)."""

import time

import equinox as eqx
import exponax as ex
import jax
import jax.numpy as jnp
import numpy as np
import pde
from _harness import Row, best_seconds
from scipy.optimize import brentq

import simlab
from simlab.integrate import ETDRK4, imex_solve

KS_1D = dict(num_points=256, extent=32 * np.pi, dt=0.25, num_steps=2000)
KS_2D = dict(num_points=128, extent=30.0, dt=0.1, num_steps=200)
AGREEMENT_STEPS = 20
GRAY_SCOTT_SIZE = 256
GRAY_SCOTT_SPACING = 0.25
GRAY_SCOTT_END = 5000.0  # the spots have filled most of the domain
GRAY_SCOTT_STEPS = (10.0, 8.0, 5.0, 4.0, 2.5, 2.0, 1.0, 0.5)  # ETDRK4 candidates, largest first


def _exponax_fraction(grid: simlab.Grid, num_points: int) -> float:
    """Exponax's dealiasing fraction keeping the modes simlab's 2/3 rule keeps (Exponax
    keeps |m| <= fraction (N // 2) - 1, simlab |m| < fraction N / 2)."""
    mask = simlab.grid.dealiasing_mask(grid, 2 / 3)
    highest_kept = int(np.max(np.nonzero(mask[(0,) * (mask.ndim - 1)])[0]))
    return (highest_kept + 1.5) / (num_points // 2)


def _ks_row(ndim: int, settings: dict) -> Row:
    n, extent, dt, num_steps = (settings[k] for k in ("num_points", "extent", "dt", "num_steps"))
    grid = simlab.Grid((n,) * ndim, extent=extent)
    coords = grid.mesh()
    y0 = sum(jnp.cos(2 * np.pi * (i + 1) * x / extent + i) for i, x in enumerate(coords))
    model = simlab.models.KuramotoSivashinsky(grid=grid)
    ts = jnp.array([0.0, dt * num_steps])
    fraction = _exponax_fraction(grid, n)
    if ndim == 1:
        # Exponax's KS stepper (in 1-D its ∂x⁴ is the biharmonic).
        stepper = ex.stepper.KuramotoSivashinsky(
            1, extent, n, dt, order=4, dealiasing_fraction=fraction, num_circle_points=32
        )
        integrator = stepper._integrator
    else:
        # Exponax's KS stepper has ∂x⁴ + ∂y⁴; the same Δ² equation from its ETDRK4 parts.
        derivative = ex.spectral.build_derivative_operator(ndim, extent, n)
        laplace = ex.spectral.build_laplace_operator(derivative, order=2)
        nonlinear = ex.nonlin_fun.GradientNormNonlinearFun(
            ndim, n, derivative_operator=derivative, dealiasing_fraction=fraction
        )
        integrator = ex.etdrk.ETDRK4(dt, -laplace - laplace**2, nonlinear, num_circle_points=32)

    @eqx.filter_jit
    def exponax_solve(u0):
        # As Exponax's steppers run: transform, step in Fourier space, transform back.
        def step(u, _):
            spectrum = integrator.step_fourier(ex.fft(u, num_spatial_dims=ndim))
            return ex.ifft(spectrum, num_spatial_dims=ndim, num_points=n), None

        return jax.lax.scan(step, u0, None, length=num_steps)[0]

    @eqx.filter_jit
    def exponax_fourier_solve(u0):
        # Exponax's integrator kept in Fourier space throughout (its fastest use).
        spectrum = ex.fft(u0, num_spatial_dims=ndim)
        spectrum = jax.lax.fori_loop(
            0, num_steps, lambda i, s: integrator.step_fourier(s), spectrum
        )
        return ex.ifft(spectrum, num_spatial_dims=ndim, num_points=n)

    def simlab_solve():
        return ETDRK4().solve(model, ts, y0, None, dt0=dt, max_steps=num_steps)[0]

    # Agreement over the first steps, before chaos amplifies roundoff.
    short = ETDRK4().solve(
        model, ts * AGREEMENT_STEPS / num_steps, y0, None, dt0=dt, max_steps=num_steps
    )
    spectrum = ex.fft(y0[None], num_spatial_dims=ndim)
    for _ in range(AGREEMENT_STEPS):
        spectrum = integrator.step_fourier(spectrum)
    exponax_short = ex.ifft(spectrum, num_spatial_dims=ndim, num_points=n)[0]
    difference = float(jnp.max(jnp.abs(short[0][-1] - exponax_short)))
    seconds = best_seconds(
        {
            "simlab": simlab_solve,
            "exponax": lambda: exponax_solve(y0[None]),
            "fourier": lambda: exponax_fourier_solve(y0[None]),
        },
        repeats=5,
    )
    simlab_seconds, exponax_seconds = seconds["simlab"], seconds["exponax"]
    fourier_seconds = seconds["fourier"]
    shape = "x".join([str(n)] * ndim)
    return Row(
        f"pde split: KS {ndim}-D {shape} ETDRK4 x {num_steps} vs Exponax stepper",
        exponax_seconds / simlab_seconds,
        ">= 1x",
        f"simlab {simlab_seconds * 1e3:.0f} ms; vs Exponax kept in Fourier space "
        f"{fourier_seconds / simlab_seconds:.2f}x; "
        f"max |diff| after {AGREEMENT_STEPS} steps {difference:.1e}",
    )


def _gray_scott_row() -> Row:
    """Spots from a seed on a 64 x 64 domain resolved by 256² cells (h = 1/4): diffusion is
    stiff here (forward Euler needs dt < 2 / (8 D_u / h²) = 0.078), the reaction is not.

    Equal accuracy: today's explicit path (forward Euler at 90 % of its stable step, as
    `dt0=None` picks) has some error against a fine RK4 reference; ETDRK4 takes the largest
    step of `GRAY_SCOTT_STEPS` whose error is no larger. Both solve the same semi-discrete
    system (ETDRK4 uses the 5-point stencil's own symbol)."""
    grid = simlab.Grid((GRAY_SCOTT_SIZE, GRAY_SCOTT_SIZE), spacing=GRAY_SCOTT_SPACING)
    model = simlab.models.GrayScott(
        feed_rate=0.035, kill_rate=0.065, diffusivity_u=0.2, diffusivity_v=0.1, grid=grid
    )
    rng = np.random.default_rng(0)
    u, v = np.ones(grid.shape), np.zeros(grid.shape)
    middle = slice(GRAY_SCOTT_SIZE // 2 - 16, GRAY_SCOTT_SIZE // 2 + 16)
    u[middle, middle], v[middle, middle] = 0.5, 0.25
    v += 0.01 * rng.uniform(size=grid.shape)
    y0 = jnp.asarray(np.stack([u, v]))
    ts = jnp.array([0.0, GRAY_SCOTT_END])

    def explicit(solver, dt0):
        return simlab.simulate(
            model, y0, ts, solver=solver, adaptive=False, dt0=dt0, max_steps=1_000_000
        ).ys[-1]

    start = time.perf_counter()
    reference = explicit("rk4", 0.1)
    reference_seconds = time.perf_counter() - start

    def error(final):
        return float(jnp.max(jnp.abs(final - reference)))

    def euler():
        return explicit("euler", None)

    target = error(euler())

    def etdrk(dt0):
        return ETDRK4().solve(model, ts, y0, None, dt0=dt0, max_steps=1_000_000)[0][-1]

    errors = {}
    for dt0 in GRAY_SCOTT_STEPS:
        errors[dt0] = error(etdrk(dt0))
        if errors[dt0] <= target:
            break
    seconds = best_seconds({"euler": euler, "etdrk4": lambda: etdrk(dt0)}, repeats=3)
    tried = ", ".join(f"dt={step:g}: {e:.1e}" for step, e in errors.items())
    return Row(
        f"pde split: Gray-Scott 256² h=1/4 to t={GRAY_SCOTT_END:g}, ETDRK4 vs Euler",
        seconds["euler"] / seconds["etdrk4"],
        ">= 5x",
        f"equal max error {target:.1e} vs RK4 dt=0.1 reference ({reference_seconds:.0f} s); "
        f"ETDRK4 errors {tried}; ETDRK4 dt={dt0:g} {seconds['etdrk4']:.2f} s, Euler at its "
        f"stable step {seconds['euler']:.2f} s",
    )


def _robin_heat_rows() -> list[Row]:
    """u_t = D ∇²u on [0, 1]² with u_x = 0 at x = 0, a u + b u_x = 0 at x = 1 (Newton
    cooling) and no flux in y: the slowest mode cos(kx), tan(k) = a / (b k), decays as
    exp(-D k² t). Both codes use the same cell-centred stencil and ghost cells."""
    n, diffusivity, a, b, end = 128, 0.1, 2.0, 1.0, 0.1
    k = brentq(lambda k: a * np.cos(k) - b * k * np.sin(k), 1e-9, np.pi / 2)
    grid = simlab.Grid(
        (n, n), extent=1.0, boundary=[(simlab.Neumann(0.0), simlab.Robin(a, b)), "neumann"]
    )
    x, _ = grid.mesh()
    y0 = jnp.cos(k * x)
    exact = np.exp(-diffusivity * k**2 * end) * np.cos(k * np.asarray(x))
    model = simlab.models.Heat(diffusivity=diffusivity, grid=grid)
    dt = 0.9 * grid.spacing[0] ** 2 / (4 * diffusivity)  # inside Euler's limit, both codes
    num_steps = int(np.ceil(end / dt))
    dt = end / num_steps
    ts = jnp.array([0.0, end])

    def simlab_euler():
        return simlab.simulate(
            model, y0, ts, solver="euler", adaptive=False, dt0=dt, max_steps=num_steps
        ).ys[-1]

    def simlab_imex():
        ys, _, _ = imex_solve(
            model, ts, y0, None, solver="kencarp4", rtol=1e-5, atol=1e-7, max_steps=1000
        )
        return ys[-1]

    pde_grid = pde.CartesianGrid([[0.0, 1.0], [0.0, 1.0]], [n, n])
    state = pde.ScalarField(pde_grid, np.asarray(y0))
    # py-pde's mixed condition is du/dn + gamma u = beta: gamma = a / b, beta = g / b.
    bc = {"x-": {"derivative": 0.0}, "x+": {"type": "mixed", "value": a / b, "const": 0.0}}
    equation = pde.DiffusionPDE(diffusivity=diffusivity, bc={**bc, "y": {"derivative": 0.0}})

    def py_pde_euler():
        return equation.solve(
            state, t_range=end, dt=dt, solver="euler", tracker=None, backend="numba"
        ).data

    errors = {
        name: float(np.max(np.abs(np.asarray(fn()) - exact)))
        for name, fn in (("simlab", simlab_euler), ("imex", simlab_imex), ("py-pde", py_pde_euler))
    }
    seconds = best_seconds(
        {"simlab": simlab_euler, "imex": simlab_imex, "py-pde": py_pde_euler}, repeats=3
    )
    detail = f"{n}² to t={end:g}, max error vs exact mode: " + ", ".join(
        f"{name} {error:.1e}" for name, error in errors.items()
    )
    return [
        Row(
            "pde split: heat + Robin wall, Euler same dt, vs py-pde Euler",
            seconds["py-pde"] / seconds["simlab"],
            ">= 5x",
            f"{num_steps} steps; simlab {seconds['simlab']:.2f} s; {detail}",
        ),
        Row(
            "pde split: heat + Robin wall, KenCarp4 vs py-pde Euler",
            seconds["py-pde"] / seconds["imex"],
            ">= 5x",
            f"simlab KenCarp4 {seconds['imex']:.2f} s at rtol 1e-5 (equal error: the "
            "spatial error dominates)",
        ),
    ]


def rows() -> list[Row]:
    return [_ks_row(1, KS_1D), _ks_row(2, KS_2D), _gray_scott_row(), *_robin_heat_rows()]
