"""Grid, boundary conditions, ghost cells and stencil operators: accuracy and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import without_type_checks

import simlab
from simlab import grid as sg
from simlab.grid import _dispatch, _stability


def _periodic_line(num_cells: int) -> sg.Grid:
    return sg.Grid((num_cells,), extent=2 * np.pi)


def _fitted_order(errors, sizes) -> float:
    slope, _ = np.polyfit(np.log(sizes), np.log(errors), 1)
    return -slope


SIZES = (32, 64, 128)
EXPECTED_ORDERS = {
    "laplacian2": 2,
    "laplacian4": 4,
    "gradient": 2,
    "divergence": 2,
    "upwind": 1,
    "central": 2,
}


def _operator_errors(size: int) -> dict[str, float]:
    """Max-norm errors of every operator on a smooth periodic function, in one compile."""
    grid = _periodic_line(size)

    @jax.jit
    def errors():
        (x,) = grid.coordinates()
        field = jnp.exp(jnp.sin(x))
        derivative = jnp.cos(x) * field
        second_derivative = (jnp.cos(x) ** 2 - jnp.sin(x)) * field
        velocity = jnp.sin(x)[None]  # both signs, so both upwind directions are exercised
        approximations = {
            "laplacian2": (sg.laplacian(field, grid), second_derivative),
            "laplacian4": (sg.laplacian(field, grid, order=4), second_derivative),
            "gradient": (sg.gradient(field, grid)[0], derivative),
            "divergence": (sg.divergence(field[None], grid), derivative),
            "upwind": (sg.advection(field, velocity, grid), velocity[0] * derivative),
            "central": (
                sg.advection(field, velocity, grid, scheme="central"),
                velocity[0] * derivative,
            ),
        }
        return {name: jnp.max(jnp.abs(a - b)) for name, (a, b) in approximations.items()}

    return {name: float(value) for name, value in errors().items()}


@pytest.fixture(scope="module")
def operator_errors():
    return [_operator_errors(size) for size in SIZES]


@pytest.mark.parametrize("operator", sorted(EXPECTED_ORDERS))
def test_operator_convergence_order(operator, operator_errors):
    errors = [errors_at_size[operator] for errors_at_size in operator_errors]
    assert abs(_fitted_order(errors, SIZES) - EXPECTED_ORDERS[operator]) < 0.2


def test_laplacian_2d_anisotropic_grid_eigenfunction():
    grid = sg.Grid((24, 16), extent=(2.0, 1.0))
    x, y = grid.mesh()
    field = jnp.sin(np.pi * x) * jnp.cos(2 * np.pi * y)
    # The 5-point stencil's exact eigenvalue for this mode: sum of (2cos(kh) - 2)/h^2.
    wavenumbers = (np.pi, 2 * np.pi)
    eigenvalue = sum(
        (2 * np.cos(k * h) - 2) / h**2 for k, h in zip(wavenumbers, grid.spacing, strict=True)
    )
    np.testing.assert_allclose(sg.laplacian(field, grid), eigenvalue * field, atol=1e-12)


def test_divergence_of_gradient_is_the_wide_laplacian():
    grid = sg.Grid((10, 12), extent=(1.0, 2.0))
    field = np.random.default_rng(0).standard_normal(grid.shape)
    wide = jax.jit(lambda f: sg.divergence(sg.gradient(f, grid), grid))(field)
    field = np.asarray(field)
    # The same operator as the Laplacian on a grid with twice the spacing, taken per parity.
    x_part = (np.roll(field, -2, 0) - 2 * field + np.roll(field, 2, 0)) / (2 * grid.spacing[0]) ** 2
    y_part = (np.roll(field, -2, 1) - 2 * field + np.roll(field, 2, 1)) / (2 * grid.spacing[1]) ** 2
    np.testing.assert_allclose(wide, x_part + y_part, atol=1e-10)


def test_dirichlet_ghost_cells_put_the_value_on_the_face():
    grid = sg.Grid((6,), spacing=0.5, boundary=(sg.Dirichlet(2.0), sg.Dirichlet(-1.0)))
    field = jnp.arange(6.0) ** 2
    padded = sg.pad(field, grid, 2)
    np.testing.assert_allclose(padded[2:-2], field)
    np.testing.assert_allclose(0.5 * (padded[1] + padded[2]), 2.0)  # low face
    np.testing.assert_allclose(0.5 * (padded[0] + padded[3]), 2.0)
    np.testing.assert_allclose(0.5 * (padded[-2] + padded[-3]), -1.0)  # high face
    np.testing.assert_allclose(0.5 * (padded[-1] + padded[-4]), -1.0)


def test_neumann_ghost_cells_give_the_outward_derivative():
    h = 0.25
    grid = sg.Grid((5, 4), spacing=h, boundary=[(sg.Neumann(3.0), sg.Neumann(-1.0)), "periodic"])
    field = np.random.default_rng(1).standard_normal((2, *grid.shape))  # a leading channel axis
    padded = np.asarray(jax.jit(sg.pad, static_argnums=2)(field, grid, 2))  # grid: a pytree
    assert padded.shape == (2, 9, 8)
    interior = padded[:, 2:-2, 2:-2]
    np.testing.assert_allclose(interior, field)
    # Outward at the low side is -x: (ghost - mirror) / distance = du/dn.
    np.testing.assert_allclose((padded[:, 1, 2:-2] - padded[:, 2, 2:-2]) / h, 3.0)
    np.testing.assert_allclose((padded[:, 0, 2:-2] - padded[:, 3, 2:-2]) / (3 * h), 3.0)
    np.testing.assert_allclose((padded[:, -2, 2:-2] - padded[:, -3, 2:-2]) / h, -1.0)
    # The periodic axis wraps.
    np.testing.assert_allclose(padded[:, 2:-2, :2], field[:, :, -2:])
    np.testing.assert_allclose(padded[:, 2:-2, -2:], field[:, :, :2])


@pytest.mark.parametrize("boundary", ["periodic", "neumann"])
def test_diffusion_with_a_field_conserves_the_total(boundary):
    grid = sg.Grid((9, 7), extent=(1.0, 1.3), boundary=boundary)
    rng = np.random.default_rng(2)
    field = rng.standard_normal(grid.shape)
    diffusivity = 0.1 + rng.uniform(size=grid.shape)
    rate, constant_field, scalar = jax.jit(
        lambda u, d: (
            sg.diffusion(u, d, grid),
            sg.diffusion(u, jnp.full(grid.shape, 0.3), grid),
            0.3 * sg.laplacian(u, grid),
        )
    )(field, diffusivity)
    assert abs(float(grid.integrate(rate))) < 1e-12 * float(jnp.max(jnp.abs(rate)))
    np.testing.assert_allclose(constant_field, scalar, atol=1e-10)  # the scalar path agrees


def test_operators_compose_with_jit_vmap_and_grad():
    grid = sg.Grid((8, 8), extent=1.0)
    fields = np.random.default_rng(3).standard_normal((3, *grid.shape))
    weights = np.random.default_rng(4).standard_normal(grid.shape)

    @jax.jit
    def check(fields, weights):
        batched = jax.vmap(lambda f: sg.laplacian(f, grid))(fields)
        # The periodic Laplacian is symmetric, so the gradient of <w, L u> is L w.
        grad = jax.grad(lambda f: jnp.sum(weights * sg.laplacian(f, grid, order=4)))(fields[0])
        return batched, sg.laplacian(fields, grid), grad, sg.laplacian(weights, grid, order=4)

    batched, channels, grad, expected_grad = check(fields, weights)
    np.testing.assert_allclose(batched, channels, atol=1e-12)
    np.testing.assert_allclose(grad, expected_grad, atol=1e-9)


def test_impl_dispatch(monkeypatch):
    grid = sg.Grid((8, 9), extent=1.0)
    field = jnp.linspace(0.0, 1.0, 72).reshape(grid.shape) ** 2
    np.testing.assert_array_equal(
        sg.laplacian(field, grid, impl="xla"), sg.laplacian(field, grid, impl="auto")
    )
    assert sg.resolve_impl("xla") == "xla" and sg.resolve_impl("pallas") == "pallas"
    calls = []

    def fake_kernel(padded, spacing, *, order):
        calls.append((padded.shape, spacing, order))
        return sg.laplacian_interior(padded, spacing, order=order, impl="xla")

    monkeypatch.setitem(_dispatch._PALLAS_KERNELS, "laplacian", fake_kernel)
    np.testing.assert_allclose(
        sg.laplacian(field, grid, order=4, impl="pallas"),
        sg.laplacian(field, grid, order=4),
        rtol=1e-13,
    )
    assert calls == [((12, 13), grid.spacing, 4)]
    # "auto" on a GPU keeps XLA, measured faster there; where a kernel is measured faster
    # it takes the kernel, and an operator without one keeps XLA.
    monkeypatch.setattr(_dispatch.jax, "default_backend", lambda: "gpu")
    assert sg.resolve_impl("auto") == "xla"
    monkeypatch.setattr(_dispatch, "PALLAS_MEASURED_FASTER", {("gpu", "laplacian")})
    assert sg.resolve_impl("auto") == "pallas"
    np.testing.assert_allclose(
        sg.laplacian(field, grid), sg.laplacian(field, grid, impl="xla"), rtol=1e-13
    )
    assert len(calls) == 2
    np.testing.assert_array_equal(sg.gradient(field, grid), sg.gradient(field, grid, impl="xla"))
    with pytest.raises(ValueError, match="'gradient' has no Pallas kernel"):
        sg.gradient(field, grid, impl="pallas")


def test_grid_geometry():
    grid = simlab.Grid((4, 5), spacing=(0.5, 0.2), origin=(1.0, -1.0))
    assert grid.ndim == 2 and grid.num_cells == 20
    np.testing.assert_allclose(grid.extent, (2.0, 1.0))
    np.testing.assert_allclose(grid.coordinates()[0], [1.25, 1.75, 2.25, 2.75])
    assert grid.mesh()[1].shape == (4, 5)
    np.testing.assert_allclose(grid.integrate(jnp.ones((3, 4, 5))), [2.0, 2.0, 2.0])
    assert grid == simlab.Grid((4, 5), spacing=(0.5, 0.2), origin=(1.0, -1.0))
    assert hash(grid) == hash(simlab.Grid((4, 5), spacing=(0.5, 0.2), origin=(1.0, -1.0)))
    assert grid.is_periodic == (True, True)
    assert isinstance(grid.boundary(1, "high"), simlab.Periodic)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(shape=(2, 8)), "smaller than the stencils"),
        (dict(shape=(4, 4, 4, 4)), "1 to 3 integers"),
        (dict(shape=(8.0,)), "1 to 3 integers"),
        (dict(shape=(8,), spacing=0.0), "spacing must be positive"),
        (dict(shape=(8,), extent=-1.0), "extent must be positive"),
        (dict(shape=(8,), extent=float("nan")), "extent must be finite"),
        (dict(shape=(8, 8), spacing=(1.0,)), "one per axis"),
        (dict(shape=(8,), extent=1.0, spacing=0.1), "not both"),
        (dict(shape=(8,), boundary="reflecting"), "unknown boundary condition 'reflecting'"),
        (dict(shape=(8,), boundary=3), "boundary must be one condition"),
        (dict(shape=(8, 8), boundary=["periodic"]), "boundary must be one condition"),
        (dict(shape=(8,), boundary=[("periodic", "neumann")]), "periodic on one side only"),
        (dict(shape=(8,), boundary=[("neumann",)]), r"a \(low, high\) pair"),
    ],
)
def test_grid_rejects_bad_input(kwargs, message):
    shape = kwargs.pop("shape")
    with pytest.raises(ValueError, match=message), without_type_checks():
        sg.Grid(shape, **kwargs)


def test_conditions_reject_non_finite_values():
    with pytest.raises(ValueError, match="Dirichlet value must be a finite float"):
        sg.Dirichlet(float("inf"))
    with pytest.raises(ValueError, match="Neumann normal_derivative must be a finite float"):
        with without_type_checks():
            sg.Neumann("1")


def test_operators_reject_bad_input():
    grid = sg.Grid((8, 6))
    field = jnp.zeros(grid.shape)
    with pytest.raises(ValueError, match=r"end in the grid's shape \(8, 6\)"):
        sg.laplacian(jnp.zeros((6, 8)), grid)
    with pytest.raises(ValueError, match="pad width must be an integer from 1"):
        sg.pad(field, grid, 0)
    with pytest.raises(ValueError, match="pad width must be an integer from 1"):
        sg.pad(field, grid, 7)
    with pytest.raises(ValueError, match=r"order must be one of \(2, 4\)"):
        sg.laplacian(field, grid, order=3)
    with pytest.raises(ValueError, match="impl must be one of"), without_type_checks():
        sg.laplacian(field, grid, impl="cuda")
    with pytest.raises(ValueError, match="scheme must be one of"), without_type_checks():
        sg.advection(field, jnp.ones(2), grid, scheme="weno")
    with pytest.raises(ValueError, match=r"velocity must have shape \(2,\)"):
        sg.advection(field, jnp.ones(3), grid)
    with pytest.raises(ValueError, match="vector field of shape"):
        sg.divergence(field, grid)
    with pytest.raises(ValueError, match="diffusivity must be a scalar or a field"):
        sg.diffusion(field, jnp.ones(8), grid)
    with pytest.raises(ValueError, match="spacing must be positive"):
        sg.laplacian_interior(jnp.zeros((10, 8)), (1.0, -1.0))
    with pytest.raises(ValueError, match="needs more than 4 cells"):
        sg.laplacian_interior(jnp.zeros((4, 8)), (1.0, 1.0), order=4)
    with pytest.raises(ValueError, match="impl must be one of"), without_type_checks():
        sg.resolve_impl("triton")


@pytest.mark.parametrize("order", [2, 4])
def test_laplacian_equals_its_interior_form_on_a_padded_array(order):
    # The contract a domain-decomposed run relies on: pad, then laplacian_interior.
    grid = sg.Grid(
        (7, 9),
        extent=(1.0, 2.0),
        boundary=[(sg.Dirichlet(1.0), sg.Neumann(-2.0)), "periodic"],
    )
    field = np.random.default_rng(5).standard_normal((2, *grid.shape))
    width = sg.stencil_width("laplacian", order=order)
    direct, from_padded = jax.jit(
        lambda f: (
            sg.laplacian(f, grid, order=order),
            sg.laplacian_interior(sg.pad(f, grid, width), grid.spacing, order=order),
        )
    )(field)
    np.testing.assert_allclose(direct, from_padded, rtol=1e-12, atol=1e-9)


def _band_limited(grid):
    """A smooth field of a few modes on a (2 pi, 3) periodic box, and its exact derivatives."""
    x, y = grid.mesh()
    ky = 2 * jnp.pi / 3
    u = jnp.sin(2 * x) * jnp.cos(2 * ky * y) + 0.5 * jnp.cos(3 * x - ky * y)
    u_x = 2 * jnp.cos(2 * x) * jnp.cos(2 * ky * y) - 1.5 * jnp.sin(3 * x - ky * y)
    u_y = -2 * ky * jnp.sin(2 * x) * jnp.sin(2 * ky * y) + 0.5 * ky * jnp.sin(3 * x - ky * y)
    lap = -(4 + 4 * ky**2) * jnp.sin(2 * x) * jnp.cos(2 * ky * y) - 0.5 * (9 + ky**2) * jnp.cos(
        3 * x - ky * y
    )
    return u, jnp.stack([u_x, u_y]), lap


def test_spectral_impl_is_exact_on_band_limited_fields():
    grid = sg.Grid((16, 12), extent=(2 * np.pi, 3.0))
    u, gradient, lap = _band_limited(grid)
    np.testing.assert_allclose(sg.laplacian(u, grid, impl="spectral"), lap, atol=1e-12)
    np.testing.assert_allclose(sg.gradient(u, grid, impl="spectral"), gradient, atol=1e-12)
    np.testing.assert_allclose(sg.divergence(gradient, grid, impl="spectral"), lap, atol=1e-12)
    velocity = jnp.array([0.7, -1.3])
    np.testing.assert_allclose(
        sg.advection(u, velocity, grid, impl="spectral"),
        0.7 * gradient[0] - 1.3 * gradient[1],
        atol=1e-12,
    )
    np.testing.assert_allclose(sg.diffusion(u, 0.3, grid, impl="spectral"), 0.3 * lap, atol=1e-12)
    # The same operators as simlab.grid._spectral, and far from the stencils' h^2 error.
    assert jnp.array_equal(sg.laplacian(u, grid, impl="spectral"), sg.spectral_laplacian(u, grid))
    assert jnp.array_equal(sg.gradient(u, grid, impl="spectral"), sg.spectral_gradient(u, grid))
    assert float(jnp.max(jnp.abs(sg.laplacian(u, grid) - lap))) > 0.1
    # A constant diffusivity field gives the scalar result; channels pass through.
    field = jnp.full(grid.shape, 0.3)
    np.testing.assert_allclose(sg.diffusion(u, field, grid, impl="spectral"), 0.3 * lap, atol=1e-12)
    both = jnp.stack([u, 2 * u])
    np.testing.assert_allclose(
        sg.laplacian(both, grid, impl="spectral"), jnp.stack([lap, 2 * lap]), atol=1e-12
    )


def test_spectral_heat_decays_at_the_exact_rate():
    grid = sg.Grid((16,), extent=2 * np.pi)
    (x,) = grid.coordinates()
    model = simlab.models.Heat(diffusivity=0.1, grid=grid, impl="spectral")
    y0 = jnp.sin(5 * x)
    trajectory = simlab.simulate(model, y0, jnp.array([0.0, 1.0]), rtol=1e-12, atol=1e-12)
    exact = np.exp(-0.1 * 25) * np.sin(5 * x)
    np.testing.assert_allclose(trajectory.ys[-1], exact, atol=1e-9)
    stencil = simlab.models.Heat(diffusivity=0.1, grid=grid)
    finite_difference = simlab.simulate(stencil, y0, jnp.array([0.0, 1.0]), rtol=1e-12, atol=1e-12)
    assert float(jnp.max(jnp.abs(finite_difference.ys[-1] - exact))) > 1e-2


def test_spectral_impl_refuses_walls_and_padded_arrays():
    walls = sg.Grid((16,), extent=1.0, boundary="dirichlet")
    u = jnp.ones(16)
    for operator in (sg.laplacian, sg.gradient):
        with pytest.raises(ValueError, match="impl='spectral' works in Fourier space and needs a"):
            operator(u, walls, impl="spectral")
    with pytest.raises(ValueError, match="Heat with impl='spectral' works in Fourier space"):
        simlab.models.Heat(diffusivity=1.0, grid=walls, impl="spectral")
    with pytest.raises(ValueError, match="has no padded form: call simlab.grid.laplacian"):
        sg.laplacian_interior(jnp.ones(18), (0.1,), impl="spectral")
    assert sg.resolve_impl("spectral") == "spectral"


def test_default_stencil_width_pads_for_the_second_order_laplacian():
    """All defaults: one ghost cell, and the padded interior form converges to -k² sin(kx) at
    second order (error ratio 4 per halving of h), as `laplacian` itself does."""
    errors = []
    for n in (16, 32):
        grid = sg.Grid((n,), extent=2 * np.pi)
        (x,) = grid.coordinates()
        field = jnp.sin(3 * x)
        width = sg.stencil_width("laplacian")
        from_padded = sg.laplacian_interior(sg.pad(field, grid, width), grid.spacing)
        np.testing.assert_allclose(from_padded, sg.laplacian(field, grid), rtol=1e-12, atol=1e-12)
        errors.append(float(jnp.max(jnp.abs(from_padded + 9 * jnp.sin(3 * x)))))
    assert width == 1
    np.testing.assert_allclose(errors[0] / errors[1], 4.0, rtol=0.05)


# --- stability symbols: the eigenvalues the step-size limits are computed from ------------

SYMBOL_CELLS = 64  # theta = 2 pi m / 64 is every 8th of the 257 sampled wavenumbers


def _mode_eigenvalues(operator, cells: int) -> tuple[np.ndarray, np.ndarray]:
    """theta = k h and the eigenvalue operator(e^{ikx}) / e^{ikx} of each Fourier mode of a
    periodic line (from the real operator on cos and sin: it is linear and real)."""
    grid = sg.Grid((cells,), extent=2 * np.pi)
    (x,) = grid.coordinates()
    modes = np.arange(cells // 2 + 1)
    eigenvalues = []
    for m in modes:
        cos, sin = jnp.cos(float(m) * x), jnp.sin(float(m) * x)
        applied = np.asarray(operator(cos, grid)) + 1j * np.asarray(operator(sin, grid))
        ratio = applied / np.exp(1j * m * np.asarray(x))
        np.testing.assert_allclose(ratio, ratio[0], atol=1e-9)  # a Fourier mode is an eigenvector
        eigenvalues.append(ratio[0])
    return 2 * np.pi * modes / cells, np.array(eigenvalues)


@pytest.mark.parametrize(
    ("scheme", "impl"), [("upwind", "xla"), ("central", "xla"), ("upwind", "spectral")]
)
def test_the_advection_symbol_is_the_eigenvalue_of_the_advection_operator(scheme, impl):
    speed = 1.5

    def minus_advection(u, grid):
        return -sg.advection(u, jnp.array([speed]), grid, scheme=scheme, impl=impl)

    theta, eigenvalues = _mode_eigenvalues(minus_advection, SYMBOL_CELLS)
    h = 2 * np.pi / SYMBOL_CELLS
    symbol = np.asarray(_stability.advection_symbol((h,), jnp.array([speed]), scheme, impl))
    sampled = np.linspace(0.0, np.pi, symbol.size)
    index = np.searchsorted(sampled, theta - 1e-12)
    np.testing.assert_allclose(sampled[index], theta, atol=1e-12)
    # The Fourier derivative drops the Nyquist mode, whose derivative a real field on the grid
    # cannot carry.
    modes = slice(None, -1) if impl == "spectral" else slice(None)
    np.testing.assert_allclose(eigenvalues[modes], symbol[index][modes], atol=1e-9)


@pytest.mark.parametrize(("order", "impl"), [(2, "xla"), (4, "xla"), (2, "spectral")])
def test_the_laplacian_symbol_is_the_eigenvalue_of_the_laplacian(order, impl):
    theta, eigenvalues = _mode_eigenvalues(
        lambda u, grid: sg.laplacian(u, grid, order=order, impl=impl), SYMBOL_CELLS
    )
    h = 2 * np.pi / SYMBOL_CELLS
    symbol = _stability.laplacian_symbol((h,), order, impl)
    index = np.searchsorted(np.linspace(0.0, np.pi, symbol.size), theta - 1e-12)
    np.testing.assert_allclose(eigenvalues, symbol[index], atol=1e-8)


def test_symbols_are_complex_at_the_precision_of_the_speeds():
    """Strict promotion never mixes real and complex: speeds are cast explicitly, keeping
    their precision (float32 stays single), and integers become the default float."""
    assert _stability.as_complex(jnp.array([1.5], jnp.float32)).dtype == jnp.complex64
    assert _stability.as_complex(jnp.array([1.5], jnp.float64)).dtype == jnp.complex128
    integers = _stability.as_complex(jnp.array([2, 0]))
    assert integers.dtype == jnp.complex128
    np.testing.assert_array_equal(integers, [2.0 + 0j, 0j])
    already = jnp.array([1j], jnp.complex64)
    assert _stability.as_complex(already) is already


def test_a_periodic_axis_pads_up_to_its_own_length():
    """The widest allowed ghost layer is the smallest axis: on a periodic line it repeats
    the whole field on each side, as NumPy's wrap mode does."""
    line = sg.Grid((4,), extent=1.0)
    field = jnp.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(sg.pad(field, line, 4), np.pad(field, 4, mode="wrap"))
    with pytest.raises(ValueError, match="from 1 to the smallest grid axis 4; got 5"):
        sg.pad(field, line, 5)


@pytest.mark.parametrize(
    ("operator", "arguments"),
    [
        (sg.gradient_interior, ()),
        (sg.divergence_interior, ()),
        (sg.advection_interior, (jnp.ones(1),)),
        (sg.diffusion_interior, (jnp.ones(10),)),
    ],
)
def test_padded_forms_refuse_spectral_and_an_absent_pallas_kernel(operator, arguments):
    padded = jnp.ones((1, 10)) if operator is sg.divergence_interior else jnp.ones(10)
    with pytest.raises(ValueError, match="impl='spectral' transforms whole periodic fields"):
        operator(padded, *arguments, (0.1,), impl="spectral")
    if operator is sg.diffusion_interior:  # the variable-coefficient flux has no kernel
        with pytest.raises(ValueError, match="'diffusion' has no Pallas kernel"):
            operator(padded, *arguments, (0.1,), impl="pallas")
