r"""Stochastic PDEs on a grid against the exact statistics of their linear dynamics.

The periodic stochastic heat equation on $N$ cells of width $h = L/N$ is linear: with the
DFT $\hat u_k = \sum_j u_j e^{-2\pi i jk/N}$, mode $k$ is an Ornstein–Uhlenbeck process
of rate $D\lambda_k$, $\lambda_k = (4/h^2)\sin^2(\pi k/N)$, driven by the DFT of $N$
independent cell noises of variance $\sigma^2/h$ per unit time, so from $u = 0$

$$
E|\hat u_k(T)|^2 = \frac{N\sigma^2}{h}\,\frac{1 - e^{-2D\lambda_k T}}{2D\lambda_k}
\quad (k \ne 0), \qquad E|\hat u_0(T)|^2 = \frac{N\sigma^2}{h}\,T .
$$

Statistical assertions use fixed keys and allow 4 standard errors (a false alarm below
1e-4 per comparison for a Gaussian estimate). SRA1's time-stepping bias on the modes
compared is below 1 % at the steps used (relative $-(\mu\,\Delta t)^2/6$ at rate $\mu$ in
the stationary state), against standard errors of 3 % or more.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab.integrate import brownian_path

LENGTH = 1.0
DIFFUSIVITY = 0.5
NOISE = 1.0
END = 0.02
STEP = 1.8e-4  # D λ_max Δt ≈ 1.5 on 64 cells, 0.37 on 32 (stable below 2)
PATHS = 1000
STANDARD_ERRORS = 4.0


def periodic_grid(cells):
    return simlab.Grid((cells,), extent=LENGTH, boundary="periodic")


def final_fields(model, cells, seed, end, dt0):
    """The field at `end` on `PATHS` paths from u = 0, one key per path."""
    ts = jnp.array([0.0, end])
    keys = jax.random.split(jax.random.key(seed), PATHS)

    def one_path(key):
        return simlab.simulate(model, jnp.zeros(cells), ts, key=key, adaptive=False, dt0=dt0)

    return np.asarray(jax.jit(jax.vmap(lambda key: one_path(key).ys[-1]))(keys))


@pytest.fixture(scope="module")
def heat_ensembles():
    """Final fields of the stochastic heat equation on 32 and 64 cells (independent keys)."""
    ensembles = {}
    for seed, cells in enumerate((32, 64)):
        model = simlab.models.StochasticHeat(
            diffusivity=DIFFUSIVITY, noise_strength=NOISE, grid=periodic_grid(cells)
        )
        ensembles[cells] = final_fields(model, cells, seed, END, STEP)
    return ensembles


def mean_and_error(samples):
    return samples.mean(), samples.std(ddof=1) / np.sqrt(samples.size)


def mode_power(fields):
    """|û_k|² per path for k = 0 .. N/2."""
    return np.abs(np.fft.rfft(fields, axis=-1)) ** 2


def laplacian_eigenvalue(k, cells):
    h = LENGTH / cells
    return 4 / h**2 * np.sin(np.pi * k / cells) ** 2


def test_spatial_mean_is_the_brownian_mean_of_the_cell_noises():
    """On every path the spatial mean moves by exactly σ/√h times the average of the cells'
    Brownian motions (diffusion conserves it), a Brownian motion of variance σ² t / L."""
    cells, dt0 = 32, 1e-3
    grid = periodic_grid(cells)
    model = simlab.models.StochasticHeat(diffusivity=0.1, noise_strength=0.7, grid=grid)
    (x,) = grid.coordinates()
    y0 = jnp.sin(2 * jnp.pi * x) + 0.3
    ts = jnp.linspace(0.0, 0.2, 5)
    key = jax.random.key(3)
    path = simlab.simulate(model, y0, ts, key=key, adaptive=False, dt0=dt0)
    W = brownian_path(key, ts, dt0, grid.shape)
    expected = jnp.mean(y0) + 0.7 / np.sqrt(grid.cell_volume) * jnp.mean(W, axis=-1)
    np.testing.assert_allclose(path.ys.mean(axis=-1), expected, rtol=0, atol=1e-12)


def test_fourier_modes_have_the_ornstein_uhlenbeck_variance(heat_ensembles):
    """E|û_k(T)|² for k = 0 .. N/4 on 32 cells against the exact formula of the module
    docstring (the higher modes carry SRA1's larger stepping bias): their mean ratio to it
    within 4 standard errors, and each mode within 5 (a false alarm below 1e-5 per mode)."""
    cells = 32
    h = LENGTH / cells
    power = mode_power(heat_ensembles[cells])
    ratios = []
    for k in range(cells // 4 + 1):
        rate = DIFFUSIVITY * laplacian_eigenvalue(k, cells)
        growth = END if k == 0 else -np.expm1(-2 * rate * END) / (2 * rate)
        ratios.append(power[:, k] / (cells * NOISE**2 / h * growth))
        estimate, error = mean_and_error(ratios[-1])
        assert abs(estimate - 1) < 5 * error, (k, estimate, error)
    pooled, error = mean_and_error(np.concatenate(ratios))  # independent modes
    assert abs(pooled - 1) < STANDARD_ERRORS * error, (pooled, error)


def interval_average_variance_continuum(ell, terms=200_000):
    r"""Var of the average of the continuum field over an interval of length `ell` at END:
    $\sigma^2 T/L + 2\sum_{k \ge 1} \mathrm{sinc}^2(k\ell/L)\,\sigma^2
    (1 - e^{-2Dq_k^2T}) / (2Dq_k^2 L)$, $q_k = 2\pi k/L$ (orthonormal Fourier modes)."""
    k = np.arange(1, terms)
    q = 2 * np.pi * k / LENGTH
    modes = np.sinc(k * ell / LENGTH) ** 2 * -np.expm1(-2 * DIFFUSIVITY * q**2 * END)
    return (
        NOISE**2 * END / LENGTH + 2 * NOISE**2 * np.sum(modes / (2 * DIFFUSIVITY * q**2)) / LENGTH
    )


def test_interval_average_converges_under_refinement(heat_ensembles):
    """The variance of the field averaged over [0, L/4) is the same on 32 and 64 cells and
    equals the continuum value (the semi-discrete values differ from it by 0.6 % and 0.2 %,
    SRA1's steps by 0.2 %, well inside the 4.5 % standard error). Noise per cell without
    the 1/√h would halve the variance from 32 to 64 cells, about 8 standard errors of the
    difference."""
    ell = LENGTH / 4
    expected = interval_average_variance_continuum(ell)
    variances, errors = {}, {}
    for cells, fields in heat_ensembles.items():
        averages = fields[:, : int(cells * ell / LENGTH)].mean(axis=-1)
        variance, error = mean_and_error(averages**2)  # the mean is 0
        variances[cells], errors[cells] = variance, error
        assert abs(variance - expected) < STANDARD_ERRORS * error, (cells, variance, expected)
    difference_error = np.hypot(errors[32], errors[64])
    assert abs(variances[32] - variances[64]) < STANDARD_ERRORS * difference_error


def test_allen_cahn_linearised_about_a_phase():
    """Near u = 1 with weak noise, v = u - 1 is an Ornstein–Uhlenbeck field with mode rates
    ε²λ_k + 2: every mode's E|v̂_k|² at T = 1 against the exact formula (the cubic terms
    shift it by about the per-cell variance, 1e-3 relative, far inside the 3 % error)."""
    cells, epsilon, noise, end = 32, 0.05, 0.01, 1.0
    h = LENGTH / cells
    model = simlab.models.StochasticAllenCahn(
        epsilon=epsilon, noise_strength=noise, grid=periodic_grid(cells)
    )
    ts = jnp.array([0.0, end])
    keys = jax.random.split(jax.random.key(7), PATHS)
    solve = lambda key: simlab.simulate(  # noqa: E731
        model, jnp.ones(cells), ts, key=key, adaptive=False, dt0=0.01
    ).ys[-1]
    fields = np.asarray(jax.jit(jax.vmap(solve))(keys))
    power = mode_power(fields - fields.mean(axis=0))  # v minus the cubic terms' small drift
    for k in range(cells // 2 + 1):
        rate = epsilon**2 * laplacian_eigenvalue(k, cells) + 2
        expected = cells * noise**2 / h * -np.expm1(-2 * rate * end) / (2 * rate)
        estimate, error = mean_and_error(power[:, k])
        assert abs(estimate - expected) < STANDARD_ERRORS * error, (k, estimate, expected, error)


@pytest.mark.parametrize(
    ("solver", "method"),
    [("euler_maruyama", simlab.integrate.EulerMaruyama()), ("sra1", simlab.integrate.SRA1())],
)
def test_stable_step_is_the_explicit_diffusion_limit(solver, method):
    """Forward Euler and SRA1's drift part are stable for D λ_max Δt ≤ 2, Δt ≤ h²/(2D):
    simulate picks a step below it and refuses one above."""
    cells = 32
    h = LENGTH / cells
    grid = periodic_grid(cells)
    model = simlab.models.StochasticHeat(diffusivity=DIFFUSIVITY, noise_strength=NOISE, grid=grid)
    limit = float(model.max_stable_step(method, grid.zeros()))
    np.testing.assert_allclose(limit, h**2 / (2 * DIFFUSIVITY), rtol=1e-8)
    ts = jnp.array([0.0, 0.01])
    with pytest.raises(simlab.SimulationError, match="largest stable step"):
        simlab.simulate(
            model,
            grid.zeros(),
            ts,
            key=jax.random.key(0),
            solver=solver,
            adaptive=False,
            dt0=1.1 * limit,
        )


@pytest.mark.parametrize(
    ("model", "fields", "name"),
    [
        (simlab.models.StochasticHeat, dict(diffusivity=-1.0, noise_strength=1.0), "diffusivity"),
        (
            simlab.models.StochasticHeat,
            dict(diffusivity=1.0, noise_strength=-1.0),
            "noise_strength",
        ),
        (simlab.models.StochasticAllenCahn, dict(epsilon=0.0, noise_strength=1.0), "epsilon"),
        (
            simlab.models.StochasticAllenCahn,
            dict(epsilon=0.1, noise_strength=np.nan),
            "noise_strength",
        ),
        (
            simlab.models.StochasticHeat,
            dict(diffusivity=np.ones(32), noise_strength=1.0),
            "diffusivity",
        ),
    ],
)
def test_bad_parameters_are_refused(model, fields, name):
    with pytest.raises(ValueError, match=name):
        model(grid=periodic_grid(32), **fields)


def test_bad_order_is_refused():
    with pytest.raises(ValueError, match="order"):
        simlab.models.StochasticHeat(
            diffusivity=1.0, noise_strength=1.0, grid=periodic_grid(32), order=3
        )


@pytest.mark.parametrize("noise_shape", [(16, 32), (7, 9), ()])  # rows of 128, or one row
def test_a_steps_normals_are_hashed_component_by_component(noise_shape):
    """Block by block, the loop draws what the counter definition gives each component:
    in float32, component i < P of step s is the first word of the hash of (s, i) and
    component P + i its second (P hashes a step); in float64, one hash per component."""
    from simlab.integrate._brownian import (
        block_draws,
        hashed_bits,
        normals_per_hash,
        pairs,
        standard_normal,
        steps_per_block,
    )

    dtype = jnp.asarray(1.0).dtype
    words = jnp.array([12345, 678], jnp.uint32)
    size = int(np.prod(noise_shape))
    count = pairs(size, dtype)
    component = jnp.arange(size, dtype=jnp.uint32)
    for block in (0, 5):
        step = block * steps_per_block(noise_shape)  # the block's first step
        first, *second = hashed_bits(words, step, component % count, dtype)
        bits = jnp.where(component < count, first, second[0]) if second else first
        expected = standard_normal(bits, dtype).reshape(noise_shape)
        draws = block_draws(words, block, noise_shape, dtype, area=False)
        drawn = jax.lax.bitcast_convert_type(draws.dW[0], dtype)
        assert normals_per_hash(dtype) == len(second) + 1
        np.testing.assert_array_equal(drawn, expected)


@pytest.mark.parametrize("noise_shape", [(), (3,), (7, 9)])
def test_a_step_of_fewer_than_128_hashes_draws_them_as_one_row(noise_shape):
    """Fewer hashes than a row of 128 stay one row a step, with no axis of one: a vmapped
    path's draws would otherwise pad every hash to an accelerator tile of its own."""
    from simlab.integrate._brownian import block_draws

    words = jnp.array([12345, 678], jnp.uint32)
    jaxpr = jax.make_jaxpr(lambda w: block_draws(w, 3, noise_shape, jnp.float32, area=True))
    shapes = [v.aval.shape for eqn in jaxpr(words).eqns for v in eqn.outvars]
    assert max(len(shape) for shape in shapes) <= max(2, 1 + len(noise_shape))
