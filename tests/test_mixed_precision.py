"""Mixed precision: the dtype of `y0` is the precision of the solve (x64 is on in the tests),
and provenance from a source tree that was never installed."""

import importlib.metadata

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import GRAY_SCOTT_PARAMETERS, LOTKA_VOLTERRA, lorenz, with_dtype

import simlab
from simlab import _provenance
from simlab.models import AbstractODEModel, parameter

RATE = 0.7
DECAY_TS = jnp.linspace(0.0, 2.0, 5)  # float64, as jnp makes it under x64
# Every integrator family simlab runs an ODE on: lean (adaptive, fixed), stiff, Diffrax.
SOLVES = {
    "lean": {},
    "lean_fixed": dict(solver="rk4", adaptive=False, dt0=0.01),
    "stiff": dict(solver="rodas5p"),
    "diffrax": dict(solver="dopri5", integrator="diffrax"),
}


class Decay(AbstractODEModel):
    r"""$\dot y = -k y$: from $y(0) = 1$, $y(t) = e^{-k t}$."""

    rate: jax.Array = parameter(lower=0.0)
    state_names = ("y",)

    def __call__(self, t, y, args):
        return -self.rate * y


def exact_decay(rate, ts):
    return np.exp(-rate * np.asarray(ts, np.float64))[:, None]


@pytest.mark.parametrize("settings", SOLVES.values(), ids=SOLVES.keys())
def test_a_float32_state_with_float64_parameters_solves_in_float32(settings):
    model = Decay(rate=RATE)
    assert model.rate.dtype == jnp.float64
    trajectory = simlab.simulate(model, jnp.ones(1, jnp.float32), DECAY_TS, **settings)
    assert trajectory.ys.dtype == jnp.float32 and trajectory.ts.dtype == jnp.float32
    np.testing.assert_allclose(trajectory.ys, exact_decay(RATE, DECAY_TS), rtol=1e-3)


@pytest.mark.parametrize("settings", SOLVES.values(), ids=SOLVES.keys())
def test_a_float64_state_with_float32_parameters_solves_in_float64(settings):
    model = Decay(rate=jnp.float32(RATE))
    ts = DECAY_TS.astype(jnp.float32)
    tight = {} if "dt0" in settings else dict(rtol=1e-10, atol=1e-12)
    trajectory = simlab.simulate(model, jnp.ones(1), ts, **settings | tight)
    assert trajectory.ys.dtype == jnp.float64 and trajectory.ts.dtype == jnp.float64
    # Far below float32 roundoff: the float32 rate, exactly as given, solved in float64.
    exact = exact_decay(float(np.float32(RATE)), ts)
    np.testing.assert_allclose(trajectory.ys, exact, rtol=1e-8)


def test_lorenz_in_float32_follows_the_float64_solve():
    ts = jnp.linspace(0.0, 0.5, 6)
    y0 = jnp.array([1.0, 1.0, 1.0])
    single = simlab.simulate(lorenz(), y0.astype(jnp.float32), ts)
    double = simlab.simulate(lorenz(), y0, ts, rtol=1e-10, atol=1e-12)
    assert single.ys.dtype == jnp.float32
    # The float32 default rtol=1e-4, grown by the chaotic flow: 1e-3 of the largest value.
    scale = float(np.max(np.abs(double.ys)))
    np.testing.assert_allclose(single.ys, double.ys, atol=1e-3 * scale)


SDE_GRID = simlab.Grid((16, 16), extent=1.0, boundary="periodic")


@pytest.mark.parametrize(
    "settings",
    [{}, dict(solver="etdrk4", adaptive=False, dt0=0.5)],
    ids=["default", "etdrk4"],
)
def test_gray_scott_in_float32_follows_the_float64_solve(settings):
    grid = simlab.Grid((16, 16), spacing=1.0)
    model = simlab.models.GrayScott(**GRAY_SCOTT_PARAMETERS, grid=grid)
    y0 = jnp.stack([jnp.ones(grid.shape), jnp.zeros(grid.shape)])
    y0 = y0.at[:, 6:10, 6:10].set(jnp.array([0.5, 0.25])[:, None, None])
    ts = jnp.array([0.0, 5.0, 10.0])
    single = simlab.simulate(model, y0.astype(jnp.float32), ts, **settings)
    double = simlab.simulate(model, y0, ts, **settings)
    assert single.ys.dtype == jnp.float32
    np.testing.assert_allclose(single.ys, double.ys, atol=1e-4)


def test_a_float32_wave_takes_the_step_its_float64_twin_takes_and_follows_it():
    grid = simlab.Grid((16, 16), extent=1.0, boundary="periodic")
    model = simlab.models.Wave(wave_speed=1.0, grid=grid)
    x, _ = grid.mesh()
    y0 = jnp.stack([jnp.sin(2 * jnp.pi * x), jnp.zeros(grid.shape)])
    ts = jnp.array([0.0, 0.1])
    single = simlab.simulate(model, y0.astype(jnp.float32), ts)
    double = simlab.simulate(model, y0, ts)
    assert single.ys.dtype == jnp.float32 and single.solver_choice == double.solver_choice
    np.testing.assert_allclose(single.ys, double.ys, atol=1e-4)


@pytest.mark.parametrize(
    "model",
    [
        simlab.models.StochasticHeat(diffusivity=1.0, noise_strength=0.0, grid=SDE_GRID),
        simlab.models.StochasticAllenCahn(epsilon=0.05, noise_strength=0.0, grid=SDE_GRID),
    ],
    ids=lambda model: type(model).__name__,
)
def test_a_float32_stochastic_field_follows_its_float64_path(model):
    # Without noise: the two precisions draw different increments from the same key.
    y0 = 0.1 * jnp.cos(2 * jnp.pi * SDE_GRID.mesh()[0])
    settings = dict(adaptive=False, dt0=1e-4, key=jax.random.key(0))
    ts = jnp.array([0.0, 1e-3])
    single = simlab.simulate(model, y0.astype(jnp.float32), ts, **settings)
    double = simlab.simulate(model, y0, ts, **settings)
    assert single.ys.dtype == jnp.float32
    np.testing.assert_allclose(single.ys, double.ys, atol=1e-5)


def test_the_gradient_reaches_float64_parameters_through_a_float32_solve():
    def final(rate):
        return simlab.simulate(Decay(rate=rate), jnp.ones(1, jnp.float32), DECAY_TS).ys[-1, 0]

    gradient = jax.grad(final)(jnp.float64(RATE))
    t = float(DECAY_TS[-1])
    assert gradient.dtype == jnp.float64
    np.testing.assert_allclose(gradient, -t * np.exp(-RATE * t), rtol=1e-3)


def test_a_sweep_of_float64_values_from_a_float32_state_runs_in_float32():
    result = simlab.sweep(
        LOTKA_VOLTERRA,
        {"alpha": np.linspace(0.4, 0.7, 3)},
        jnp.array([30.0, 4.0], jnp.float32),
        jnp.linspace(0.0, 4.0, 5),
        observable=lambda trajectory: {"final_state": trajectory.ys[-1]},
        progress=False,
    )
    assert result.num_failed == 0
    assert result.observables["final_state"].dtype == np.float32


@jax.numpy_dtype_promotion("standard")  # strict promotion refuses `-rate * y` itself
def test_a_function_closing_over_float64_values_is_refused_naming_both_dtypes():
    rate = jnp.asarray(RATE, jnp.float64)
    with pytest.raises(ValueError, match="returns dtype float64 for a state of dtype float32"):
        simlab.simulate(lambda t, y, args: -rate * y, jnp.ones(1, jnp.float32), DECAY_TS)
    with pytest.raises(ValueError, match="returns dtype float64 for a state of dtype float32"):
        simlab.simulate(lambda t, y, args: -args * y, jnp.ones(1, jnp.float32), DECAY_TS, args=rate)


def test_a_float32_model_given_float32_values_is_left_as_it_is():
    model = with_dtype(Decay(rate=RATE), jnp.float32)
    ts = DECAY_TS.astype(jnp.float32)
    same_model, same_ts = simlab._simulate.in_state_precision(model, ts, jnp.ones(1, jnp.float32))
    assert same_model is model and same_ts is ts


def test_a_float32_export_solves_in_float32_with_x64_on():
    grid = simlab.Grid((16, 16), extent=16.0, boundary="periodic")
    model = simlab.models.GrayScott(**GRAY_SCOTT_PARAMETERS, grid=grid, impl="pallas")
    exported = simlab.export(
        lambda y0: simlab.simulate(model, y0, jnp.array([0.0, 1.0]), solver="tsit5").ys,
        jax.ShapeDtypeStruct((2, 16, 16), jnp.float32),
        platforms=["cpu"],
    )
    ys = exported.call(jnp.ones((2, 16, 16), jnp.float32))
    assert ys.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(ys)))


@pytest.fixture
def uninstalled(monkeypatch):
    """simlab as imported from a source tree with no package metadata."""

    def not_found(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_found)
    _provenance._software.cache_clear()  # the record is read once per process
    yield
    _provenance._software.cache_clear()


def test_provenance_from_an_uninstalled_tree_gives_the_source_version(uninstalled):
    result = simlab.sweep(
        LOTKA_VOLTERRA,
        {"alpha": np.array([0.5, 0.6])},
        jnp.array([30.0, 4.0]),
        jnp.linspace(0.0, 1.0, 3),
        observable=lambda trajectory: {"final_state": trajectory.ys[-1]},
        progress=False,
    )
    assert result.attrs["simlab_version"] == simlab.__version__ == "0.3.0"
    assert _provenance.simlab_version() == "0.3.0"
