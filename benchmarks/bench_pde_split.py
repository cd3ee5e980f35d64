"""Split PDE solvers side by side: simlab's ETDRK4 against Exponax's ETDRK4 on
Kuramoto–Sivashinsky (1-D and 2-D, same step, resolution and initial condition), and
Gray–Scott 256² time to solution at equal accuracy, ETDRK4 against the explicit path."""

import time

import equinox as eqx
import exponax as ex
import jax
import jax.numpy as jnp
import numpy as np
from _harness import Row, median_seconds

import simlab
from simlab._etdrk import ETDRK4

KS_1D = dict(num_points=256, extent=32 * np.pi, dt=0.25, num_steps=2000)
KS_2D = dict(num_points=128, extent=30.0, dt=0.1, num_steps=200)
AGREEMENT_STEPS = 20
GRAY_SCOTT_SIZE = 256
GRAY_SCOTT_END = 1000.0  # spots have formed and started to split by t = 1000


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
    simlab_seconds = median_seconds(simlab_solve, repeats=5)
    exponax_seconds = median_seconds(lambda: exponax_solve(y0[None]), repeats=5)
    fourier_seconds = median_seconds(lambda: exponax_fourier_solve(y0[None]), repeats=5)
    shape = "x".join([str(n)] * ndim)
    return Row(
        f"pde split: KS {ndim}-D {shape} ETDRK4 x {num_steps} vs Exponax stepper",
        exponax_seconds / simlab_seconds,
        ">= 1x",
        f"simlab {simlab_seconds * 1e3:.0f} ms; vs Exponax kept in Fourier space "
        f"{fourier_seconds / simlab_seconds:.2f}x; "
        f"max |diff| after {AGREEMENT_STEPS} steps {difference:.1e}",
    )


def _gray_scott_rows() -> list[Row]:
    grid = simlab.Grid((GRAY_SCOTT_SIZE, GRAY_SCOTT_SIZE), spacing=1.0)
    model = simlab.models.GrayScott(
        feed_rate=0.035, kill_rate=0.065, diffusivity_u=0.2, diffusivity_v=0.1, grid=grid
    )
    rng = np.random.default_rng(0)
    u, v = np.ones(grid.shape), np.zeros(grid.shape)
    middle = slice(GRAY_SCOTT_SIZE // 2 - 8, GRAY_SCOTT_SIZE // 2 + 8)
    u[middle, middle], v[middle, middle] = 0.5, 0.25
    v += 0.01 * rng.uniform(size=grid.shape)
    y0 = jnp.asarray(np.stack([u, v]))
    ts = jnp.array([0.0, GRAY_SCOTT_END])

    def explicit(solver, dt0):
        return simlab.simulate(
            model, y0, ts, solver=solver, adaptive=False, dt0=dt0, max_steps=100_000
        ).ys[-1]

    start = time.perf_counter()
    reference = explicit("rk4", 0.125)
    reference_seconds = time.perf_counter() - start

    def error(final):
        return float(jnp.max(jnp.abs(final - reference)))

    # Today's explicit path: forward Euler at the largest stable step (dt0=None).
    euler_error = error(explicit("euler", None))
    euler_seconds = median_seconds(lambda: explicit("euler", None), repeats=3)
    rk4_error = error(explicit("rk4", 1.0))
    rk4_seconds = median_seconds(lambda: explicit("rk4", 1.0), repeats=3)

    def etdrk(dt0):
        return ETDRK4().solve(model, ts, y0, None, dt0=dt0, max_steps=100_000)[0][-1]

    def largest_step_within(target):
        for dt0 in (25.0, 20.0, 16.0, 12.5, 10.0, 8.0, 5.0, 4.0, 2.5, 2.0, 1.0):
            if error(etdrk(dt0)) <= target:
                return dt0
        return 0.5

    rows = []
    for name, target, seconds in (
        ("Euler at its stable step", euler_error, euler_seconds),
        ("RK4 dt=1", rk4_error, rk4_seconds),
    ):
        dt0 = largest_step_within(target)
        etdrk_seconds = median_seconds(lambda dt0=dt0: etdrk(dt0), repeats=3)
        rows.append(
            Row(
                f"pde split: Gray-Scott 256² to t={GRAY_SCOTT_END:g}, ETDRK4 vs {name}",
                seconds / etdrk_seconds,
                ">= 5x",
                f"equal max error {target:.1e} vs RK4 dt=1/8 reference "
                f"({reference_seconds:.0f} s): ETDRK4 dt={dt0:g}, {etdrk_seconds:.2f} s "
                f"vs {seconds:.2f} s",
            )
        )
    return rows


def rows() -> list[Row]:
    return [_ks_row(1, KS_1D), _ks_row(2, KS_2D), *_gray_scott_rows()]
