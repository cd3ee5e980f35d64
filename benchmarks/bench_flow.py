"""Two-dimensional Navier–Stokes (vorticity form) by ETDRK4: simlab's `NavierStokes2D`
against Exponax's `KolmogorovFlowVorticity` (unforced, same grid, step and field) and
against a bare `jnp.fft` implementation of the same ETDRK4 step; reverse-mode gradient
against the forward solve; the peak memory of a long rollout and of its gradient; 4D-Var's
iterations to recover an initial field. Times are the best of interleaved rounds
(`_harness.best_seconds`)."""

import time

import equinox as eqx
import exponax as ex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from _harness import Row, best_seconds
from bench_pde_split import _exponax_fraction

import simlab
from simlab.integrate import ETDRK4

SIZE, VISCOSITY, STEPS = 256, 1e-4, 100
GRADIENT_SIZE, GRADIENT_STEPS = 128, 1_000
MEMORY_SIZE, MEMORY_STEPS = 256, 10_000


def _setup(size):
    grid = simlab.Grid((size, size), extent=2 * np.pi)
    w0 = simlab.models.random_vorticity(jax.random.PRNGKey(0), grid, peak_wavenumber=8.0)
    return grid, w0, float(simlab.grid.cfl_step(w0, grid))


def _bare_etdrk4(size, viscosity, dt, num_steps):
    """ETDRK4 for the vorticity equation written directly with jnp.fft (Kassam & Trefethen's
    contour coefficients in NumPy): the cost floor of the same arithmetic."""
    m = np.fft.fftfreq(size, 1 / size)
    kx, ky = m[:, None], np.fft.rfftfreq(size, 1 / size)[None, :]
    k2 = kx**2 + ky**2
    keep = ((np.abs(kx) < size / 3) & (ky < size / 3)).astype(float)
    inverse_k2 = np.where(k2 > 0, 1 / np.where(k2 > 0, k2, 1), 0)
    z = dt * -viscosity * k2
    roots = z[..., None] + np.exp(1j * np.pi * (np.arange(1, 33) - 0.5) / 32)
    mean = lambda f: dt * np.mean(f(roots), axis=-1).real  # noqa: E731
    e, e2 = np.exp(z), np.exp(z / 2)
    q = mean(lambda r: (np.exp(r / 2) - 1) / r)
    f1 = mean(lambda r: (-4 - r + np.exp(r) * (4 - 3 * r + r**2)) / r**3)
    f2 = mean(lambda r: (2 + r + np.exp(r) * (r - 2)) / r**3)
    f3 = mean(lambda r: (-4 - 3 * r - r**2 + np.exp(r) * (4 - r)) / r**3)
    ikx, iky = 1j * np.where(np.abs(kx) == size // 2, 0, kx), 1j * ky

    def nonlinear(w):
        w = keep * w
        psi = inverse_k2 * w
        u, v = jnp.fft.irfft2(iky * psi), jnp.fft.irfft2(-ikx * psi)
        advection = u * jnp.fft.irfft2(ikx * w) + v * jnp.fft.irfft2(iky * w)
        return -keep * jnp.fft.rfft2(advection)

    def step(_, w):
        n_w = nonlinear(w)
        a = e2 * w + q * n_w
        n_a = nonlinear(a)
        b = e2 * w + q * n_a
        n_b = nonlinear(b)
        c = e2 * a + q * (2 * n_b - n_w)
        return e * w + f1 * n_w + 2 * f2 * (n_a + n_b) + f3 * nonlinear(c)

    @jax.jit
    def solve(w0):
        return jnp.fft.irfft2(jax.lax.fori_loop(0, num_steps, step, jnp.fft.rfft2(w0)))

    return solve


def _step_rows() -> list[Row]:
    grid, w0, dt = _setup(SIZE)
    model = simlab.models.NavierStokes2D(grid=grid, viscosity=VISCOSITY)
    ts = jnp.array([0.0, dt * STEPS])

    def simlab_saves(w0):
        return ETDRK4().solve(model, ts, w0, None, dt0=dt, max_steps=STEPS)[0]

    # Every contender is one compiled function from the initial field to the final one.
    # XLA:CPU runs the four inverse FFTs of a stage concurrently only when its buffer
    # assignment leaves them no false write-after-read conflicts; returning the initial field
    # with the final one is enough to serialise them (in simlab's program as in the bare
    # loop), so the program that returns every save is timed too, as a detail.
    simlab_solve = jax.jit(lambda w0: simlab_saves(w0)[-1])

    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        # Exponax's vorticity is -ω (see tests/test_flow.py); unforced, without drag.
        stepper = ex.stepper.KolmogorovFlowVorticity(
            2, 2 * np.pi, SIZE, dt, diffusivity=VISCOSITY, drag=0.0, injection_scale=0.0,
            order=4, num_circle_points=32, dealiasing_fraction=_exponax_fraction(grid, SIZE),
        )  # fmt: skip
        integrator = stepper._integrator

        @eqx.filter_jit
        def exponax_solve(u0):
            # Exponax's integrator kept in Fourier space throughout, as simlab's is.
            spectrum = jax.lax.fori_loop(
                0, STEPS, lambda i, s: integrator.step_fourier(s), ex.fft(u0, num_spatial_dims=2)
            )
            return ex.ifft(spectrum, num_spatial_dims=2, num_points=SIZE)[0]

        bare_solve = _bare_etdrk4(SIZE, VISCOSITY, dt, STEPS)
        bare_with_initial = jax.jit(lambda w0: jnp.stack([w0, bare_solve(w0)]))
        results = {
            "simlab": simlab_solve(w0),
            "exponax": -exponax_solve(-w0[None]),
            "bare": bare_solve(w0),
        }
        seconds = best_seconds(
            {
                "simlab": lambda: simlab_solve(w0),
                "simlab, every save": lambda: simlab_saves(w0),
                "exponax": lambda: exponax_solve(-w0[None]),
                "bare": lambda: bare_solve(w0),
                "bare, initial field too": lambda: bare_with_initial(w0),
            },
            repeats=5,
        )
    scale = float(jnp.max(jnp.abs(results["simlab"])))
    differences = {
        name: float(jnp.max(jnp.abs(results[name] - results["simlab"]))) / scale
        for name in ("exponax", "bare")
    }
    per_step = {name: elapsed / STEPS * 1e3 for name, elapsed in seconds.items()}
    return [
        Row(
            f"flow: NS2D {SIZE}² ETDRK4 x {STEPS} vs Exponax KolmogorovFlowVorticity",
            seconds["exponax"] / seconds["simlab"],
            ">= 1x",
            f"simlab {per_step['simlab']:.2f} ms/step, returning every save "
            f"{per_step['simlab, every save']:.2f}; Exponax {per_step['exponax']:.2f}; "
            f"relative max |diff| {differences['exponax']:.1e}",
        ),
        Row(
            f"flow: NS2D {SIZE}² ETDRK4 x {STEPS} vs bare jnp.fft ETDRK4",
            seconds["bare"] / seconds["simlab"],
            ">= 0.8x",
            f"bare {per_step['bare']:.2f} ms/step, returning the initial field too "
            f"{per_step['bare, initial field too']:.2f}; relative max |diff| "
            f"{differences['bare']:.1e}",
        ),
    ]


def _final_enstrophy(size: int, num_steps: int):
    """The enstrophy after `num_steps` ETDRK4 steps of decaying turbulence on `size`², as a
    function of the viscosity."""
    grid, w0, dt = _setup(size)
    ts = jnp.array([0.0, dt * num_steps])

    def final_enstrophy(viscosity):
        model = simlab.models.NavierStokes2D(grid=grid, viscosity=viscosity)
        ys = ETDRK4().solve(model, ts, w0, None, dt0=dt, max_steps=num_steps)[0]
        return simlab.grid.enstrophy(ys[-1], grid)

    return final_enstrophy


def _gradient_row() -> Row:
    final_enstrophy = _final_enstrophy(GRADIENT_SIZE, GRADIENT_STEPS)
    forward, reverse = jax.jit(final_enstrophy), jax.jit(jax.grad(final_enstrophy))
    viscosity = jnp.asarray(1e-3)
    seconds = best_seconds(
        {"forward": lambda: forward(viscosity), "reverse": lambda: reverse(viscosity)}, repeats=3
    )
    return Row(
        f"flow: reverse gradient / forward, {GRADIENT_STEPS} steps of {GRADIENT_SIZE}²",
        seconds["reverse"] / seconds["forward"],
        "<= 4",
        f"forward {seconds['forward']:.2f} s (d enstrophy / d viscosity)",
    )


def _peak_bytes(function) -> int:
    """Peak memory of `function` at a viscosity, from the compiled program's buffer
    assignment (inputs, outputs and scratch; nothing runs)."""
    analysis = jax.jit(function).lower(jnp.asarray(1e-4)).compile().memory_analysis()
    return (
        analysis.temp_size_in_bytes + analysis.argument_size_in_bytes
        + analysis.output_size_in_bytes
    )  # fmt: skip


def _memory_row() -> Row:
    final_enstrophy = _final_enstrophy(MEMORY_SIZE, MEMORY_STEPS)
    start = time.perf_counter()
    forward = _peak_bytes(final_enstrophy)
    gradient = _peak_bytes(jax.grad(final_enstrophy))
    field_bytes = 8 * MEMORY_SIZE**2
    return Row(
        f"flow: grad through 10^4 ETDRK4 steps of {MEMORY_SIZE}² f64, peak MiB (checkpointed)",
        gradient / 2**20,
        "reported",
        f"forward {forward / 2**20:.0f} MiB; every state stored: "
        f"{MEMORY_STEPS * field_bytes / 2**30:.1f} GiB; compiled in "
        f"{time.perf_counter() - start:.0f} s",
    )


def _assimilation_row() -> Row:
    """4D-Var on 32²: the initial vorticity from every 4th point of the flow at t = 1 (5%
    noise) and a spectral background, by `fit` with L-BFGS (as tests/test_flow_assimilation.py
    does on 16²)."""
    size, every = 32, 4
    grid = simlab.Grid((size, size), extent=2 * np.pi)
    model = simlab.models.NavierStokes2D(grid=grid, viscosity=0.01)
    truth = simlab.models.random_vorticity(jax.random.PRNGKey(0), grid, peak_wavenumber=2.0)
    moduli = jnp.abs(jnp.fft.rfft2(truth))  # random_vorticity's moduli: the background's
    weights = (size / jnp.maximum(moduli, 0.1 * jnp.max(moduli))).astype(complex)

    def observe(w):
        whitened = jnp.fft.irfft2(jnp.fft.rfft2(w) * weights, s=grid.shape)
        return jnp.concatenate([w[::every, ::every].ravel(), whitened.ravel()])

    ts, solve = jnp.array([0.0, 1.0]), {"solver": "etdrk4", "adaptive": False, "dt0": 1 / 32}
    final = simlab.simulate(model, truth, ts, **solve).ys[-1][::every, ::every].ravel()
    sigma = 0.05 * float(jnp.sqrt(jnp.mean(final**2)))
    observed = final + sigma * jax.random.normal(jax.random.PRNGKey(2), final.shape)
    missing = jnp.full(size * size, jnp.nan)
    observations = jnp.stack(
        [
            jnp.concatenate([jnp.full(final.size, jnp.nan), jnp.zeros(size * size)]),
            jnp.concatenate([observed, missing]),
        ]
    )
    start = time.perf_counter()
    result = simlab.fit(
        model, ts, observations, y0=jnp.zeros(grid.shape), params=[], fit_y0=True,
        observe=observe, noise_scale=jnp.concatenate([jnp.full(final.size, sigma),
                                                      jnp.ones(size * size)]),
        method="gradient", optimiser=optax.lbfgs(learning_rate=1.0, linesearch=None),
        rtol=1e-5, max_steps=2000, simulate_options=solve, throw=False, covariance=False,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    history = np.asarray(result.loss_history)[: int(result.num_steps)]
    # Converged: within 1e-5 of the final loss (the fit runs on to confirm it stalled).
    iterations = int(np.argmax(history <= float(result.loss) * (1 + 1e-5))) + 1
    error = float(jnp.linalg.norm(result.y0 - truth) / jnp.linalg.norm(truth))
    return Row(
        f"flow: 4D-Var iterations to converge, {size}² from every {every}th point",
        iterations,
        "reported",
        f"L-BFGS; relative L2 error of w0 {error:.3f}; {int(result.num_steps)} steps in "
        f"{seconds:.0f} s (with compilation; covariance=False)",
    )


def rows() -> list[Row]:
    return [*_step_rows(), _gradient_row(), _memory_row(), _assimilation_row()]
