"""The kernel integrator (`integrator="kernel"`): a `jax.vmap` batch of fixed-step explicit
Runge–Kutta solves as one Pallas kernel, in the Pallas interpreter on a CPU.

It takes the same steps as the lean loop, so the two agree to roundoff at every save time;
the tests marked `accelerator` hold in float32 too (see tests/test_accelerator.py).
"""

import functools as ft

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simlab

FLOAT = jnp.asarray(1.0).dtype  # float64 with x64 on, float32 on an accelerator run
# Kernel against lean: the same steps in another order of operations.
AGREEMENT = 1e-12 if FLOAT == jnp.float64 else 1e-4
TS = np.linspace(0.0, 0.5, 6)  # concrete save times: the kernel needs its step count
DT = 0.01


def _lorenz(integrator, solver="tsit5"):
    """A Lorenz member with its own sigma, rho and initial state, solved at `TS`."""

    def solve(sigma, rho, y0):
        model = simlab.models.Lorenz(sigma=sigma, rho=rho, beta=8 / 3)
        return simlab.simulate(
            model, y0, TS, solver=solver, adaptive=False, dt0=DT, integrator=integrator
        )

    return solve


def _members(count):
    sigma = jnp.linspace(8.0, 12.0, count, dtype=FLOAT)
    rho = jnp.linspace(20.0, 30.0, count, dtype=FLOAT)
    y0 = jnp.stack([1.0 + sigma / 10, jnp.zeros(count, FLOAT), jnp.ones(count, FLOAT)], axis=1)
    return sigma, rho, y0


def _assert_agree(kernel, lean):
    scale = jnp.max(jnp.abs(lean), axis=-1, keepdims=True)
    np.testing.assert_array_less(jnp.abs(kernel - lean) / scale, AGREEMENT)


@pytest.mark.accelerator
@pytest.mark.parametrize("solver", ["rk4", "tsit5"])
def test_vmapped_batch_equals_lean(solver):
    members = _members(256)  # two blocks of 128 members in the interpreter
    kernel = jax.jit(jax.vmap(_lorenz("kernel", solver)))(*members)
    lean = jax.jit(jax.vmap(_lorenz("lean", solver)))(*members)
    assert kernel.integrator == "kernel"
    assert kernel.ys.shape == (256, len(TS), 3)
    _assert_agree(kernel.ys, lean.ys)
    assert bool(jnp.all(kernel.result == simlab.RESULTS.successful))


@pytest.mark.accelerator
def test_padded_nested_and_unbatched_solves_equal_lean():
    sigma, rho, y0 = _members(6)
    # Three members: padded to a whole block.
    padded = jax.vmap(_lorenz("kernel"))(sigma[:3], rho[:3], y0[:3])
    _assert_agree(padded.ys, jax.vmap(_lorenz("lean"))(sigma[:3], rho[:3], y0[:3]).ys)
    # Nested vmaps (rho shared along the inner one): one launch of the 2 x 3 members, in
    # one block of each platform's branch (the interpreter's 1 x 128, a TPU's 8 x 128).
    grid = jax.vmap(jax.vmap(_lorenz("kernel"), in_axes=(0, None, 0)), in_axes=(0, 0, None))
    grid_lean = jax.vmap(jax.vmap(_lorenz("lean"), in_axes=(0, None, 0)), in_axes=(0, 0, None))
    args = (sigma.reshape(2, 3), rho[:2], y0[:3])
    program = str(jax.make_jaxpr(lambda *a: grid(*a).ys)(*args))
    assert program.count("pallas_call") == 2
    assert "[6,3,1,128] = pallas_call" in program
    assert "[6,3,8,128] = pallas_call" in program
    _assert_agree(grid(*args).ys, grid_lean(*args).ys)
    # Unbatched: a batch of one.
    single = _lorenz("kernel")(sigma[0], rho[0], y0[0])
    _assert_agree(single.ys, _lorenz("lean")(sigma[0], rho[0], y0[0]).ys)
    assert single.integrator == "kernel"


WHOLE_STATE_FIELDS = {
    "linear": lambda t, y, a: jnp.asarray([[-a, 1.0], [-1.0, -a]], y.dtype) @ y,
    "cumulative": lambda t, y, a: -a * jnp.cumsum(y[::-1]) + jnp.sum(y) * jnp.sin(t),
    "piecewise": lambda t, y, a: jnp.where(y == y[0], -a * y, -(y**3)) + jnp.array([y[1], 0.0]),
}


@pytest.mark.accelerator
@pytest.mark.parametrize("name", sorted(WHOLE_STATE_FIELDS))
def test_fields_written_on_the_whole_state_equal_lean(name):
    # Matrix products, sums, comparisons and concatenations of the state run on the tiles
    # element by element (`simlab.integrate._tiles`).
    def solve(a, integrator):
        return simlab.simulate(
            WHOLE_STATE_FIELDS[name], jnp.asarray([1.0, 0.5], FLOAT), TS, args=a,
            solver="rk4", adaptive=False, dt0=DT, integrator=integrator,
        ).ys  # fmt: skip

    a = jnp.linspace(0.1, 1.0, 5, dtype=FLOAT)
    kernel = jax.jit(jax.vmap(lambda a: solve(a, "kernel")))(a)
    _assert_agree(kernel, jax.jit(jax.vmap(lambda a: solve(a, "lean")))(a))


def _oscillator(t, y, frequency):
    return jnp.stack([y[1], -(frequency**2) * y[0]])


def test_rk4_converges_at_order_four():
    # float64 only: at the smallest step the error is near float32's roundoff.
    ts = np.linspace(0.0, 4.0, 5)
    y0 = jnp.asarray([1.0, 0.0], FLOAT)
    errors = []
    for dt in (0.2, 0.1, 0.05):
        trajectory = simlab.simulate(
            _oscillator, y0, ts, args=1.0, solver="rk4", adaptive=False, dt0=dt, integrator="kernel"
        )
        exact = jnp.stack([jnp.cos(ts), -jnp.sin(ts)], axis=1)
        errors.append(float(jnp.max(jnp.abs(trajectory.ys - exact))))
    orders = np.log2(np.asarray(errors[:-1]) / np.asarray(errors[1:]))
    np.testing.assert_allclose(orders, 4.0, atol=0.25)


@pytest.mark.accelerator
def test_a_blown_up_member_is_nonfinite_while_the_others_succeed():
    # dy/dt = a y^2 from y = 1 reaches infinity at t = 1/a: within [0, 2] for a = 2 alone.
    def solve(a):
        return simlab.simulate(
            lambda t, y, a: a * y**2,
            jnp.ones(1, FLOAT),
            np.linspace(0.0, 2.0, 5),
            args=a,
            solver="tsit5",
            adaptive=False,
            dt0=0.01,
            integrator="kernel",
            throw=False,
        )

    trajectories = jax.vmap(solve)(jnp.asarray([-1.0, 2.0, 0.1], FLOAT))
    nonfinite = trajectories.result == simlab.RESULTS.nonfinite_state
    np.testing.assert_array_equal(nonfinite, [False, True, False])
    np.testing.assert_array_equal(trajectories.succeeded, [True, False, True])
    np.testing.assert_allclose(trajectories.ys[2, -1, 0], 1 / (1 - 0.1 * 2.0), rtol=1e-4)


LORENZ = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)
Y0 = jnp.ones(3)


def _kernel_solve(y0=Y0, ts=TS, **options):
    settings = dict(solver="tsit5", adaptive=False, dt0=DT, integrator="kernel") | options
    return simlab.simulate(LORENZ, y0, ts, **settings)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(event=simlab.Event(lambda t, y, args: y[0] - 5.0)), "does not locate events"),
        (dict(adjoint="backsolve"), "pass adjoint=None or 'forward'"),
    ],
)
def test_refuses_events_and_adjoints(options, message):
    with pytest.raises(ValueError, match=message):
        _kernel_solve(**options)


@pytest.mark.accelerator
@pytest.mark.slow  # tens of seconds in Pallas' interpreter
def test_forward_sensitivities_equal_lean_and_central_differences():
    # d ys / d (sigma, rho, y0) for three members in one launch: the kernel steps the state
    # and its tangent together, the derivatives of the lean loop's same steps.
    def ys(integrator, parameters, y0):
        options = dict(adjoint="forward")
        model = simlab.models.Lorenz(sigma=parameters[0], rho=parameters[1], beta=8 / 3)
        return simlab.simulate(
            model, y0, TS, solver="tsit5", adaptive=False, dt0=DT, integrator=integrator,
            **options,
        ).ys  # fmt: skip

    sigma, rho, y0 = _members(3)
    parameters = jnp.stack([sigma, rho], axis=1)

    def sensitivities(integrator):
        jacobian = jax.jacfwd(ft.partial(ys, integrator), argnums=(0, 1))
        return jax.jit(jax.vmap(jacobian))(parameters, y0)

    kernel, lean = sensitivities("kernel"), sensitivities("lean")
    for of_kernel, of_lean in zip(kernel, lean, strict=True):
        scale = jnp.max(jnp.abs(of_lean))
        np.testing.assert_array_less(jnp.abs(of_kernel - of_lean) / scale, AGREEMENT)
    # The five directions and the solve in one launch (a branch per platform): 18 components.
    jacobian = jax.vmap(jax.jacfwd(ft.partial(ys, "kernel"), argnums=(0, 1)))
    program = str(jax.make_jaxpr(jacobian)(parameters, y0))
    assert program.count("pallas_call") == 2 and ",18," in program
    # With the members batched inside, each direction is a launch of its own: the same.
    outer = jax.jacfwd(jax.vmap(ft.partial(ys, "kernel")), argnums=1)(parameters, y0)
    np.testing.assert_allclose(jnp.einsum("mtimj->mtij", outer), kernel[1], rtol=1e-5)
    if FLOAT == jnp.float64:  # central differences in rho, to their truncation error
        step = 1e-6 * rho[0]
        shifted = [parameters[0] + jnp.array([0.0, sign * step]) for sign in (1, -1)]
        solves = [ys("kernel", p, y0[0]) for p in shifted]
        central = (solves[0] - solves[1]) / (2 * step)
        np.testing.assert_allclose(kernel[0][0, ..., 1], central, rtol=1e-6, atol=1e-7)


@pytest.mark.accelerator
def test_a_quasi_newton_fit_through_the_kernel_recovers_rho_as_the_lean_loop_does():
    # BFGS takes its gradient as jax.jacfwd of the jax.linearize'd loss: forward mode through
    # the kernel's own forward mode, which recursed without end. The fit materialises the
    # gradient by one jax.jacfwd (all directions in one launch) instead.
    data = _lorenz("lean")(10.0, 28.0, Y0).ys

    def fitted(integrator):
        options = dict(solver="tsit5", adaptive=False, dt0=DT, integrator=integrator)
        return simlab.fit(
            simlab.models.Lorenz(sigma=10.0, rho=25.0, beta=8 / 3), TS, data, y0=Y0,
            params=["rho"], method="quasi_newton", simulate_options=options, covariance=False,
        )  # fmt: skip

    kernel, lean = fitted("kernel"), fitted("lean")
    assert bool(kernel.converged)
    tolerance = 1e-7 if FLOAT == jnp.float64 else 1e-4
    assert float(kernel.params["rho"]) == pytest.approx(28.0, rel=tolerance)
    assert float(kernel.params["rho"]) == pytest.approx(float(lean.params["rho"]), rel=tolerance)


def test_a_sweep_runs_the_kernel_with_its_save_times_concrete(monkeypatch):
    # A sweep's chunks would trace the save times; for the kernel they stay concrete.
    def swept(integrator, **options):
        return simlab.sweep(
            LORENZ, {"rho": np.linspace(20.0, 30.0, 5)}, Y0, TS, solver="tsit5",
            adaptive=False, dt0=DT, integrator=integrator, progress=False, **options,
        )  # fmt: skip

    kernel, lean = swept("kernel"), swept("lean")
    assert kernel.num_failed == 0
    _assert_agree(kernel.observables["trajectory"], lean.observables["trajectory"])
    # On a TPU "auto" may take the kernel, so the sweep keeps the save times concrete too.
    monkeypatch.setattr(simlab.integrate._kernel, "on_tpu", lambda: True)
    ran = []

    def end_state(trajectory):
        ran.append(trajectory.integrator)
        return {"end": trajectory.ys[-1]}

    auto = swept("auto", observable=end_state)
    assert set(ran) == {"kernel"}
    _assert_agree(auto.observables["end"], lean.observables["trajectory"][:, -1])


def test_reverse_mode_takes_the_lean_loops_derivatives_and_forward_mode_alone_does_not():
    # adjoint=None: a kernel has no transpose, so the derivatives are the lean loop's.
    def end(integrator, y0, **options):
        return _kernel_solve(y0, integrator=integrator, **options).ys[-1, 0]

    kernel = jax.grad(ft.partial(end, "kernel"))(Y0)
    np.testing.assert_allclose(kernel, jax.grad(ft.partial(end, "lean"))(Y0), rtol=1e-12)
    # adjoint="forward" runs forward mode in the kernel, which reverse mode cannot transpose.
    with pytest.raises(ValueError, match="reverse-mode"):
        jax.grad(ft.partial(end, "kernel", adjoint="forward"))(Y0)


@pytest.mark.accelerator
def test_auto_takes_the_kernel_on_a_tpu_only_where_the_field_and_steps_fit(monkeypatch):
    # On a CPU the lean loop; with a TPU as the default backend, the kernel where the
    # field is made of KERNEL_PRIMITIVES and the step count is known when traced. The
    # choice is made when the solve is traced: `jax.eval_shape` runs nothing.
    def integrator(model=LORENZ, ts=TS):
        def solve():
            return simlab.simulate(model, Y0, ts, solver="tsit5", adaptive=False, dt0=DT)

        return jax.eval_shape(solve).integrator

    assert integrator() == ("kernel" if jax.default_backend() == "tpu" else "lean")
    monkeypatch.setattr(simlab.integrate._kernel, "on_tpu", lambda: True)
    assert integrator() == "kernel"
    # Products, sums and moves of elements run on the tiles as sums of products.
    matrix = jnp.asarray([[-1.0, 0.5, 0.0], [0.0, -1.0, 0.5], [0.5, 0.0, -1.0]], FLOAT)
    assert integrator(lambda t, y, args: matrix @ y) == "kernel"
    assert integrator(lambda t, y, args: -jnp.cumsum(y)) == "kernel"
    assert integrator(lambda t, y, args: -jnp.exp(y) * jnp.tanh(y)) == "kernel"
    assert integrator(lambda t, y, args: jnp.where(y == 0, 1.0, -y)) == "kernel"
    assert integrator(lambda t, y, args: -jnp.expm1(y)) == "lean"  # not lowered by Mosaic
    assert integrator(lambda t, y, args: -y[jnp.asarray([2, 0, 1])]) == "lean"  # a gather
    names = []
    jax.jit(lambda ts: names.append(integrator(ts=ts)))(jnp.asarray(TS))
    assert names == ["lean"]  # save times traced: the step count is unknown
    adaptive = jax.eval_shape(lambda: simlab.simulate(LORENZ, Y0, TS, solver="tsit5"))
    assert adaptive.integrator == "kernel"  # adaptive steps too, save times traced or not


def test_refuses_step_counts_unknown_when_traced_and_large_states():
    with pytest.raises(ValueError, match="known when the solve is traced"):
        jax.jit(lambda ts: _kernel_solve(ts=ts).ys)(jnp.asarray(TS))
    with pytest.raises(ValueError, match="up to 64 components"):
        simlab.simulate(
            lambda t, y, args: -y,
            jnp.ones(65),
            TS,
            solver="tsit5",
            adaptive=False,
            dt0=DT,
            integrator="kernel",
        )


def test_a_field_that_makes_or_closes_over_arrays_lowers_for_a_tpu():
    # A TPU kernel captures no constants: the field's arrays are passed in as leaves.
    def solve(y0, dtype):
        rates = jnp.asarray([1.0, 2.0, 3.0], dtype)

        def decay(t, y, args):
            return -rates * y * jnp.asarray([1.0, 0.5, 0.25], dtype)

        return simlab.simulate(
            decay, y0, TS, solver="tsit5", adaptive=False, dt0=DT, integrator="kernel", throw=False
        ).ys

    with jax.enable_x64(False):  # a TPU kernel's loop counters are 32-bit
        program = jax.jit(ft.partial(solve, dtype=jnp.float32))
        jax.export.export(program, platforms=["tpu"])(jax.ShapeDtypeStruct((3,), jnp.float32))
    exact = jnp.exp(-jnp.asarray([1.0, 1.0, 0.75], FLOAT) * TS[-1])
    np.testing.assert_allclose(solve(jnp.ones(3, FLOAT), FLOAT)[-1], exact, rtol=AGREEMENT)
