"""`simlab.sweep`: equals a loop of `simulate`, sharded equals unsharded, failures masked."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import LOTKA_VOLTERRA, without_type_checks

import simlab
from simlab._sweep import _execute
from simlab._sweep._execute import compiled_chunk, member_group_size, vmapped_in_groups
from simlab.models import AbstractODEModel, parameter

Y0 = jnp.array([30.0, 4.0])
TS = jnp.linspace(0.0, 4.0, 5)
ALPHAS = np.linspace(0.4, 0.7, 3)
BETAS = np.array([0.02, 0.025, 0.03])


def final_state(trajectory):
    return {"final_state": trajectory.ys[-1]}


@eqx.filter_jit
def simulate_ys(model, y0):
    return simlab.simulate(model, y0, TS).ys


def simulate_final(model, y0):
    return simulate_ys(model, y0)[-1]


def loop_final_states(rows):
    """The reference: one `simulate` per member, in a Python loop."""
    return np.stack(
        [
            simulate_final(
                eqx.tree_at(
                    lambda m: (m.alpha, m.beta), LOTKA_VOLTERRA, (jnp.asarray(a), jnp.asarray(b))
                ),
                Y0,
            )
            for a, b in rows
        ]
    )


def lotka_volterra_sweep(**options):
    """The module's reference sweep (alpha × beta, final state, chunks of 4), with `options`."""
    settings = dict(observable=final_state, chunk_size=4, progress=False) | options
    return simlab.sweep(LOTKA_VOLTERRA, {"alpha": ALPHAS, "beta": BETAS}, Y0, TS, **settings)


@pytest.fixture(scope="module")
def grid_result():
    return lotka_volterra_sweep()


def test_grid_sweep_equals_a_loop_of_simulate(grid_result):
    rows = [(a, b) for a in ALPHAS for b in BETAS]  # C order: the last name varies fastest
    np.testing.assert_allclose(grid_result.values, np.array(rows))
    np.testing.assert_allclose(
        grid_result.observables["final_state"], loop_final_states(rows), rtol=1e-10
    )
    assert grid_result.num_failed == 0
    assert grid_result.summary() == "all 9 members succeeded."


def test_last_chunk_is_padded_and_the_padding_dropped(grid_result):
    assert grid_result.stats["num_chunks"] == 3  # 9 members in chunks of 4
    assert grid_result.stats["group_size"] == 4 // jax.device_count()  # one group per device
    assert grid_result.observables["final_state"].shape == (9, 2)
    assert grid_result.status.shape == (9,)


def test_a_padded_last_chunk_keeps_each_real_member_in_place():
    # 10 members in chunks of 4: the last chunk holds two real members and two copies.
    alphas = np.linspace(0.4, 0.7, 5)
    result = simlab.sweep(
        LOTKA_VOLTERRA,
        {"alpha": alphas, "beta": BETAS[:2]},
        Y0,
        TS,
        observable=final_state,
        chunk_size=4,
        progress=False,
    )
    assert result.stats["num_chunks"] == 3
    rows = [(a, b) for a in alphas for b in BETAS[:2]]
    np.testing.assert_allclose(result.values, np.array(rows))
    np.testing.assert_allclose(
        result.observables["final_state"], loop_final_states(rows), rtol=1e-10
    )
    assert not np.allclose(*result.observables["final_state"][-2:])  # two distinct members


def test_each_chunk_starts_before_the_previous_one_is_copied_back(grid_result, monkeypatch):
    """The host's work on a chunk overlaps the next chunk's run, and nothing is lost."""
    import simlab._sweep._sweep as sweep_module

    events = []
    started, copied = sweep_module.compiled_chunk, sweep_module.gather_to_host

    def start(*args, **kwargs):
        events.append("start")
        return started(*args, **kwargs)

    def copy_back(tree):
        events.append("copy")
        return copied(tree)

    monkeypatch.setattr(sweep_module, "compiled_chunk", start)
    monkeypatch.setattr(sweep_module, "gather_to_host", copy_back)
    result = lotka_volterra_sweep()
    assert events == ["start", "start", "copy", "start", "copy", "copy"]  # 9 members, chunks of 4
    np.testing.assert_array_equal(
        result.observables["final_state"], grid_result.observables["final_state"]
    )


def test_chunks_travel_as_one_dimensional_arrays(grid_result, monkeypatch):
    """The swept values go to the chunk function as one 1-D column per name, and its
    outputs come back flat (an accelerator tiles a narrow last axis, padding it up to 128
    times over in a transfer); the results keep their shapes."""
    import simlab._sweep._sweep as sweep_module

    shapes = []
    started = sweep_module.compiled_chunk

    def start(arrays, values, statics):
        running = started(arrays, values, statics)
        shapes.append(([v.shape for v in values], jax.tree.map(lambda x: x.shape, running)))
        return running

    monkeypatch.setattr(sweep_module, "compiled_chunk", start)
    result = lotka_volterra_sweep()
    assert shapes == 3 * [([(4,), (4,)], ({"final_state": (8,)}, (4,)))]  # 2 names, 2 states
    np.testing.assert_array_equal(
        result.observables["final_state"], grid_result.observables["final_state"]
    )


class WeightedFinalState(eqx.Module):
    """An observable holding an array: its values are inputs of the compiled chunk."""

    weights: jax.Array

    def __call__(self, trajectory):
        return {"weighted": trajectory.ys[-1] @ self.weights}


def test_an_observable_holding_arrays_is_computed_with_their_values(grid_result):
    weights = jnp.array([0.25, -2.0])
    result = lotka_volterra_sweep(observable=WeightedFinalState(weights))
    np.testing.assert_allclose(
        result.observables["weighted"],
        grid_result.observables["final_state"] @ np.asarray(weights),
        rtol=1e-12,
    )
    other = lotka_volterra_sweep(observable=WeightedFinalState(2 * weights))
    np.testing.assert_allclose(other.observables["weighted"], 2 * result.observables["weighted"])


def test_chunks_share_one_compiled_function(grid_result):
    compiled_before = compiled_chunk._cache_size()
    other = simlab.sweep(
        LOTKA_VOLTERRA,
        {"alpha": ALPHAS[:2], "beta": BETAS + 0.001},
        Y0,
        TS,
        observable=final_state,
        chunk_size=4,
        progress=False,
    )
    assert compiled_chunk._cache_size() == compiled_before
    assert other.stats["chunks_computed"] == 2


@pytest.mark.parametrize(
    ("num_rows", "group_size", "num_groups"), [(9, 3, 3), (7, 3, 3), (5, 8, 1)]
)
def test_rows_computed_in_groups_equal_one_vmap(num_rows, group_size, num_groups):
    def fn(row):
        return {"sum": jnp.sum(row), "outer": jnp.outer(row, row)}

    rows = jnp.arange(num_rows * 2.0).reshape(num_rows, 2)
    grouped = vmapped_in_groups(fn, rows, group_size)
    jax.tree.map(np.testing.assert_array_equal, grouped, jax.vmap(fn)(rows))
    loops = [
        e
        for e in jax.make_jaxpr(vmapped_in_groups, static_argnums=(0, 2))(fn, rows, group_size).eqns
        if e.primitive.name == "scan"
    ]
    assert [e.params["length"] for e in loops] == ([num_groups] if num_groups > 1 else [])


def test_members_of_deterministic_models_run_in_groups_on_a_cpu():
    mesh = simlab.parallel.member_mesh(jax.devices()[:1])
    assert member_group_size(mesh, stochastic=False) == _execute.CPU_GROUP_SIZE
    assert member_group_size(mesh, stochastic=True) is None  # wide draws use every core


def test_a_chunk_run_in_groups_equals_a_loop(monkeypatch):
    """On a CPU a chunk's members run in groups, one after another (3 of 3 members here)."""
    monkeypatch.setattr(_execute, "CPU_GROUP_SIZE", 3)

    def final_prey(trajectory):  # a new observable: the chunk function is traced anew
        return {"final_prey": trajectory.ys[-1, 0]}

    one_device = simlab.parallel.member_mesh(jax.devices()[:1])
    result = lotka_volterra_sweep(observable=final_prey, chunk_size=9, mesh=one_device)
    rows = [(a, b) for a in ALPHAS for b in BETAS]
    np.testing.assert_allclose(
        result.observables["final_prey"], loop_final_states(rows)[:, 0], rtol=1e-10
    )
    assert result.stats["num_chunks"] == 1 and result.stats["group_size"] == 3


def test_zip_and_samples_modes_equal_a_loop(grid_result):
    zipped = lotka_volterra_sweep(mode="zip")
    np.testing.assert_allclose(
        zipped.observables["final_state"],
        loop_final_states(zip(ALPHAS, BETAS, strict=True)),
        rtol=1e-10,
    )
    bounds = {"alpha": [0.4, 0.7], "beta": [0.02, 0.03]}
    samples = simlab.sweep(
        LOTKA_VOLTERRA,
        bounds,
        Y0,
        TS,
        mode="samples",
        num_samples=6,
        key=jax.random.key(1),
        observable=final_state,
        chunk_size=4,
        progress=False,
    )
    assert samples.values.shape == (6, 2)
    assert np.all((samples.values >= [0.4, 0.02]) & (samples.values <= [0.7, 0.03]))
    assert len(np.unique(samples.values[:, 0])) == 6
    np.testing.assert_allclose(
        samples.observables["final_state"], loop_final_states(samples.values), rtol=1e-10
    )
    dataset = samples.to_xarray()
    assert dataset["final_state"].dims == ("member", "final_state_dim_0")
    np.testing.assert_array_equal(dataset["alpha"].values, samples.parameter("alpha"))


def test_sharded_over_four_devices_equals_one_device(grid_result):
    one_device = simlab.parallel.member_mesh(jax.devices()[:1])
    single = lotka_volterra_sweep(mesh=one_device)
    assert len(grid_result.attrs["devices"]) == 4 and len(single.attrs["devices"]) == 1
    np.testing.assert_allclose(
        single.observables["final_state"],
        grid_result.observables["final_state"],
        rtol=1e-12,
        atol=0,
    )
    np.testing.assert_array_equal(single.status, grid_result.status)


def test_to_xarray_labels_grid_dimensions(grid_result):
    dataset = grid_result.to_xarray()
    assert dataset["final_state"].dims == ("alpha", "beta", "final_state_dim_0")
    np.testing.assert_allclose(dataset["alpha"].values, ALPHAS)
    np.testing.assert_allclose(dataset["beta"].values, BETAS)
    assert dataset["alpha"].attrs["units"] == "1/time"
    assert dataset["status"].attrs["flag_meanings"].split()[:2] == ["not_computed", "successful"]
    expected = simulate_final(
        eqx.tree_at(
            lambda m: (m.alpha, m.beta),
            LOTKA_VOLTERRA,
            (jnp.asarray(ALPHAS[2]), jnp.asarray(BETAS[1])),
        ),
        Y0,
    )
    np.testing.assert_allclose(
        dataset["final_state"].sel(alpha=ALPHAS[2], beta=BETAS[1]), expected, rtol=1e-10
    )
    for key in ("simlab_version", "jax_version", "devices", "model", "solver_settings"):
        assert key in dataset.attrs
    assert dataset.attrs["model"].startswith("LotkaVolterra(")


def test_initial_state_component_and_whole_trajectory():
    preys = np.array([10.0, 20.0, 40.0])
    result = simlab.sweep(LOTKA_VOLTERRA, {"prey": preys}, Y0, TS, progress=False)
    dataset = result.to_xarray()
    assert dataset["trajectory"].dims == ("prey", "time", "component")
    assert list(dataset["component"].values) == ["prey", "predator"]
    for prey in preys:
        expected = simulate_ys(LOTKA_VOLTERRA, jnp.array([prey, 4.0]))
        np.testing.assert_allclose(dataset["trajectory"].sel(prey=prey), expected, rtol=1e-10)


@pytest.mark.parametrize("passive_scalar", [False, True])
def test_to_xarray_gives_grid_fields_their_channel_and_spatial_dimensions(passive_scalar):
    """The whole trajectory of a grid model (Navier–Stokes, with and without a second
    channel) has the dims time, channel (if any), x, y, labelled by the cell centres."""
    grid = simlab.Grid((16, 12), extent=(2 * np.pi, 2 * np.pi))
    model = simlab.models.NavierStokes2D(grid=grid, passive_scalar=passive_scalar)
    vorticity = jnp.sin(grid.mesh()[0])
    y0 = jnp.stack([vorticity, jnp.ones(grid.shape)]) if passive_scalar else vorticity
    result = simlab.sweep(
        model, {"viscosity": np.array([1e-3, 2e-3])}, y0, jnp.linspace(0.0, 0.1, 3),
        adaptive=False, dt0=0.05, progress=False,
    )  # fmt: skip
    dataset = result.to_xarray()
    channel = ("channel",) if passive_scalar else ()
    assert dataset["trajectory"].dims == ("viscosity", "time", *channel, "x", "y")
    np.testing.assert_allclose(dataset["x"], grid.coordinates()[0])
    np.testing.assert_allclose(dataset["y"], grid.coordinates()[1])
    np.testing.assert_array_equal(dataset["trajectory"].values, result.observables["trajectory"])


def test_to_xarray_labels_a_one_dimensional_field_by_its_cell_centres():
    grid = simlab.Grid((16,), extent=1.0)
    model = simlab.models.Heat(diffusivity=0.01, grid=grid)
    (x,) = grid.coordinates()
    result = simlab.sweep(
        model, {"diffusivity": np.array([0.01, 0.02])}, jnp.sin(2 * np.pi * x),
        jnp.linspace(0.0, 0.1, 3), progress=False,
    )  # fmt: skip
    dataset = result.to_xarray()
    assert dataset["trajectory"].dims == ("diffusivity", "time", "x")
    np.testing.assert_allclose(dataset["x"], x)
    np.testing.assert_array_equal(dataset["trajectory"].values, result.observables["trajectory"])


class Riccati(AbstractODEModel):
    r"""$\dot y = r y^2$: from $y(0) = 1$, $y(t) = 1 / (1 - r t)$, infinite at $t = 1/r$."""

    rate: jax.Array = parameter(lower=0.0)
    state_names = ("y",)

    def __call__(self, t, y, args):
        return self.rate * y**2


class CheckedDecay(AbstractODEModel):
    """Decay whose vector field refuses rates above 5 with an Equinox runtime check."""

    rate: jax.Array = parameter(lower=0.0)
    state_names = ("y",)

    def __call__(self, t, y, args):
        return -self.rate * eqx.error_if(y, self.rate > 5.0, "the rate is above 5")


def test_a_failed_check_in_the_model_raises_with_its_message(caplog):
    with pytest.raises(eqx.EquinoxRuntimeError, match="^the rate is above 5$"):
        simlab.sweep(
            CheckedDecay(rate=1.0),
            {"rate": np.array([1.0, 6.0])},
            jnp.array([1.0]),
            jnp.linspace(0.0, 1.0, 3),
            progress=False,
        )
    assert "callback failed" not in caplog.text  # no traceback of JAX's logged on the way


def test_members_that_blow_up_are_masked_and_reported():
    rates = np.array([0.2, 0.5, 0.8, 1.5, 3.0])  # blow-up before t = 1 when rate > 1
    result = simlab.sweep(
        Riccati(rate=1.0),
        {"rate": rates},
        jnp.array([1.0]),
        jnp.array([0.0, 1.0]),
        rtol=1e-8,
        atol=1e-8,
        max_steps=256,
        observable=final_state,
        progress=False,
    )
    blows_up = rates > 1
    np.testing.assert_array_equal(result.succeeded, ~blows_up)
    assert result.num_failed == 2
    final = result.observables["final_state"][:, 0]
    np.testing.assert_allclose(final[~blows_up], 1 / (1 - rates[~blows_up]), rtol=1e-6)
    assert np.all(np.isnan(final[blows_up]))
    failures = result.failures()
    assert [f["rate"] for f in failures] == [1.5, 3.0]
    assert all(f["status"] in ("max_steps_reached", "nonfinite_state") for f in failures)
    assert result.summary().startswith("2 of 5 members failed")
    assert "rate in [1.5, 3]" in result.summary()


@pytest.mark.parametrize(
    ("params", "kwargs", "error", "message"),
    [
        ({"kappa": [1.0]}, {}, ValueError, "unknown parameter 'kappa'"),
        ({"alpha": []}, {}, ValueError, r"params\['alpha'\] is empty"),
        ({"alpha": [0.5, np.nan]}, {}, ValueError, "must be finite; entry 1 is nan"),
        ({"alpha": [[0.5]]}, {}, ValueError, "must be a 1-D array"),
        ({"alpha": [0.5, -1.0]}, {}, ValueError, r"'alpha' must lie in \[0, inf\)"),
        ({"alpha": ["a"]}, {}, TypeError, "must hold real numbers"),
        ({}, {}, ValueError, "params must be a non-empty mapping"),
        ({"alpha": [0.5, 0.6], "beta": [0.02]}, {"mode": "zip"}, ValueError, "same length"),
        ({"alpha": [0.5]}, {"mode": "cartesian"}, ValueError, "unknown mode 'cartesian'"),
        ({"alpha": [0.4, 0.6]}, {"mode": "samples", "num_samples": 4}, ValueError, "pass key="),
        (
            {"alpha": [0.4, 0.6]},
            {"mode": "samples", "key": jax.random.key(0)},
            ValueError,
            "needs num_samples",
        ),
        (
            {"alpha": [0.6, 0.4]},
            {"mode": "samples", "num_samples": 4, "key": jax.random.key(0)},
            ValueError,
            "lower < upper",
        ),
        ({"alpha": [0.5]}, {"chunk_size": 0}, ValueError, "chunk_size must be a positive"),
        ({"alpha": [0.5]}, {"mesh": "cpu"}, ValueError, "one-axis jax.sharding.Mesh"),
        ({"alpha": [0.5]}, {"rtol": -1.0}, ValueError, r"rtol must lie in \(0, 0.5\)"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(params, kwargs, error, message):
    with pytest.raises(error, match=message), without_type_checks():
        simlab.sweep(LOTKA_VOLTERRA, params, Y0, TS, progress=False, **kwargs)


def test_a_bad_chunk_size_is_refused_before_the_model_is_traced():
    traced = []

    def observable(trajectory):
        traced.append(True)
        return {"final": trajectory.ys[-1]}

    with pytest.raises(ValueError, match="chunk_size must be a positive"), without_type_checks():
        simlab.sweep(LOTKA_VOLTERRA, {"alpha": [0.5]}, Y0, TS, observable=observable, chunk_size=0)
    assert not traced


def test_bad_model_state_and_observable_are_refused(grid_result):
    needs_a_model = pytest.raises(TypeError, match="needs a simlab.models.AbstractModel")
    with needs_a_model, without_type_checks():
        simlab.sweep(lambda t, y, args: -y, {"alpha": [0.5]}, Y0, TS)
    with pytest.raises(ValueError, match="y0 has shape"):
        simlab.sweep(LOTKA_VOLTERRA, {"alpha": [0.5]}, jnp.ones(3), TS)
    with pytest.raises(TypeError, match="must return a dict"):
        simlab.sweep(
            LOTKA_VOLTERRA,
            {"alpha": [0.5]},
            Y0,
            TS,
            observable=lambda trajectory: trajectory.ys[-1],
        )
    with pytest.raises(TypeError, match="must be floating point"):
        simlab.sweep(
            LOTKA_VOLTERRA,
            {"alpha": [0.5]},
            Y0,
            TS,
            observable=lambda trajectory: {"steps": trajectory.stats["num_steps"]},
        )
    with pytest.raises(ValueError, match="identifiers other than"):
        simlab.sweep(
            LOTKA_VOLTERRA,
            {"alpha": [0.5]},
            Y0,
            TS,
            observable=lambda trajectory: {"status": trajectory.ys[-1]},
        )
    with pytest.raises(ValueError, match="was not swept"):
        grid_result.parameter("gamma")


class FakeTerminal:
    """A stderr that says it is a terminal and remembers what was written."""

    def __init__(self):
        self.text = ""

    def isatty(self):
        return True

    def write(self, text):
        self.text += text

    def flush(self):
        pass


def test_progress_bar_by_default_shows_rate_in_a_terminal_only(grid_result, monkeypatch, capsys):
    def run(progress):
        return lotka_volterra_sweep(progress=progress)

    run(progress=None)  # pytest's captured stderr is not a terminal: no bar
    assert capsys.readouterr().err == ""
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    run(progress=False)
    assert terminal.text == ""
    run(progress=None)
    assert "9/9" in terminal.text and "member/s" in terminal.text


def test_default_chunk_size_fits_the_memory_budget():
    from simlab._sweep._execute import MAX_CHUNK_SIZE, MEMORY_BUDGET_BYTES, default_chunk_size
    from simlab.io import VariableSpec

    whole_trajectory = {"trajectory": VariableSpec((10_001, 100), np.dtype("float64"), ())}
    size = default_chunk_size(whole_trajectory, num_times=10_001, state_size=100, itemsize=8)
    bytes_per_member = 3 * 10_001 * 100 * 8 + 1024
    assert size == MEMORY_BUDGET_BYTES // bytes_per_member
    assert size * bytes_per_member <= MEMORY_BUDGET_BYTES
    scalar = {"final": VariableSpec((), np.dtype("float64"), ())}
    assert default_chunk_size(scalar, num_times=2, state_size=1, itemsize=8) == MAX_CHUNK_SIZE


def test_default_chunks_are_as_few_as_fit_and_of_about_one_size():
    from simlab._sweep._execute import balanced_chunk_size

    # 2**18 members, at most 252,297 a chunk: two of 131,072, not a full one and a padded
    # one of 9,847 members (which cost as much as the full one on an accelerator).
    assert balanced_chunk_size(2**18, 252_297, 1) == 2**17
    for members in (1, 7, 9, 10, 1000, 8193, 2**16 + 1):
        for largest in (1, 3, 4, 8, 8192):
            for devices in (1, 2, 4):
                size = balanced_chunk_size(members, largest, devices)
                chunks = -(-members // size)
                assert size % devices == 0 and size <= -(-largest // devices) * devices
                assert chunks <= -(-members // largest)  # no more chunks than needed
                assert chunks * size - members < chunks * devices  # padding: rounding only


class _Accelerator:
    """A device as `chunk_memory_budget` reads one: its platform and its runtime's memory."""

    platform = "tpu"

    def __init__(self, bytes_limit):
        self.bytes_limit = bytes_limit

    def memory_stats(self):
        return {"bytes_limit": self.bytes_limit}


def test_an_accelerators_chunks_may_take_a_sixteenth_of_its_memory():
    from types import SimpleNamespace

    from simlab._sweep._execute import MEMORY_BUDGET_BYTES, chunk_memory_budget

    def mesh(*devices):
        return SimpleNamespace(devices=np.array(devices, dtype=object), size=len(devices))

    big, small = _Accelerator(16 * 2**30), _Accelerator(2**30)
    with without_type_checks():  # the meshes stand in for `jax.sharding.Mesh`es
        assert chunk_memory_budget(mesh(big)) == 2**30
        assert chunk_memory_budget(mesh(big, _Accelerator(16 * 2**30))) == 2 * 2**30
        assert chunk_memory_budget(mesh(small)) == MEMORY_BUDGET_BYTES  # never below a CPU's
    cpu = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("members",))
    assert chunk_memory_budget(cpu) == MEMORY_BUDGET_BYTES


def test_a_default_sweep_splits_its_members_into_equal_chunks(monkeypatch):
    monkeypatch.setattr(_execute, "MAX_CHUNK_SIZE", 16)  # the widest default chunk here
    rates = np.linspace(0.1, 1.8, 18)
    result = simlab.sweep(
        Riccati(rate=1.0),
        {"rate": rates},
        jnp.array([0.5]),
        jnp.array([0.0, 1.0]),
        rtol=1e-8,
        atol=1e-8,
        observable=final_state,
        progress=False,
    )
    devices = jax.device_count()
    assert result.stats["num_chunks"] == 2  # of 9 each (rounded to the devices), not 16 and 2
    assert result.stats["chunk_size"] == -(-9 // devices) * devices
    # y' = rate y², y(0) = 1/2: y(1) = 1 / (2 - rate)
    np.testing.assert_allclose(result.observables["final_state"][:, 0], 1 / (2 - rates), rtol=1e-6)
