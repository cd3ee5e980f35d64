"""The sweep store: xarray reads it, a killed sweep resumes, other sweeps' stores are refused."""

import os
import pathlib
import signal
import subprocess
import sys
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr
from helpers import LOTKA_VOLTERRA_PARAMETERS
from jaxtyping import Array, Float

import simlab
from simlab._results import status_codes

HERE = pathlib.Path(__file__).parent


@pytest.fixture(scope="module")
def shared():
    import _multihost_worker

    return _multihost_worker


@pytest.fixture(scope="module")
def uninterrupted(shared):
    return shared.run_sweep()


@pytest.fixture(scope="module")
def stored(shared, tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "sweep.zarr"
    return path, shared.run_sweep(store=path)


def test_xarray_opens_the_store_and_it_equals_the_result(stored, uninterrupted):
    path, result = stored
    np.testing.assert_array_equal(
        result.observables["final_state"], uninterrupted.observables["final_state"]
    )
    dataset = xr.open_zarr(path)
    assert dataset["final_state"].dims == ("member", "final_state_dim_0")
    np.testing.assert_array_equal(
        dataset["final_state"].values, uninterrupted.observables["final_state"]
    )
    np.testing.assert_array_equal(dataset["status"].values, uninterrupted.status)
    np.testing.assert_array_equal(dataset["alpha"].values, uninterrupted.parameter("alpha"))
    assert dataset["alpha"].attrs["units"] == "1/time"
    assert dataset.attrs["model"].startswith("LotkaVolterra(")
    assert dataset.attrs["jax_version"] == jax.__version__ and dataset.attrs["devices"]
    assert not list(path.parent.rglob("*.partial"))


def test_rerunning_a_finished_sweep_reads_it_back(shared, stored, uninterrupted):
    path, _ = stored
    again = shared.run_sweep(store=path)
    assert again.stats["chunks_computed"] == 0
    assert again.stats["chunks_resumed"] == again.stats["num_chunks"] == 3
    np.testing.assert_array_equal(
        again.observables["final_state"], uninterrupted.observables["final_state"]
    )


def test_a_sweep_killed_with_sigkill_resumes_to_the_same_result(shared, uninterrupted, tmp_path):
    path = tmp_path / "sweep.zarr"
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "_resume_worker.py"), str(path)],
        # The checkout under test first, as in this process, then the worker's own folder.
        env={
            **os.environ,
            "JAX_PLATFORMS": "cpu",
            "PYTHONPATH": f"{HERE.parent}{os.pathsep}{HERE}",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    for line in worker.stdout:  # pauses 2 s after each chunk: kill it after the first
        lines.append(line)
        if line.startswith("written"):
            worker.send_signal(signal.SIGKILL)
            break
    worker.wait(timeout=60)
    assert worker.returncode == -signal.SIGKILL, "".join(lines)[-3000:]
    assert xr.open_zarr(path)["status"].values.tolist().count(-1) > 0  # unfinished

    resumed = shared.run_sweep(store=path)
    assert resumed.stats["chunks_resumed"] >= 1
    assert resumed.stats["chunks_computed"] >= 1
    np.testing.assert_array_equal(
        resumed.observables["final_state"], uninterrupted.observables["final_state"]
    )
    np.testing.assert_array_equal(resumed.status, uninterrupted.status)


class OtherLotkaVolterra(simlab.models.AbstractODEModel):
    """The same fields and equations as LotkaVolterra, under another class."""

    alpha: Float[Array, ""] = simlab.models.parameter(lower=0.0)
    beta: Float[Array, ""] = simlab.models.parameter(lower=0.0)
    gamma: Float[Array, ""] = simlab.models.parameter(lower=0.0)
    delta: Float[Array, ""] = simlab.models.parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("prey", "predator")

    def __call__(self, t, y, args):
        prey, predator = y[0], y[1]
        return jnp.stack(
            [
                self.alpha * prey - self.beta * prey * predator,
                self.delta * prey * predator - self.gamma * predator,
            ]
        )


def other_final_state(trajectory):
    return {"final_state": trajectory.ys[-1]}


def final_prey(trajectory):
    return {"final_state": trajectory.ys[-1, :1]}


@pytest.mark.parametrize(
    ("change", "differing"),
    [
        (dict(params={"beta_offset": 0.001}), ["swept_values"]),
        (dict(model=dict(gamma=0.9)), ["unswept_parameters"]),
        (dict(model_class=OtherLotkaVolterra), ["model"]),
        (dict(y0=np.array([30.0, 4.5])), ["y0"]),
        # The observable's digest is of what it computes on this sweep's trajectory, whose
        # shapes (one more time) and solver statistics (another integrator) change with it.
        (dict(ts=np.linspace(0.0, 4.0, 6)), ["observable", "ts"]),
        (dict(params={"rename": "delta"}), ["swept_names", "unswept_parameters"]),
        (dict(mode="zip"), ["mode", "swept_values"]),
        (dict(observable=other_final_state), ["observable"]),
        (dict(observable=final_prey), ["observable", "outputs"]),
        (dict(rtol=1e-8), ["settings"]),
        (dict(integrator="diffrax"), ["observable", "settings"]),
        (dict(chunk_size=8), ["chunk_size"]),
    ],
    ids=lambda value: "+".join(value) if isinstance(value, list) else "",
)
def test_a_store_of_another_sweep_is_refused_for_each_identity_key(
    shared, stored, change, differing
):
    path, _ = stored
    change = dict(change)
    model = change.pop("model_class", simlab.models.LotkaVolterra)(
        **{**LOTKA_VOLTERRA_PARAMETERS, **change.pop("model", {})}
    )
    params = dict(shared.PARAMS)
    swept = change.pop("params", {})
    if "beta_offset" in swept:
        params["beta"] = params["beta"] + swept["beta_offset"]
    if "rename" in swept:
        params[swept["rename"]] = params.pop("beta")
    y0, ts = change.pop("y0", shared.Y0), change.pop("ts", shared.TS)
    settings = dict(observable=shared.final_state, chunk_size=shared.CHUNK_SIZE) | change
    expected = f"different sweep \\(differs in: {', '.join(differing)}\\)"
    with pytest.raises(ValueError, match=expected):
        simlab.sweep(model, params, y0, ts, store=path, progress=False, **settings)


def test_a_folder_that_is_not_a_store_and_an_unwritable_path_are_refused(shared, tmp_path):
    (tmp_path / "notes.txt").write_text("not a sweep")
    with pytest.raises(ValueError, match="exists but is not a simlab sweep store"):
        shared.run_sweep(store=tmp_path)
    with pytest.raises(ValueError, match="cannot create the sweep store"):
        shared.run_sweep(store=tmp_path / "notes.txt" / "sweep.zarr")


def test_a_chunk_without_its_status_is_recomputed(shared, uninterrupted, tmp_path):
    """A crash between a chunk's observables and its status leaves it unfinished."""
    import zarr

    path = tmp_path / "sweep.zarr"
    shared.run_sweep(store=path)
    group = zarr.open_group(path, mode="r+")
    group["final_state"][4:8] = 999.0  # written...
    group["status"][4:8] = -1  # ...but the completion mark is not
    resumed = shared.run_sweep(store=path)
    assert resumed.stats["chunks_computed"] == 1 and resumed.stats["chunks_resumed"] == 2
    np.testing.assert_array_equal(
        resumed.observables["final_state"], uninterrupted.observables["final_state"]
    )


def test_atomic_write_replaces_whole_or_leaves_the_old_file(tmp_path):
    path = tmp_path / "result.npz"
    path.write_bytes(b"old")
    seen = []

    def write_new(temporary):
        seen.append(temporary)
        np.savez(temporary, x=np.arange(3))

    assert simlab.io.atomic_write(path, write_new) == path
    (temporary,) = seen
    assert temporary.parent == path.parent and temporary.suffix == ".npz"
    with np.load(path) as stored:
        np.testing.assert_array_equal(stored["x"], np.arange(3))

    def fail_half_way(temporary):
        temporary.write_bytes(b"partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        simlab.io.atomic_write(path, fail_half_way)
    assert sorted(os.listdir(tmp_path)) == ["result.npz"]  # no temporary left behind
    with np.load(path) as stored:
        np.testing.assert_array_equal(stored["x"], np.arange(3))


def test_status_codes_round_trip_under_jit_and_vmap():
    import jax.numpy as jnp

    from simlab._results import status_code, status_codes, status_name

    RESULTS = simlab.RESULTS
    codes = status_codes()
    assert len(set(codes.values())) == len(codes) == len(RESULTS)
    for name, code in codes.items():
        assert status_name(code) == name
        assert int(status_code(getattr(RESULTS, name))) == code

    @jax.jit
    @jax.vmap
    def codes_of(finite, reached_end):
        result = RESULTS.where(finite, RESULTS.successful, RESULTS.nonfinite_state)
        result = RESULTS.where(reached_end, result, RESULTS.max_steps_reached)
        return status_code(result)

    batch = codes_of(jnp.array([True, False, True, False]), jnp.array([True, True, False, False]))
    assert [status_name(int(c)) for c in batch] == [
        "successful",
        "nonfinite_state",
        "max_steps_reached",
        "max_steps_reached",
    ]
    with pytest.raises(ValueError, match="not a simlab.RESULTS code"):
        status_name(max(codes.values()) + 1)


def test_a_read_names_every_damaged_chunk_not_only_the_first(shared, tmp_path):
    """Chunks 0 and 2 edited on disk: the read error names both; only chunk 1 is finished."""
    path = tmp_path / "sweep.zarr"
    shared.run_sweep(store=path)
    chunks = [path / "final_state" / "c" / str(index) / "0" for index in (0, 2)]
    for chunk in chunks:  # the other chunk's bytes: well-formed, but not this chunk's data
        chunk.write_bytes((path / "final_state" / "c" / "1" / "0").read_bytes())
    layout = simlab.io.StoreLayout(
        num_members=9,
        chunk_size=shared.CHUNK_SIZE,
        variables={"final_state": simlab.io.VariableSpec((2,), np.dtype(float), ("d",))},
        member_coords={},
        extra_coords={},
        units={},
    )
    store = simlab.io.SweepStore(path, layout)
    with pytest.raises(ValueError) as error:
        store.read()
    assert all(f"{chunk} does not match its checksum" in str(error.value) for chunk in chunks)
    with pytest.warns(UserWarning, match="recomputing those chunks"):
        assert store.finished_chunks().tolist() == [False, True, False]


def test_a_chunk_of_failed_members_reads_back_as_nan(tmp_path):
    """Every member of a chunk failed: its values are all NaN, the fill value, and must still
    be written and read back as computed, not reported missing."""
    layout = simlab.io.StoreLayout(
        num_members=4,
        chunk_size=2,
        variables={"final_state": simlab.io.VariableSpec((2,), np.dtype(float), ("d",))},
        member_coords={},
        extra_coords={},
        units={},
    )
    store = simlab.io.SweepStore.open(tmp_path / "sweep.zarr", layout, identity={}, attrs={})
    failed = status_codes()["max_steps_reached"]
    for index in (0, 1):
        store.write_chunk(index, {"final_state": np.full((2, 2), np.nan)}, np.full(2, failed))
    assert store.finished_chunks().tolist() == [True, True]
    outputs, status = store.read()
    assert np.isnan(outputs["final_state"]).all() and status.tolist() == [failed] * 4
