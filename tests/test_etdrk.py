"""ETDRK4 in Fourier space: order 4, exact linear propagation, agreement with Exponax's own
ETDRK4 steppers, gradients, and clear refusals."""

import contextlib

import equinox as eqx
import exponax as ex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab._results import RESULTS
from simlab.grid import dealiasing_mask
from simlab.integrate import ETDRK4
from simlab.models import GrayScott, Heat, KuramotoSivashinsky, SwiftHohenberg
from simlab.models._split import AbstractSplitGridModel


@contextlib.contextmanager
def _exponax_rules():
    """Exponax is written for JAX's standard promotion rules (it multiplies real operators
    into complex spectra and broadcasts across ranks); its reference solutions, and only
    they, are computed under them."""
    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        yield


def _fitted_order(errors, steps) -> float:
    slope, _ = np.polyfit(np.log(steps), np.log(errors), 1)
    return slope


def _kassam_trefethen(num_points=64):
    """Kassam & Trefethen's Kuramoto–Sivashinsky set-up: x in [0, 32π), u0 = cos(x/16)(1 +
    sin(x/16))."""
    grid = simlab.Grid((num_points,), extent=32 * np.pi)
    (x,) = grid.coordinates()
    return grid, jnp.cos(x / 16) * (1 + jnp.sin(x / 16))


def _exponax_fraction(mask: np.ndarray, num_points: int) -> float:
    """Exponax's `dealiasing_fraction` that keeps the same modes as `mask`: Exponax keeps
    |m| <= fraction * (N // 2) - 1, simlab |m| < fraction * N / 2 (Orszag's rule)."""
    highest_kept = int(np.max(np.nonzero(mask[(0,) * (mask.ndim - 1)])[0]))  # the rfft axis
    return (highest_kept + 1.5) / (num_points // 2)


def test_etdrk4_is_fourth_order_on_kuramoto_sivashinsky():
    grid, y0 = _kassam_trefethen()
    model = KuramotoSivashinsky(grid=grid)
    ts = jnp.array([0.0, 10.0])

    def final(dt0):
        ys, result, _ = ETDRK4().solve(model, ts, y0, None, dt0=dt0, max_steps=10_000)
        assert result == RESULTS.successful
        return ys[-1]

    reference = final(1 / 32)
    steps = np.array([1.0, 0.5, 0.25])
    errors = [float(jnp.max(jnp.abs(final(h) - reference))) for h in steps]
    assert abs(_fitted_order(errors, steps) - 4) < 0.3


def test_etdrk4_propagates_a_linear_problem_exactly_with_the_stencils_symbol():
    # Heat on a periodic grid: ETDRK4 applies exp(t L) of the 5-point Laplacian itself, so
    # one huge step reproduces the semi-discrete solution exp(λ t) sin(kx) sin(ly).
    grid = simlab.Grid((16, 12), extent=(2 * np.pi, 2 * np.pi))
    x, y = grid.mesh()
    model = Heat(diffusivity=0.3, grid=grid)
    h = grid.spacing
    rate = 0.3 * ((2 * np.cos(2 * h[0]) - 2) / h[0] ** 2 + (2 * np.cos(3 * h[1]) - 2) / h[1] ** 2)
    y0 = jnp.sin(2 * x) * jnp.sin(3 * y)
    ts = jnp.array([0.0, 0.5, 4.0])
    ys, _, stats = ETDRK4().solve(model, ts, y0, None, dt0=10.0, max_steps=10)
    assert int(stats["num_steps"]) == 2
    for t, state in zip(ts, ys, strict=True):
        np.testing.assert_allclose(state, np.exp(rate * float(t)) * y0, atol=1e-13)


def test_kuramoto_sivashinsky_1d_agrees_with_exponax_to_roundoff():
    grid, y0 = _kassam_trefethen()
    model = KuramotoSivashinsky(grid=grid)
    dt, num_steps = 0.25, 80  # t = 20: the pattern still grows smoothly, far from chaos
    fraction = _exponax_fraction(dealiasing_mask(grid, model.dealiasing_fraction), 64)
    with _exponax_rules():
        stepper = ex.stepper.KuramotoSivashinsky(
            1, 32 * np.pi, 64, dt, order=4, dealiasing_fraction=fraction, num_circle_points=32
        )
        reference = ex.rollout(stepper, num_steps, include_init=True)(y0[None])[:, 0]
    exponax_mask = np.asarray(stepper._integrator._nonlinear_fun.dealiasing_mask[0])
    np.testing.assert_array_equal(exponax_mask, dealiasing_mask(grid, 2 / 3))
    ts = dt * jnp.arange(num_steps + 1, dtype=float)
    ys, _, _ = ETDRK4().solve(model, ts, y0, None, dt0=dt, max_steps=num_steps)
    assert float(jnp.max(jnp.abs(ys[-1] - y0))) > 0.3  # it did evolve
    np.testing.assert_allclose(ys, reference, atol=1e-12)


def test_kuramoto_sivashinsky_2d_agrees_with_exponax_etdrk4():
    # Exponax's KS stepper uses the anisotropic ∂x⁴ + ∂y⁴; the biharmonic Δ² of the usual
    # 2-D equation is set up from Exponax's own spectral operators and ETDRK4 integrator.
    n, extent, dt, num_steps = 32, 20.0, 0.1, 30
    grid = simlab.Grid((n, n), extent=extent)
    x, y = grid.mesh()
    y0 = jnp.sin(2 * np.pi * x / extent) * jnp.cos(4 * np.pi * y / extent) + 0.3 * jnp.cos(
        2 * np.pi * (x + y) / extent
    )
    model = KuramotoSivashinsky(grid=grid)
    mask = dealiasing_mask(grid, 2 / 3)
    with _exponax_rules():
        derivative = ex.spectral.build_derivative_operator(2, extent, n)
        laplace = ex.spectral.build_laplace_operator(derivative, order=2)
        nonlinear = ex.nonlin_fun.GradientNormNonlinearFun(
            2, n, derivative_operator=derivative, dealiasing_fraction=_exponax_fraction(mask, n)
        )
        integrator = ex.etdrk.ETDRK4(dt, -laplace - laplace**2, nonlinear, num_circle_points=32)
        spectrum = ex.fft(y0[None], num_spatial_dims=2)
        step = eqx.filter_jit(integrator.step_fourier)
        for _ in range(num_steps):
            spectrum = step(spectrum)
        reference = ex.ifft(spectrum, num_spatial_dims=2, num_points=n)[0]
    np.testing.assert_array_equal(np.asarray(nonlinear.dealiasing_mask[0]), mask)
    ys, _, _ = ETDRK4().solve(
        model, jnp.array([0.0, dt * num_steps]), y0, None, dt0=dt, max_steps=100
    )
    assert float(jnp.max(jnp.abs(ys[-1] - y0))) > 0.1
    np.testing.assert_allclose(ys[-1], reference, atol=1e-12)


def test_swift_hohenberg_agrees_with_exponax():
    n, extent, dt, num_steps = 32, 10 * np.pi, 0.5, 20
    grid = simlab.Grid((n, n), extent=extent)
    model = SwiftHohenberg(grid=grid)  # Exponax's defaults: r = 0.7, k = 1, u² - u³
    y0 = 0.2 * jax.random.normal(jax.random.PRNGKey(3), grid.shape)
    with _exponax_rules():
        stepper = ex.stepper.reaction.SwiftHohenberg(
            2, extent, n, dt, order=4, num_circle_points=32
        )
        reference = ex.repeat(stepper, num_steps)(y0[None])[0]
    mask = np.asarray(stepper._integrator._nonlinear_fun.dealiasing_mask[0])
    np.testing.assert_array_equal(mask, dealiasing_mask(grid, model.dealiasing_fraction))
    ys, _, _ = ETDRK4().solve(
        model, jnp.array([0.0, dt * num_steps]), y0, None, dt0=dt, max_steps=100
    )
    np.testing.assert_allclose(ys[-1], reference, atol=1e-12)


def test_gray_scott_with_etdrk4_matches_a_fine_explicit_reference():
    grid = simlab.Grid((24, 24), spacing=1.0)
    model = GrayScott(
        feed_rate=0.035, kill_rate=0.065, diffusivity_u=0.2, diffusivity_v=0.1, grid=grid
    )
    y0 = jnp.stack([jnp.ones(grid.shape), jnp.zeros(grid.shape)])
    y0 = y0.at[:, 9:15, 9:15].set(jnp.array([0.5, 0.25])[:, None, None])
    ts = jnp.array([0.0, 100.0, 200.0])
    reference = simlab.simulate(model, y0, ts, solver="rk4", adaptive=False, dt0=0.05).ys
    ys, result, stats = ETDRK4().solve(model, ts, y0, None, dt0=2.0, max_steps=1000)
    assert result == RESULTS.successful and int(stats["num_steps"]) == 100
    np.testing.assert_allclose(ys, reference, atol=5e-5)  # 40 explicit steps per ETDRK4 step


def test_uneven_save_times_land_on_the_same_steps():
    grid, y0 = _kassam_trefethen(32)
    model = KuramotoSivashinsky(grid=grid)
    uneven, _, stats = ETDRK4().solve(
        model, jnp.array([0.0, 1.0, 2.5]), y0, None, dt0=0.5, max_steps=10
    )
    even, _, _ = ETDRK4().solve(model, jnp.array([0.0, 2.5]), y0, None, dt0=0.5, max_steps=10)
    assert int(stats["num_steps"]) == 5
    assert stats["num_steps"].dtype == jnp.int32
    assert jnp.array_equal(uneven[0], y0)
    np.testing.assert_allclose(uneven[-1], even[-1], atol=1e-13)


def test_gradient_with_respect_to_a_parameter_matches_finite_differences():
    grid, y0 = _kassam_trefethen(32)
    ts = jnp.array([0.0, 5.0])

    def loss(hyperdiffusivity):
        model = KuramotoSivashinsky(grid=grid, hyperdiffusivity=hyperdiffusivity)
        ys, _, _ = ETDRK4().solve(model, ts, y0, None, dt0=0.25, max_steps=100)
        return jnp.sum(ys[-1] ** 2)

    value = jnp.asarray(1.2)
    gradient = jax.grad(loss)(value)
    step = 1e-5
    central = (loss(value + step) - loss(value - step)) / (2 * step)
    np.testing.assert_allclose(gradient, central, rtol=1e-6)


class _PowerLinearPart(AbstractSplitGridModel):
    """A split model whose "linear part" is -u**power and whose symbol claims zero."""

    grid: simlab.Grid
    power: int = eqx.field(static=True)
    impl: str = eqx.field(static=True, default="xla")

    @property
    def channel_shape(self):
        return ()

    def _check_fields(self):
        pass

    def linear(self, t, y, args):
        return -(y**self.power)

    def nonlinear(self, t, y, args):
        return jnp.zeros_like(y)

    def linear_symbol(self):
        return jnp.zeros(self.grid.shape[0] // 2 + 1)

    def __call__(self, t, y, args):
        return self.linear(t, y, args) + self.nonlinear(t, y, args)

    def linear_eigenvalues(self, y0):
        return np.zeros(1)


def test_bad_input_is_refused_clearly():
    walls = simlab.Grid((16,), extent=1.0, boundary="neumann")
    y0 = jnp.ones(16)
    ts = jnp.array([0.0, 1.0])
    with pytest.raises(ValueError, match="ETDRK4 works in Fourier space and needs a periodic grid"):
        ETDRK4().solve(Heat(diffusivity=1.0, grid=walls), ts, y0, None, dt0=0.1, max_steps=10)
    periodic = simlab.Grid((16,))
    with pytest.raises(ValueError, match="linear part of _PowerLinearPart is not linear"):
        ETDRK4().solve(_PowerLinearPart(periodic, 2), ts, y0, None, dt0=0.1, max_steps=10)
    with pytest.raises(ValueError, match="not the Fourier multiplier of its linear part"):
        ETDRK4().solve(_PowerLinearPart(periodic, 1), ts, y0, None, dt0=0.1, max_steps=10)
    field = Heat(diffusivity=jnp.linspace(1.0, 2.0, 16), grid=simlab.Grid((16,)))
    with pytest.raises(ValueError, match="diffusivity is a field; use an IMEX solver"):
        ETDRK4().solve(field, ts, y0, None, dt0=0.1, max_steps=10)
    lorenz = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)
    with pytest.raises(ValueError, match="declares no split"):
        ETDRK4().solve(lorenz, ts, jnp.ones(3), None, dt0=0.1, max_steps=10)
    model = KuramotoSivashinsky(grid=simlab.Grid((16,)))
    with pytest.raises(ValueError, match="pass dt0"):
        ETDRK4().solve(model, ts, y0, None, dt0=None, max_steps=10)
    with pytest.raises(ValueError, match="more than max_steps=5"):
        ETDRK4().solve(model, ts, y0, None, dt0=0.1, max_steps=5)
    with pytest.raises(ValueError, match="needs a periodic grid"):
        KuramotoSivashinsky(grid=walls)
