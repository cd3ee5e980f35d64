"""Two-dimensional incompressible flow, pseudo-spectral in vorticity form: exact solutions
(Taylor–Green, the laminar Kolmogorov state), ETDRK4's order, conservation laws, the
nonlinear term against NumPy, agreement with Exponax's Kolmogorov solver, gradients."""

import contextlib
import re

import diffrax
import equinox as eqx
import exponax as ex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab.grid import (
    cfl_step,
    courant_number,
    dealiasing_mask,
    energy_spectrum,
    enstrophy,
    kinetic_energy,
    spectral_divergence,
    spectral_gradient,
    streamfunction,
    velocity,
)
from simlab.integrate import ETDRK4
from simlab.models import (
    NavierStokes2D,
    kolmogorov_laminar_vorticity,
    peaked_spectrum,
    random_vorticity,
    taylor_green_vorticity,
)

GRID = simlab.Grid((32, 32), extent=2 * np.pi)
TURBULENT = random_vorticity(jax.random.PRNGKey(1), GRID, peak_wavenumber=3.0)
SAVES = 21


@eqx.filter_jit
def _final_state(model, y0, t_end, dt):
    """ETDRK4 from 0 to `t_end` in steps of `dt`, both traced: one compilation per model
    structure serves every step size."""
    ts = jnp.stack([jnp.zeros_like(t_end), t_end])
    ys, result, _ = ETDRK4().solve(model, ts, y0, None, dt0=dt, max_steps=1_000_000)
    return ys[-1], result


def _solve(model, y0, t_end, dt):
    final, result = _final_state(model, y0, jnp.asarray(t_end), jnp.asarray(dt))
    assert result == simlab.RESULTS.successful
    return final


def _relative_l2(a, b):
    return float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b))


def test_taylor_green_decays_at_the_exact_rate_to_roundoff():
    viscosity, drag = 0.05, 0.1
    model = NavierStokes2D(grid=GRID, viscosity=viscosity, drag=drag)
    final = _solve(model, taylor_green_vorticity(GRID), 2.0, 0.1)
    exact = taylor_green_vorticity(GRID, time=2.0, viscosity=viscosity, drag=drag)
    assert _relative_l2(final, exact) < 1e-14
    # ω = 2 sin x sin y e^{-(2ν + α) t} on the 2π square: the closed form itself.
    x, y = GRID.mesh()
    closed_form = 2 * jnp.sin(x) * jnp.sin(y) * np.exp(-(2 * viscosity + drag) * 2.0)
    np.testing.assert_allclose(final, closed_form, atol=1e-14)


def test_etdrk4_is_fourth_order_in_time_on_decaying_turbulence():
    model = NavierStokes2D(grid=GRID, viscosity=1e-2)
    reference = _solve(model, TURBULENT, 1.0, 1 / 320)
    steps = np.array([0.05, 0.025, 0.0125])
    errors = [float(jnp.max(jnp.abs(_solve(model, TURBULENT, 1.0, h) - reference))) for h in steps]
    order = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(order - 4) < 0.3, (errors, order)
    assert float(jnp.max(jnp.abs(reference - TURBULENT))) > 1.0  # the flow did evolve


def test_inviscid_flow_conserves_energy_and_enstrophy_up_to_the_stepping_error():
    model = NavierStokes2D(grid=GRID, viscosity=0.0)
    energy, total_enstrophy = kinetic_energy(TURBULENT, GRID), enstrophy(TURBULENT, GRID)
    drifts = []
    for h in (0.05, 0.025):
        final = _solve(model, TURBULENT, 2.0, h)
        drifts.append(
            [
                abs(float(kinetic_energy(final, GRID) / energy - 1)),
                abs(float(enstrophy(final, GRID) / total_enstrophy - 1)),
            ]
        )
    drifts = np.array(drifts)
    assert np.all(drifts[1] < 1e-5), drifts
    # The truncated system conserves both exactly: what drifts is the fourth-order
    # (or better) error of the time stepping, 16 times smaller or less at half the step.
    assert np.all(drifts[0] / drifts[1] > 16), drifts


def test_unforced_energy_dissipation_rate_is_twice_viscosity_times_enstrophy():
    viscosity, drag = 0.02, 0.1
    model = NavierStokes2D(grid=GRID, viscosity=viscosity, drag=drag)
    tendency = model(0.0, TURBULENT, None)
    _, rate = jax.jvp(lambda w: kinetic_energy(w, GRID), (TURBULENT,), (tendency,))
    energy, total_enstrophy = kinetic_energy(TURBULENT, GRID), enstrophy(TURBULENT, GRID)
    expected = -2 * viscosity * total_enstrophy - 2 * drag * energy
    np.testing.assert_allclose(rate, expected, rtol=1e-12)


def test_kolmogorov_flow_converges_to_its_laminar_state_at_low_reynolds_number():
    # χ = 1, ν = 1/2, n = 2: U = χ / (ν n²) = 1/2, Re = U / (ν n) = 1/2.
    model = NavierStokes2D(grid=GRID, viscosity=0.5, forcing_amplitude=1.0, forcing_mode=2)
    laminar = kolmogorov_laminar_vorticity(model)
    _, y = GRID.mesh()
    np.testing.assert_allclose(laminar, -jnp.cos(2 * y), atol=1e-15)  # -U n cos(n y)
    # A fixed point of the whole vector field, forcing against viscosity, to roundoff.
    assert float(jnp.max(jnp.abs(model(0.0, laminar, None)))) < 1e-13
    disturbance = random_vorticity(jax.random.PRNGKey(2), GRID, peak_wavenumber=2.0, energy=0.1)
    ts = jnp.linspace(0.0, 10.0, 11)
    trajectory = simlab.simulate(
        model, laminar + disturbance, ts, solver="etdrk4", adaptive=False, dt0=0.1
    )
    assert trajectory.integrator == "exponential"
    distance = np.sqrt(np.mean((np.asarray(trajectory.ys) - np.asarray(laminar)) ** 2, axis=(1, 2)))
    assert np.all(np.diff(distance) < 0)
    assert distance[-1] < 2e-3 * distance[0]


def test_velocity_is_divergence_free_and_its_curl_is_the_vorticity():
    u, v = velocity(TURBULENT, GRID)
    scale = float(jnp.max(jnp.abs(u))) / GRID.spacing[0]
    divergence = spectral_divergence(jnp.stack([u, v]), GRID)
    assert float(jnp.max(jnp.abs(divergence))) < 1e-13 * scale
    curl = spectral_gradient(v, GRID)[0] - spectral_gradient(u, GRID)[1]
    np.testing.assert_allclose(curl, TURBULENT - jnp.mean(TURBULENT), atol=1e-12)
    # ∇²ψ = -ω, and u = ∂ψ/∂y.
    psi = streamfunction(TURBULENT, GRID)
    np.testing.assert_allclose(simlab.grid.spectral_laplacian(psi, GRID), -TURBULENT, atol=1e-12)
    np.testing.assert_allclose(spectral_gradient(psi, GRID)[1], u, atol=1e-12)


def _numpy_advection(fields, extent, fine):
    """-(u·∇)q for each field q, with u from the first (the vorticity): every factor
    truncated to |m| < N/3, evaluated on a `fine` grid that holds their product exactly,
    and the product truncated back (NumPy's full complex FFT only)."""
    n = fields.shape[-1]
    m = np.fft.fftfreq(n, 1 / n)
    keep = (np.abs(m)[:, None] < n / 3) & (np.abs(m)[None, :] < n / 3)
    kx, ky = np.meshgrid(2 * np.pi * m / extent, 2 * np.pi * m / extent, indexing="ij")
    spectra = np.fft.fft2(fields) * keep
    k2 = np.where(kx**2 + ky**2 > 0, kx**2 + ky**2, np.inf)
    psi = spectra[0] / k2

    def on_fine_grid(spectrum):
        padded = np.zeros((fine, fine), complex)
        index = np.ix_(m.astype(int) % fine, m.astype(int) % fine)
        padded[index] = spectrum
        return np.fft.ifft2(padded).real * (fine / n) ** 2

    u, v = on_fine_grid(1j * ky * psi), on_fine_grid(-1j * kx * psi)
    result = []
    for spectrum in spectra:
        product = u * on_fine_grid(1j * kx * spectrum) + v * on_fine_grid(1j * ky * spectrum)
        coarse = np.fft.fft2(product)[np.ix_(m.astype(int) % fine, m.astype(int) % fine)]
        result.append(-coarse * (n / fine) ** 2 * keep)
    return np.array(result)


def test_pseudo_spectral_advection_equals_an_independent_numpy_computation():
    scalar = random_vorticity(jax.random.PRNGKey(5), GRID, peak_wavenumber=6.0)
    state = jnp.stack([TURBULENT, scalar + 2 * TURBULENT[::-1]])  # beyond the 2/3 box too
    model = NavierStokes2D(grid=GRID, passive_scalar=True)
    tendency = model.from_spectrum(model.nonlinear_spectral(0.0, model.to_spectrum(state), None))
    expected = np.fft.ifft2(_numpy_advection(np.asarray(state), 2 * np.pi, fine=64)).real
    scale = float(np.max(np.abs(expected)))
    np.testing.assert_allclose(tendency, expected, atol=1e-12 * scale)


def test_passive_scalar_with_the_vorticitys_diffusivity_tracks_the_vorticity():
    # Without drag and forcing, c obeys ω's equation when κ = ν: started equal, they stay
    # equal, which checks that c is carried by the same velocity and diffused alike.
    model = NavierStokes2D(grid=GRID, viscosity=0.01, passive_scalar=True, scalar_diffusivity=0.01)
    final = _solve(model, jnp.stack([TURBULENT, TURBULENT]), 0.5, 0.025)
    assert _relative_l2(final[0], TURBULENT) > 0.1
    np.testing.assert_allclose(final[1], final[0], atol=1e-12)
    # A different scalar keeps its mean (advection and diffusion only move it around).
    x, _ = GRID.mesh()
    scalar = 1.0 + jnp.cos(x)
    mixed = _solve(model, jnp.stack([TURBULENT, scalar]), 0.5, 0.025)[1]
    np.testing.assert_allclose(jnp.mean(mixed), 1.0, rtol=1e-13)
    assert float(jnp.var(mixed)) < float(jnp.var(scalar))


@contextlib.contextmanager
def _exponax_rules():
    """Exponax is written for JAX's standard promotion rules."""
    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        yield


def test_kolmogorov_flow_agrees_with_exponax_kolmogorov_flow_vorticity():
    # Exponax (installed next to jax 0.10) writes the same equation with the opposite
    # sign of ω (its velocity is (∂y, -∂x) of Δ⁻¹ω = -ψ), its drag λ = -α on the right,
    # and its injection -γ m cos(m y): simlab's ω(χ = -γ, from -ω0) is -ω_exponax. Exponax
    # samples at x = j h, simlab at cell centres: an origin of -h/2 puts them together.
    n, dt, num_steps = 32, 0.02, 50
    grid = simlab.Grid((n, n), extent=2 * np.pi, origin=-np.pi / n)
    viscosity, drag, gamma, mode = 0.05, 0.1, 1.0, 4
    w0 = random_vorticity(jax.random.PRNGKey(3), grid, peak_wavenumber=4.0)
    mask = dealiasing_mask(grid)
    highest_kept = int(np.max(np.nonzero(mask[0])[0]))
    with _exponax_rules():
        stepper = ex.stepper.KolmogorovFlowVorticity(
            2, 2 * np.pi, n, dt, diffusivity=viscosity, drag=-drag, injection_mode=mode,
            injection_scale=gamma, order=4, num_circle_points=32,
            dealiasing_fraction=(highest_kept + 1.5) / (n // 2),
        )  # fmt: skip
        reference = ex.rollout(stepper, num_steps, include_init=True)(w0[None])[:, 0]
    exponax_mask = np.asarray(stepper._integrator._nonlinear_fun.dealiasing_mask[0])
    np.testing.assert_array_equal(exponax_mask, mask)
    model = NavierStokes2D(
        grid=grid, viscosity=viscosity, drag=drag, forcing_amplitude=-gamma, forcing_mode=mode
    )
    ts = dt * jnp.arange(num_steps + 1.0)
    ys, _, _ = ETDRK4().solve(model, ts, -w0, None, dt0=dt, max_steps=num_steps)
    assert float(jnp.max(jnp.abs(reference[-1] - reference[0]))) > 5.0  # it did evolve
    np.testing.assert_allclose(-ys, reference, atol=1e-12 * float(jnp.max(jnp.abs(reference))))


def test_gradients_wrt_viscosity_and_forcing_amplitude_match_central_differences():
    grid = simlab.Grid((16, 16), extent=2 * np.pi)
    w0 = random_vorticity(jax.random.PRNGKey(4), grid, peak_wavenumber=2.0)

    def final_enstrophy(parameters):
        viscosity, amplitude = parameters
        model = NavierStokes2D(
            grid=grid, viscosity=viscosity, drag=0.1, forcing_amplitude=amplitude, forcing_mode=2
        )
        ys, _, _ = ETDRK4().solve(model, jnp.array([0.0, 1.0]), w0, None, dt0=0.05, max_steps=20)
        return enstrophy(ys[-1], grid)

    parameters = jnp.array([0.02, 0.5])
    gradient = jax.grad(final_enstrophy)(parameters)
    step = 1e-5
    for i in range(2):
        shift = jnp.zeros(2).at[i].set(step)
        central = (final_enstrophy(parameters + shift) - final_enstrophy(parameters - shift)) / (
            2 * step
        )
        np.testing.assert_allclose(gradient[i], central, rtol=1e-7)
    assert float(gradient[0]) < 0 < float(gradient[1])  # viscosity dissipates, forcing feeds


def test_energy_spectrum_sums_to_the_energy_and_locates_a_single_mode():
    k, shells = energy_spectrum(TURBULENT, GRID)
    u, v = velocity(TURBULENT, GRID)
    np.testing.assert_allclose(jnp.sum(shells), 0.5 * jnp.mean(u**2 + v**2), rtol=1e-13)
    np.testing.assert_allclose(k[:3], [0.0, 1.0, 2.0])
    # Taylor–Green: u = sin x cos y, v = -cos x sin y, E = 1/4, all at |k| = √2 (shell 1).
    k, shells = energy_spectrum(taylor_green_vorticity(GRID), GRID)
    expected = np.zeros_like(k)
    expected[1] = 0.25
    np.testing.assert_allclose(shells, expected, atol=1e-15)


def test_random_vorticity_has_the_prescribed_spectrum_and_energy():
    grid = simlab.Grid((64, 64), extent=2 * np.pi)
    field = random_vorticity(jax.random.PRNGKey(6), grid, peak_wavenumber=5.0, energy=0.3)
    assert abs(float(jnp.mean(field))) < 1e-15
    np.testing.assert_allclose(kinetic_energy(field, grid), 0.3, rtol=1e-13)
    k, shells = energy_spectrum(field, grid)
    target = np.asarray(peaked_spectrum(k, 5.0))
    kept = k < 64 / 3  # shells inside the 2/3 box; those beyond it are empty
    np.testing.assert_allclose(shells[kept], 0.3 * target[kept] / target[kept].sum(), rtol=1e-10)
    assert float(jnp.max(shells[k > 64 / 3 * np.sqrt(2)])) < 1e-30  # roundoff
    # Another key, another field, the same spectrum.
    other = random_vorticity(jax.random.PRNGKey(7), grid, peak_wavenumber=5.0, energy=0.3)
    assert _relative_l2(other, field) > 1.0
    np.testing.assert_allclose(energy_spectrum(other, grid)[1], shells, atol=1e-15)


def test_cfl_step_has_the_requested_courant_number():
    # Taylor–Green on 32 cells: max(|u| + |v|) = max |sin(x ± y)| = 1 at cell centres.
    step = cfl_step(taylor_green_vorticity(GRID), GRID)
    np.testing.assert_allclose(step, 0.5 * GRID.spacing[0], rtol=1e-13)
    step = cfl_step(TURBULENT, GRID, courant=0.8)
    np.testing.assert_allclose(courant_number(TURBULENT, GRID, step), 0.8, rtol=1e-13)


def test_bad_input_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="periodic grid"):
        NavierStokes2D(grid=simlab.Grid((16, 16), boundary="dirichlet"))
    with pytest.raises(ValueError, match="2-D grids"):
        NavierStokes2D(grid=simlab.Grid((8, 8, 8)))
    with pytest.raises(ValueError, match=r"forcing_mode must be an integer in \[1, 7\]"):
        NavierStokes2D(grid=simlab.Grid((16, 16)), forcing_mode=8)
    with pytest.raises(ValueError, match="viscosity"):
        NavierStokes2D(grid=GRID, viscosity=-1.0)
    with pytest.raises(ValueError, match="courant must be positive"):
        cfl_step(TURBULENT, GRID, courant=0.0)
    with pytest.raises(ValueError, match="peak_wavenumber and energy must be positive"):
        random_vorticity(jax.random.PRNGKey(0), GRID, energy=-1.0)
    with pytest.raises(ValueError, match="mode must be an integer"):
        taylor_green_vorticity(GRID, mode=16)


def test_etdrk4_limit_is_the_advective_cfl_bound_and_separates_stable_from_blown_up_runs():
    # Taylor–Green on 32 cells: max(|u| + |v|) = 1, and the largest kept mode is 10 on both
    # axes (|m| < 32/3), so the bound 2√2 / max(|u| k_x + |v| k_y) is 2√2 / 10.
    model = NavierStokes2D(grid=GRID, viscosity=0.0)
    taylor_green_limit = model.max_stable_step(ETDRK4(), taylor_green_vorticity(GRID))
    np.testing.assert_allclose(taylor_green_limit, 2 * np.sqrt(2) / 10, rtol=1e-13)
    assert model.max_stable_step(ETDRK4(), jnp.zeros(GRID.shape)) == np.inf  # at rest
    # On inviscid turbulence the bound, from the initial velocity alone, is where it
    # matters: 200 steps just inside it stay bounded, steps of twice it blow up.
    limit = float(model.max_stable_step(ETDRK4(), TURBULENT))
    inside = _solve(model, TURBULENT, 200 * 0.9 * limit, 0.9 * limit)
    assert float(jnp.max(jnp.abs(inside))) < 2 * float(jnp.max(jnp.abs(TURBULENT)))
    _, result = _final_state(model, TURBULENT, jnp.asarray(400 * limit), jnp.asarray(2 * limit))
    assert result == simlab.RESULTS.nonfinite_state


def test_simulate_refuses_a_step_above_the_cfl_limit_naming_dt0_and_the_largest_stable_step():
    model = NavierStokes2D(grid=GRID, viscosity=1e-3)
    limit = float(model.max_stable_step(ETDRK4(), TURBULENT))
    ts = jnp.linspace(0.0, 2.0, SAVES)  # the blow-up test's shape: one compiled solve
    expected = rf"dt0={1.1 * limit:g} is above the largest stable step {limit:.6g}.*advective CFL"
    with pytest.raises(simlab.SimulationError, match=expected):
        simlab.simulate(model, TURBULENT, ts, solver="etdrk4", adaptive=False, dt0=1.1 * limit)
    # Forced: it runs, and the warning names the same numbers.
    with pytest.warns(UserWarning, match=expected + r".*unstable_step='warn'") as caught:
        forced = simlab.simulate(
            model,
            TURBULENT,
            ts,
            solver="etdrk4",
            adaptive=False,
            dt0=1.1 * limit,
            unstable_step="warn",
            throw=False,
        )
    assert caught[0].filename == __file__
    assert int(forced.stats["num_steps"]) == (SAVES - 1) * np.ceil(float(ts[1]) / (1.1 * limit))
    with pytest.raises(ValueError, match=r"unstable_step must be one of \['raise', 'warn'\]"):
        simlab.simulate(model, TURBULENT, ts, solver="etdrk4", unstable_step="ignore")
    # Without dt0, 0.9 of the limit: the fewest such steps per save interval.
    trajectory = simlab.simulate(model, TURBULENT, ts, solver="etdrk4", adaptive=False)
    per_interval = np.ceil(float(ts[1]) / (0.9 * limit))
    assert int(trajectory.stats["num_steps"]) == (SAVES - 1) * per_interval


def test_explicit_solvers_are_held_to_the_viscous_limit_which_etdrk4_does_not_have():
    # Forward Euler on -ν|k|², flow at rest: Δt ≤ 2 / (ν max|k|²), the largest |k|² being
    # that of the corner Nyquist mode, (π/h)² on each axis.
    viscosity = 0.5
    model = NavierStokes2D(grid=GRID, viscosity=viscosity)
    at_rest = jnp.zeros(GRID.shape)
    largest_k2 = 2 * (np.pi / GRID.spacing[0]) ** 2
    limit = 2 / (viscosity * largest_k2)
    np.testing.assert_allclose(model.max_stable_step(diffrax.Euler(), at_rest), limit, rtol=1e-9)
    assert model.max_stable_step(ETDRK4(), at_rest) == np.inf
    message = rf"dt0={2 * limit:g} is above the largest stable step {re.escape(f'{limit:.6g}')}"
    with pytest.raises(simlab.SimulationError, match=message):
        simlab.simulate(
            model, at_rest, jnp.array([0.0, 0.1]), solver="euler", adaptive=False, dt0=2 * limit
        )


def test_a_blow_up_is_reported_with_its_time_and_the_courant_number_before_it():
    # Strong Kolmogorov forcing from near rest: the initial flow allows a long step, the
    # forced flow (towards U = χ/(ν n²) = 12.5) outgrows it and the solve blows up.
    grid = GRID
    w0 = random_vorticity(jax.random.PRNGKey(0), grid, peak_wavenumber=2.0, energy=1e-4)
    model = NavierStokes2D(grid=grid, viscosity=0.02, forcing_amplitude=4.0)
    dt, ts = 0.5, jnp.linspace(0.0, 20.0, SAVES)  # two steps a save, as in the test above
    assert float(model.max_stable_step(ETDRK4(), w0)) > dt
    solve = dict(solver="etdrk4", adaptive=False, dt0=dt)
    trajectory = simlab.simulate(model, w0, ts, throw=False, **solve)
    assert trajectory.result == simlab.RESULTS.nonfinite_state
    finite = np.all(np.isfinite(np.asarray(trajectory.ys)), axis=(1, 2))
    last = int(np.argmin(finite)) - 1
    before = trajectory.ys[last]
    courant = float(courant_number(before, grid, dt))
    limit = float(model.max_stable_step(ETDRK4(), before))
    assert limit < dt  # the flow had sped up past the step's limit
    with pytest.raises(simlab.SimulationError) as caught:
        simlab.simulate(model, w0, ts, **solve)
    message = str(caught.value)
    assert f"the first NaN or inf came at t = {float(trajectory.nonfinite_time):.10g}" in message
    assert (
        f"At t = {float(ts[last]):.6g}, the last save before it, the Courant number "
        f"dt0·max(|u|/h_x + |v|/h_y) was {courant:.3g}, and the largest stable step of that "
        f"flow {limit:.3g}, below dt0=0.5"
    ) in message
