"""A failed check never waits on the host inside a compiled program.

Equinox's `error_if` raises from a host callback; a TPU's runtime swallows the error, and
Equinox then waits for a key press. Where checks cannot raise inside a program (GPU, TPU:
`simlab._misc.checks_raise_in_program`), simlab's checks report through the status and NaN,
and `simulate` raises on the host once the results are known. These tests run that path on
the CPU by saying that checks cannot raise there; the test marked `accelerator` runs on the
default backend, whichever it is.
"""

import functools as ft
import threading
import time
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float

import simlab
import simlab._misc
import simlab.kernels as sk
from simlab import RESULTS
from simlab.models import AbstractODEModel, Heat, LennardJones, parameter

FLOAT = jnp.asarray(1.0).dtype  # float64 with x64 on, float32 on an accelerator run
H = 1 / 16  # the heat solve's grid spacing: forward Euler is stable for dt <= H^2 / (2 D)
HEAT_DT0 = 0.5 * H**2 / 2  # stable for D = 1, above the limit for D = 30


class Decay(AbstractODEModel):
    """dx/dt = -rate x, which declares no step limit: an unstable step simply blows up."""

    rate: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return -self.rate * y


def _blow_up(rate, *, throw=True):
    """Forward Euler at dt0 = 0.1 on a decay of `rate` 100: each step multiplies by -9, so
    the state overflows within 500 steps in float32 and float64."""
    ts = jnp.linspace(0.0, 50.0, 6, dtype=FLOAT)
    y0 = jnp.ones(1, FLOAT)
    return simlab.simulate(
        Decay(rate=rate), y0, ts, solver="euler", adaptive=False, dt0=0.1, throw=throw
    )


def _heat(diffusivity, *, throw=True):
    """Forward Euler on the 1-D heat equation at `HEAT_DT0`, whose limit the model declares."""
    grid = simlab.Grid((16,), extent=1.0, boundary="neumann")
    (x,) = grid.coordinates()
    model = Heat(diffusivity=diffusivity, grid=grid)
    ts = jnp.linspace(0.0, 0.05, 3)
    return simlab.simulate(
        model, jnp.cos(jnp.pi * x), ts, solver="euler", adaptive=False, dt0=HEAT_DT0, throw=throw
    )


def _program(function, *args) -> str:
    """The jaxpr of `function(*args)`, with every nested program, as text."""
    return str(jax.make_jaxpr(function)(*args))


def _as_on_an_accelerator(monkeypatch):
    """From here on simlab's checks cannot raise inside a program, and any host callback
    traced fails the test. JAX's caches are cleared, so that no program traced with raising
    checks is reused (and, by the fixture below, none traced here outlives the test)."""
    jax.clear_caches()
    monkeypatch.setattr(simlab._misc, "checks_raise_in_program", lambda: False)

    def refused(*args, **kwargs):
        raise AssertionError("a host callback was traced into the program")

    monkeypatch.setattr(jax, "pure_callback", refused)


@pytest.fixture(autouse=True)
def _no_program_outlives_the_test():
    yield
    jax.clear_caches()


def test_an_unstable_fixed_step_raises_on_the_host_with_the_message_of_a_cpu(monkeypatch):
    with pytest.raises(simlab.SimulationError) as on_a_cpu:
        _blow_up(100.0)
    _as_on_an_accelerator(monkeypatch)
    with pytest.raises(simlab.SimulationError) as on_an_accelerator:
        _blow_up(100.0)
    message = str(on_an_accelerator.value)
    assert message == str(on_a_cpu.value)
    assert message.startswith(RESULTS[RESULTS.nonfinite_state])
    assert "Here the first NaN or inf came at t = " in message
    # A step above a declared limit is refused before anything runs, with the limit.
    with pytest.raises(simlab.SimulationError, match=f"largest stable step {H**2 / 60:.6g}"):
        _heat(30.0)


def test_under_jit_a_failed_solve_returns_its_status_and_nan_states(monkeypatch):
    _as_on_an_accelerator(monkeypatch)
    for solve, argument, status in (
        (_heat, 30.0, RESULTS.unstable_step),
        (_blow_up, 100.0, RESULTS.nonfinite_state),
    ):
        argument = jnp.asarray(argument, FLOAT)
        assert "callback" not in _program(solve, argument)
        trajectory = jax.jit(solve)(argument)  # throw=True: no error, and no wait
        assert trajectory.result == status
        assert np.isnan(np.asarray(trajectory.ys)).all()
    # A solve that succeeds is untouched.
    stable = jax.jit(_heat)(jnp.asarray(1.0, FLOAT))
    assert stable.result == RESULTS.successful
    np.testing.assert_allclose(stable.ys, _heat(1.0).ys, rtol=1e-5, atol=1e-6)


def test_on_a_cpu_the_same_program_raises_inside_it():
    """The contrast to the test above: there the program held no callback and returned."""
    argument = jnp.asarray(30.0, FLOAT)
    assert "pure_callback" in _program(_heat, argument)
    with pytest.raises(Exception, match="above the largest stable step"):
        jax.block_until_ready(jax.jit(_heat)(argument))


def test_under_vmap_only_the_failed_members_states_turn_nan(monkeypatch):
    _as_on_an_accelerator(monkeypatch)
    batch = jax.vmap(_heat)(jnp.array([1.0, 30.0], FLOAT))  # eager: throw=True, no error
    assert np.asarray(batch.result == RESULTS.unstable_step).tolist() == [False, True]
    np.testing.assert_allclose(batch.ys[0], _heat(1.0).ys, rtol=1e-5, atol=1e-6)
    assert np.isnan(np.asarray(batch.ys[1])).all()


def test_the_gradient_of_a_failed_solve_under_jit_is_nan(monkeypatch):
    _as_on_an_accelerator(monkeypatch)

    def final(diffusivity):
        return jnp.sum(_heat(diffusivity).ys[-1])

    gradient = jax.jit(jax.grad(final))
    assert np.isnan(float(gradient(jnp.asarray(30.0, FLOAT))))
    assert np.isfinite(float(gradient(jnp.asarray(1.0, FLOAT))))


@pytest.mark.slow
def test_a_fit_under_jit_that_does_not_converge_has_a_nan_loss(monkeypatch):
    ts = jnp.linspace(0.0, 2.0, 9)
    observations = jnp.exp(-0.8 * ts)[:, None]

    @ft.partial(jax.jit, static_argnums=1)
    def fit(data, max_steps):
        result = simlab.fit(
            Decay(rate=0.1), ts, data, y0=jnp.array([1.0]), params=["rate"], max_steps=max_steps
        )
        return result.result, result.loss, result.params["rate"]

    assert "pure_callback" in _program(lambda data: fit(data, 1)[1], observations)  # a CPU's
    _as_on_an_accelerator(monkeypatch)
    assert "callback" not in _program(lambda data: fit(data, 1)[1], observations)
    status, loss, _ = fit(observations, 1)  # throw=True: no error
    assert status != RESULTS.successful and np.isnan(float(loss))
    status, loss, rate = fit(observations, 50)
    assert status == RESULTS.successful and np.isfinite(float(loss))
    np.testing.assert_allclose(rate, 0.8, rtol=1e-5)


def _crowded_gas():
    """Nine particles in one corner of a box whose cells have room for four."""
    positions = np.random.default_rng(2).uniform(0.1, 0.9, (9, 2))
    cells = sk.CellGrid(per_side=4, capacity=4)
    model = LennardJones(num_particles=9, box=10.0, cutoff=2.5, dimension=2, cells=cells)
    return model, model.state(positions, np.zeros_like(positions))


def _molecular_dynamics(model, y0):
    ts = jnp.array([0.0, 0.01])
    return simlab.simulate(model, y0, ts, solver="verlet", adaptive=False, dt0=1e-3)


@pytest.mark.slow
def test_an_overfull_cell_fails_the_solve_instead_of_raising_inside_it(monkeypatch):
    model, y0 = _crowded_gas()
    with pytest.raises(Exception, match="a cell holds more than capacity=4"):
        _molecular_dynamics(model, y0)
    _as_on_an_accelerator(monkeypatch)
    forces = np.asarray(model(0.0, y0, None))[y0.size // 2 :]  # the field is (p / m, F)
    assert np.isnan(forces).all()  # NaN, not the zero a NaN without derivative would give
    with pytest.raises(simlab.SimulationError, match="The state became NaN or infinite"):
        _molecular_dynamics(model, y0)


def test_an_overfull_cell_gives_nan_cell_pair_forces_instead_of_raising_inside(monkeypatch):
    positions = jnp.asarray(np.random.default_rng(2).uniform(0.1, 0.9, (9, 2)))
    settings = dict(
        box=10.0,
        cutoff=2.5,
        pair_scale=sk.lennard_jones_scale,
        grid=sk.CellGrid(per_side=4, capacity=4),
    )
    forces = jax.jit(lambda x: sk.cell_pair_forces(x, 1.0, (1.0, 1.0), **settings))
    with pytest.raises(Exception, match="a cell holds more than capacity=4"):
        jax.block_until_ready(forces(positions))
    _as_on_an_accelerator(monkeypatch)
    assert np.isnan(np.asarray(forces(positions))).all()


def _within(seconds, function):
    """`function()`, failing the test if it has not returned after `seconds` (a program
    that waits on the host would otherwise hold the run forever)."""
    outcome = {}

    def run():
        try:
            outcome["value"] = function()
        except Exception as error:
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"no answer after {seconds} s: is the program waiting?"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.mark.accelerator
def test_an_unstable_fixed_step_gets_a_clear_error_within_seconds_on_the_default_backend():
    start = time.perf_counter()
    with pytest.raises(simlab.SimulationError) as error:
        _within(120, lambda: _blow_up(100.0))
    assert str(error.value).startswith(RESULTS[RESULTS.nonfinite_state])
    assert "Here the first NaN or inf came at t = " in str(error.value)
    # The same solve under jit: an error inside the program where checks may raise there
    # (a CPU), else its status and NaN states.
    rate = jnp.asarray(100.0, FLOAT)
    if simlab._misc.checks_raise_in_program():
        with pytest.raises(Exception, match="The state became NaN or infinite"):
            _within(120, lambda: jax.block_until_ready(jax.jit(_blow_up)(rate)))
    else:
        trajectory = _within(120, lambda: jax.block_until_ready(jax.jit(_blow_up)(rate)))
        assert trajectory.result == RESULTS.nonfinite_state
        assert np.isnan(np.asarray(trajectory.ys)).all()
    assert time.perf_counter() - start < 240
