"""Numbers, parameters and states passed to the Python API: NumPy scalars are numbers, a
count is never a bool nor a traced value, and a parameter of the wrong kind or an empty
state is refused with a message that names it."""

import json
from typing import ClassVar

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import LOTKA_VOLTERRA, LOTKA_VOLTERRA_PARAMETERS, without_type_checks
from jaxtyping import Array, Float

import simlab
from simlab.models import AbstractODEModel, parameter


class Drift(AbstractODEModel):
    """dx/dt = slope: x(t) = x(0) + slope t."""

    slope: Float[Array, ""] = parameter()
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return jnp.broadcast_to(self.slope, y.shape)


class TwoDecays(AbstractODEModel):
    """dy_i/dt = -rates_i y_i, with both rates in one declared array of shape (2,)."""

    rates: Float[Array, "2"] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x", "y")

    def __call__(self, t, y, args):
        return -self.rates * y


TS = jnp.linspace(0.0, 2.0, 9)
LINE = (1.0 + 0.7 * TS)[:, None]  # x(t) for slope 0.7 from x(0) = 1
FIXED_STEPS = dict(solver="rk4", adaptive=False, dt0=0.25)  # exact for a straight line
LV_Y0 = jnp.array([30.0, 4.0])
LV_TS = jnp.linspace(0.0, 10.0, 6)


@pytest.fixture(scope="module")
def line_fit():
    """A fit of the slope of a noise-free line."""
    return simlab.fit(
        Drift(slope=0.1),
        TS,
        LINE,
        y0=jnp.array([1.0]),
        params=["slope"],
        noise_scale=0.1,
        simulate_options=FIXED_STEPS,
        max_steps=40,
    )


# --- NumPy integers are counts -----------------------------------------------------------


def test_numpy_max_steps_limits_the_solve_like_a_python_integer():
    options = simlab.SolveOptions(max_steps=np.int64(50))
    assert type(options.max_steps) is int and options.max_steps == 50
    assert json.loads(json.dumps(options.record()))["max_steps"] == 50
    with pytest.raises(simlab.SimulationError, match="maximum number of solver steps"):
        simlab.simulate(LOTKA_VOLTERRA, LV_Y0, LV_TS, max_steps=np.int64(3))
    enough = simlab.simulate(LOTKA_VOLTERRA, LV_Y0, LV_TS, max_steps=np.uint16(1000))
    reference = simlab.simulate(LOTKA_VOLTERRA, LV_Y0, LV_TS, max_steps=1000)
    np.testing.assert_array_equal(enough.ys, reference.ys)


def test_numpy_integers_size_a_sweep():
    result = simlab.sweep(
        LOTKA_VOLTERRA,
        {"alpha": [0.4, 0.6]},
        LV_Y0,
        LV_TS,
        mode="samples",
        num_samples=np.int64(3),
        key=jr.key(0),
        chunk_size=np.int64(2),
        max_steps=np.int64(1000),
        progress=False,
    )
    assert result.values.shape == (3, 1)
    assert np.all((result.values >= 0.4) & (result.values <= 0.6))
    assert np.all(result.status == 0)  # successful
    # Rounded up to a multiple of the four devices, and stored as a plain integer.
    assert type(result.stats["chunk_size"]) is int and result.stats["chunk_size"] == 4


def test_numpy_settings_pass_the_fit_sample_and_profile_checks(line_fit):
    """Each setting passes its check, so the next check in line speaks (the runs would
    compile a multi-start fit, a sampler and a profile; the settings reach them as Python
    numbers, as `SolveOptions` shows above)."""
    with pytest.raises(ValueError, match="starts= draws random starting points: pass key="):
        simlab.fit(
            Drift(slope=0.1),
            TS,
            LINE,
            y0=jnp.array([1.0]),
            params=["slope"],
            bounds={"slope": (-2.0, 2.0)},
            starts=np.int64(2),
            max_steps=np.uint8(40),
            rtol=np.float32(1e-8),
            atol=np.float64(1e-12),
            checkpoint_every=np.int32(10),
        )
    counts = dict(num_samples=np.int64(20), num_warmup=np.int32(20), num_chains=np.int64(2))
    with pytest.raises(ValueError, match="sample draws random numbers: pass key="):
        simlab.sample(line_fit, **counts, key=None)
    with pytest.raises(ValueError, match="span must be positive"):
        line_fit.profile("slope", num_points=np.int64(3), span=-1.0)


def test_numpy_counts_and_tolerances_find_a_steady_state():
    parameters = LOTKA_VOLTERRA_PARAMETERS
    fixed_point = simlab.steady_state(
        LOTKA_VOLTERRA,
        jnp.array([30.0, 20.0]),
        rtol=np.float32(1e-10),
        atol=np.float32(1e-10),
        max_steps=np.int64(64),
    )
    expected = [
        parameters["gamma"] / parameters["delta"],
        parameters["alpha"] / parameters["beta"],
    ]
    np.testing.assert_allclose(fixed_point.state, expected, rtol=1e-8)


def test_a_bool_is_no_count(line_fit):
    with pytest.raises(ValueError, match="max_steps must be a positive integer; got True"):
        simlab.SolveOptions(max_steps=True)
    with pytest.raises(ValueError, match="num_chains must be a positive integer; got True"):
        simlab.sample(line_fit, num_chains=True, key=jr.key(0))
    with pytest.raises(ValueError, match="chunk_size must be a positive integer; got True"):
        simlab.sweep(LOTKA_VOLTERRA, {"alpha": [0.5]}, LV_Y0, LV_TS, chunk_size=True)


def test_a_traced_count_is_refused_with_the_usual_message():
    with without_type_checks(), pytest.raises(ValueError, match="max_steps must be a positive"):
        jax.jit(lambda n: simlab.SolveOptions(max_steps=n))(np.int64(5))


# --- NumPy floats are numbers ------------------------------------------------------------


def test_numpy_float_tolerances_solve_as_the_same_python_floats():
    rtol, atol = np.float32(1e-5), np.float32(1e-8)
    given = simlab.simulate(LOTKA_VOLTERRA, LV_Y0, LV_TS, rtol=rtol, atol=atol)
    python = simlab.simulate(LOTKA_VOLTERRA, LV_Y0, LV_TS, rtol=float(rtol), atol=float(atol))
    np.testing.assert_array_equal(given.ys, python.ys)
    assert given.ys.dtype == jnp.float64


def test_robin_takes_numpy_coefficients():
    given = simlab.Robin(np.float32(2.0), np.int64(1), value=0.5)
    python = simlab.Robin(2.0, 1.0, value=0.5)
    assert given.value_coefficient == 2.0 and type(given.value_coefficient) is float
    # Static coefficients: equal ones compile once, and ghost cells come out the same.
    assert jax.tree.structure(given) == jax.tree.structure(python)
    u = jnp.linspace(0.0, 1.0, 8)
    cells = [simlab.grid.laplacian(u, simlab.Grid((8,), boundary=b)) for b in (given, python)]
    np.testing.assert_array_equal(*cells)


# --- a parameter of the wrong kind is named ----------------------------------------------


@pytest.mark.parametrize(
    ("model", "value", "message"),
    [
        (Drift, jnp.ones(3), r"Drift: parameter 'slope' must be a scalar.*got shape \(3,\)"),
        (Drift, "fast", "Drift: parameter 'slope' must be a number or an array of numbers"),
        (Drift, None, "Drift: parameter 'slope' must be a number or an array of numbers"),
        (Drift, 1j, "Drift: parameter 'slope' must have a float dtype.*got complex128"),
        (TwoDecays, jnp.ones(3), r"'rates' must be of shape \(2,\).*got shape \(3,\)"),
        (TwoDecays, 1.0, r"'rates' must be of shape \(2,\).*got shape \(\)"),
    ],
)
def test_a_parameter_of_the_wrong_kind_is_refused_by_name(model, value, message):
    field = model.parameter_names()[0]
    with pytest.raises(ValueError, match=message):
        model(**{field: value})


def test_a_built_in_model_names_its_parameter():
    with pytest.raises(ValueError, match="Lorenz: parameter 'rho' must be a scalar"):
        simlab.models.Lorenz(sigma=10.0, rho=jnp.array([28.0, 29.0]), beta=8 / 3)
    with without_type_checks(), pytest.raises(ValueError, match="'rho' must be a number"):
        simlab.models.Lorenz(sigma=10.0, rho="28", beta=8 / 3)


def test_models_built_per_member_under_vmap_keep_their_declared_shape():
    slopes = jnp.array([0.5, 1.0, 2.0])
    built = jax.vmap(lambda slope: Drift(slope=slope).slope)(slopes)
    np.testing.assert_array_equal(built, slopes)


# --- an empty state --------------------------------------------------------------------


def test_an_empty_y0_is_refused_clearly():
    with pytest.raises(ValueError, match=r"y0 is empty \(shape \(0,\)\)"):
        simlab.simulate(lambda t, y, args: -y, jnp.zeros(0), TS)


OU = simlab.models.OrnsteinUhlenbeck(theta=1.0, mu=0.3, sigma=0.5)
# Far more than any machine's memory: the results of 2e6 paths at 1e5 save times.
MANY_TIMES = jnp.linspace(0.0, 1.0, 100_001)


def test_a_sweep_whose_results_cannot_fit_in_memory_is_refused_with_their_size():
    with pytest.raises(ValueError, match=r"GiB of memory.*keep_paths=False") as refusal:
        simlab.sweep(
            OU, {"theta": np.array([0.5, 2.0])}, jnp.array([1.0]), MANY_TIMES,
            paths=10**6, keep_paths=True, key=jr.key(0), adaptive=False, dt0=0.1,
            progress=False,
        )  # fmt: skip
    assert "2e+06 members' results" in str(refusal.value)


def test_an_expectation_whose_paths_cannot_fit_is_refused_naming_the_fix():
    """1e12 paths keep at least 4 TB of values; 1e8 paths of a 1e5-component state run at
    once hold at least 40 TB, which batch_size streams."""
    arguments = dict(key=jr.key(0), dt0=0.1)
    with pytest.raises(ValueError, match=r"1e\+12 paths would need .*GiB.*fewer paths"):
        simlab.expectation(OU, jnp.ones(1), TS_SHORT, _end, paths=10**12, **arguments)
    with pytest.raises(ValueError, match=r"1e\+08 paths at once would need .*batch_size="):
        simlab.expectation(OU, jnp.ones(10**5), TS_SHORT, _end, paths=10**8, **arguments)


TS_SHORT = jnp.array([0.0, 0.1])


def _end(path):
    return path.ys[-1, 0]


def test_a_grid_whose_field_cannot_fit_in_memory_is_refused_with_its_size():
    with pytest.raises(ValueError, match=r"one field of the grid \(10000000, 100000\).*GiB"):
        simlab.Grid((10**7, 10**5), extent=1.0)
