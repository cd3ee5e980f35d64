"""Bad, damaged and hostile input: each case is refused clearly or gives the right result.

Real files, real processes: checkpoints and stores are damaged on disk the way a crash, a
full disk or a careless edit would damage them.
"""

import json
import os
import pathlib
from typing import ClassVar

import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float

import simlab
import simlab.experiment
import simlab.plot
from simlab.models import AbstractODEModel, parameter

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent


class TwoDecays(AbstractODEModel):
    """Two independent decays, dx/dt = -a x, dy/dt = -b y: x(t) = x0 exp(-a t)."""

    a: Float[Array, ""] = parameter(lower=0.0)
    b: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("x", "y")

    def __call__(self, t, y, args):
        return jnp.stack([-self.a * y[0], -self.b * y[1]])


TS = jnp.linspace(0.0, 2.0, 9)
Y0 = jnp.array([1.0, 2.0])


def _data(a, b):
    return jnp.stack([jnp.exp(-a * TS), 2.0 * jnp.exp(-b * TS)], axis=1)


def _fit(observations, params=("a", "b"), **settings):
    return simlab.fit(
        TwoDecays(a=0.5, b=0.5),
        TS,
        observations,
        y0=Y0,
        params=list(params),
        max_steps=30,
        checkpoint_every=5,
        **settings,
    )


# --- 1. fit checkpoints: resumed only by the fit that wrote them -------------------------


def test_a_checkpoint_of_another_problem_is_refused(tmp_path):
    path = tmp_path / "fit.npz"
    data_a, data_b = _data(0.7, 1.3), _data(0.2, 0.4)
    first = _fit(data_a, checkpoint=path)
    np.testing.assert_allclose([first.params["a"], first.params["b"]], [0.7, 1.3], rtol=1e-6)
    # The same fit resumes (to the same answer); other data, other names are refused.
    again = _fit(data_a, checkpoint=path)
    np.testing.assert_array_equal(again.params["a"], first.params["a"])
    with pytest.raises(ValueError, match=r"different problem \(differs in: data\)"):
        _fit(data_b, checkpoint=path)
    with pytest.raises(ValueError, match=r"differs in: .*params"):
        _fit(data_a, params=("b", "a"), checkpoint=path)
    with pytest.raises(ValueError, match=r"differs in: .*observe"):
        _fit(data_a[:, :1], observe=["x"], params=("a",), checkpoint=path)
    # Without the checkpoint, data B gives B's answer: nothing of A leaked.
    other = _fit(data_b, checkpoint=tmp_path / "other.npz")
    np.testing.assert_allclose([other.params["a"], other.params["b"]], [0.2, 0.4], rtol=1e-6)


@pytest.mark.parametrize("damage", ["random", "truncated", "empty", "folder"])
def test_a_damaged_checkpoint_gets_one_clear_message(tmp_path, damage):
    path = tmp_path / "fit.npz"
    if damage == "folder":
        path.mkdir()
    else:
        _fit(_data(0.7, 1.3), checkpoint=path)
        content = path.read_bytes()
        path.write_bytes(
            {"random": os.urandom(2000), "truncated": content[: len(content) // 2], "empty": b""}[
                damage
            ]
        )
    with pytest.raises(ValueError) as caught:
        _fit(_data(0.7, 1.3), checkpoint=path)
    message = str(caught.value)
    assert "fit.npz" in message and "allow_pickle" not in message
    assert ("is a folder" if damage == "folder" else "cannot be read") in message
    error = caught.value  # the traceback carries no chained NumPy error either
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


def test_an_unwritable_checkpoint_folder_is_refused_before_any_step(tmp_path):
    with pytest.raises(ValueError, match="cannot write the checkpoint"):
        _fit(_data(0.7, 1.3), checkpoint=tmp_path / "missing" / "fit.npz")
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(ValueError, match="cannot write the checkpoint"):
            _fit(_data(0.7, 1.3), checkpoint=folder / "fit.npz")
    finally:
        folder.chmod(0o700)


# --- 3. the sweep store: mixed, missing, damaged and edited data are caught --------------


@pytest.fixture(scope="module")
def shared():
    import _multihost_worker

    return _multihost_worker


@pytest.fixture(scope="module")
def reference(shared):
    return shared.run_sweep()


def _stored(shared, tmp_path):
    path = tmp_path / "sweep.zarr"
    shared.run_sweep(store=path)
    return path


def test_two_different_lambdas_never_share_a_store(shared, tmp_path):
    path = tmp_path / "sweep.zarr"
    model = simlab.models.LotkaVolterra(alpha=0.55, beta=0.028, gamma=0.84, delta=0.026)
    settings = dict(chunk_size=shared.CHUNK_SIZE, progress=False, store=path)
    final = lambda trajectory: {"value": trajectory.ys[-1]}  # noqa: E731
    simlab.sweep(model, shared.PARAMS, shared.Y0, shared.TS, observable=final, **settings)
    first = lambda trajectory: {"value": trajectory.ys[0]}  # noqa: E731 (same qualname)
    with pytest.raises(ValueError, match=r"differs in: observable"):
        simlab.sweep(model, shared.PARAMS, shared.Y0, shared.TS, observable=first, **settings)
    # An explicit name is the identity instead: the same name resumes, another is refused.
    named = tmp_path / "named.zarr"
    settings["store"] = named
    simlab.sweep(
        model,
        shared.PARAMS,
        shared.Y0,
        shared.TS,
        observable=final,
        observable_name="v1",
        **settings,
    )
    again = simlab.sweep(
        model,
        shared.PARAMS,
        shared.Y0,
        shared.TS,
        observable=final,
        observable_name="v1",
        **settings,
    )
    assert again.stats["chunks_computed"] == 0
    with pytest.raises(ValueError, match=r"differs in: observable"):
        simlab.sweep(
            model,
            shared.PARAMS,
            shared.Y0,
            shared.TS,
            observable=first,
            observable_name="v2",
            **settings,
        )


def _chunk_file(path, index):
    return path / "final_state" / "c" / str(index) / "0"


@pytest.mark.parametrize("damage", ["deleted", "truncated", "foreign"])
def test_a_damaged_chunk_is_recomputed_on_resume_and_named_on_read(
    shared, reference, tmp_path, damage
):
    path = _stored(shared, tmp_path)
    chunk = _chunk_file(path, 1)
    if damage == "deleted":
        chunk.unlink()
    elif damage == "truncated":
        chunk.write_bytes(chunk.read_bytes()[:7])
    else:  # chunk 0's file copied over chunk 1's: well-formed, but not this chunk's data
        chunk.write_bytes(_chunk_file(path, 0).read_bytes())
    store = simlab.io.SweepStore(path, _layout(shared, path))
    with pytest.raises(ValueError, match=f"{chunk}"):
        store.read()
    with pytest.warns(UserWarning, match=f"{chunk}.*recomputing"):
        resumed = shared.run_sweep(store=path)
    assert resumed.stats["chunks_computed"] == 1
    np.testing.assert_array_equal(
        resumed.observables["final_state"], reference.observables["final_state"]
    )
    np.testing.assert_array_equal(resumed.status, reference.status)


def _layout(shared, path):
    """The layout of the shared sweep's store, as `sweep` builds it."""
    import zarr

    group = zarr.open_group(path, mode="r")
    return simlab.io.StoreLayout(
        num_members=group["status"].shape[0],
        chunk_size=shared.CHUNK_SIZE,
        variables={"final_state": simlab.io.VariableSpec((2,), np.dtype(float), ("d",))},
        member_coords={},
        extra_coords={},
        units={},
    )


@pytest.mark.parametrize(
    ("array", "key", "value"),
    [("final_state", "shape", [4, 2]), ("status", "fill_value", 0)],
)
def test_edited_store_metadata_is_refused(shared, tmp_path, array, key, value):
    path = _stored(shared, tmp_path)
    metadata = path / array / "zarr.json"
    content = json.loads(metadata.read_text())
    content[key] = value
    metadata.write_text(json.dumps(content))
    (path / "status" / "c" / "1").unlink()  # with fill_value 0 it would read as success
    with pytest.raises(ValueError, match=f"{metadata}.*does not match this sweep"):
        shared.run_sweep(store=path)


# --- 4. input the code could refuse, and physical values it wrongly refused ---------------


def test_an_underdetermined_fit_warns_instead_of_silent_nan_errors():
    # Four unknowns (a, b and the initial state) from two observations of x.
    with pytest.warns(UserWarning, match=r"underdetermined: 2 observed values for 4"):
        result = simlab.fit(
            TwoDecays(a=0.5, b=0.5),
            TS[:2],
            _data(0.7, 1.3)[:2, :1],
            y0=Y0,
            params=["a", "b"],
            observe=["x"],
            fit_y0=True,
            max_steps=5,
            throw=False,
        )
    assert np.isnan(result.noise_variance)


def test_plain_lists_of_numbers_are_one_data_set():
    ts = [0.0, 0.5, 1.0, 1.5, 2.0]
    observations = [[float(np.exp(-0.7 * t)), float(2.0 * np.exp(-1.3 * t))] for t in ts]
    result = simlab.fit(TwoDecays(a=0.5, b=0.5), ts, observations, y0=[1.0, 2.0], params=["a", "b"])
    np.testing.assert_allclose([result.params["a"], result.params["b"]], [0.7, 1.3], rtol=1e-6)
    assert np.shape(result.y0) == (2,)


@pytest.mark.parametrize(
    ("model", "zero"),
    [
        (simlab.models.Lorenz, dict(sigma=10.0, rho=0.0, beta=8 / 3)),
        (simlab.models.LotkaVolterra, dict(alpha=0.0, beta=0.0, gamma=0.0, delta=0.0)),
        (simlab.models.SIR, dict(beta=0.0, gamma=0.0, population=100.0)),
        (simlab.models.DampedPendulum, dict(length=1.0, damping=0.0, gravity=0.0)),
        (simlab.models.Robertson, dict(k1=0.0, k2=0.0, k3=0.0)),
    ],
)
def test_physical_zero_values_are_accepted(model, zero):
    model = model(**zero)
    assert bool(model.parameters_in_range())


def test_lorenz_at_rho_zero_decays_to_the_origin():
    # rho = 0: no convection; the linearisation at 0 has eigenvalues -sigma, -1, -beta < 0.
    model = simlab.models.Lorenz(sigma=10.0, rho=0.0, beta=8 / 3)
    trajectory = simlab.simulate(model, jnp.array([1.0, 1.0, 1.0]), jnp.linspace(0.0, 10.0, 3))
    np.testing.assert_allclose(trajectory.ys[-1], 0.0, atol=1e-4)
    # z(t) = z0 exp(-beta t) exactly when x y stays ~0 late; early, check z against SciPy.
    from scipy.integrate import solve_ivp

    reference = solve_ivp(
        lambda t, y: [10 * (y[1] - y[0]), -y[0] * y[2] - y[1], y[0] * y[1] - 8 / 3 * y[2]],
        (0.0, 10.0),
        [1.0, 1.0, 1.0],
        t_eval=[0.0, 5.0, 10.0],
        rtol=1e-10,
        atol=1e-12,
    )
    np.testing.assert_allclose(trajectory.ys, reference.y.T, atol=1e-5)


# --- 2, 5, 6. the command line: one clear line, exit 2; nothing outside the project -------

CSV_TOML = """
description = "a fit to a CSV file"

[model]
name = "LotkaVolterra"
parameters = { alpha = 0.5, beta = 0.02, gamma = 0.8, delta = 0.02 }

[initial_state]
prey = 30.0
predator = 4.0

[time]
stop = 2.0
num_points = 5

[data]
csv = "CSV_PATH"

[fit]
parameters = ["alpha"]
"""

GOOD_CSV = "t,prey,predator\n0,30,4\n1,40,5\n2,50,7\n"


def _simlab(capsys, *arguments) -> tuple[int, str]:
    from simlab import cli

    code = cli.main(list(arguments))
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    if code == 2:
        assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return code, lines[0] if lines else captured.out


def _experiment(folder, csv_path="data.csv", text=CSV_TOML):
    path = folder / "fit.toml"
    path.write_text(text.replace("CSV_PATH", str(csv_path)), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (GOOD_CSV.encode("utf-8"), None),
        (b"t,prey,predator\n0,30,4\n1,\xff\xfe,5\n", "is not UTF-8 text"),
        (b"t,prey,predator\n0,30,4\n1,40\n2,50,7\n", "data row 2 has a different number"),
        (b"t,prey,predator\n0,30,4\n", "holds 1 data row(s); a fit needs at least 2"),
        (b"t,prey,predator\n0,30,4\n1,SECRET,5\n", "holds a value that is not a number"),
        (b"SECRET,x\n0,1\n1,2\n", "has no column 't' in its header"),
    ],
)
def test_bad_csv_files_exit_2_without_echoing_them(isolated, capsys, content, message):
    (isolated / "data.csv").write_bytes(content)
    code, line = _simlab(capsys, "run", str(_experiment(isolated)), "--check")
    if message is None:
        assert code == 0 and "valid" in line
        return
    assert code == 2 and message in line and ("[data.csv]" in line or "[data.columns]" in line)
    assert "SECRET" not in line


def test_a_data_path_outside_the_project_is_refused(isolated, capsys, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "secret.csv"
    outside.write_text("SECRET,line\n", encoding="utf-8")
    project = isolated / "project"
    project.mkdir()
    os.chdir(project)
    for path in (outside, "../../" + outside.parent.name + "/secret.csv"):
        code, line = _simlab(capsys, "run", str(_experiment(project, path)), "--check")
        assert code == 2 and "outside the experiment's folder and the current project" in line
        assert "SECRET" not in line


def test_a_data_file_outside_the_project_is_taken_from_the_command_line(
    isolated, capsys, tmp_path_factory
):
    outside = tmp_path_factory.mktemp("elsewhere") / "pelts.csv"
    outside.write_text(GOOD_CSV, encoding="utf-8")
    project = isolated / "project"
    project.mkdir()
    os.chdir(project)
    path = _experiment(project, outside)
    code, line = _simlab(capsys, "run", str(path), "--check")
    assert code == 2 and "--data PATH" in line  # the refusal names the way to pass it
    # Named by the user, the same file is read; the experiment's own source is replaced.
    code, line = _simlab(capsys, "run", str(path), "--check", "--data", str(outside))
    assert code == 0 and "valid" in line
    relative = os.path.relpath(outside, project)
    experiment = simlab.experiment.load(_experiment(project, "missing.csv"), data=relative)
    assert experiment.data.source == f"csv:{outside.resolve()}"
    np.testing.assert_array_equal(experiment.data.observations, [[30, 4], [40, 5], [50, 7]])
    # A bad file named on the command line gets the same one-line refusal as any other.
    code, line = _simlab(capsys, "run", str(path), "--check", "--data", str(outside) + ".no")
    assert code == 2 and "no such file" in line


@pytest.mark.parametrize(
    ("change", "key", "needs"),
    [
        (("num_points = 5", "num_points = 100000000000"), "time.num_points", "GiB"),
        (('csv = "CSV_PATH"', 'csv = "CSV_PATH"\n[solver]\nmax_steps = 1000000000000'),
         "solver.max_steps", "at most"),
        (('[fit]', '[sweep]\nparameters.alpha = { start = 0.1, stop = 1.0, num = 1000000 }\n'
                   'parameters.gamma = { start = 0.1, stop = 1.0, num = 1000000 }\n[fit]'),
         "sweep.parameters", "GiB"),
    ],
)  # fmt: skip
def test_absurd_sizes_are_refused_at_check_with_the_memory_needed(
    isolated, capsys, change, key, needs
):
    (isolated / "data.csv").write_text(GOOD_CSV, encoding="utf-8")
    path = _experiment(isolated, text=CSV_TOML.replace(*change))
    code, line = _simlab(capsys, "run", str(path), "--check")
    assert code == 2 and f"[{key}]" in line and needs in line


def test_an_absurd_grid_is_refused_before_any_array_is_made(isolated, capsys):
    text = """
[model]
name = "Heat"
parameters = { diffusivity = 0.1 }
grid = { shape = [100000, 100000, 100000], extent = 1.0 }
[initial_state]
field = "gaussian"
[time]
stop = 1.0
num_points = 3
"""
    path = isolated / "grid.toml"
    path.write_text(text, encoding="utf-8")
    code, line = _simlab(capsys, "run", str(path), "--check")
    assert code == 2 and "[model.grid.shape]" in line and "GiB" in line


def test_the_quick_table_is_checked_without_quick(isolated, capsys):
    (isolated / "data.csv").write_text(GOOD_CSV, encoding="utf-8")
    path = _experiment(isolated, text=CSV_TOML + "\n[quick]\ntime.num_points = 0\n")
    code, line = _simlab(capsys, "run", str(path), "--check")
    assert code == 2 and "[time.num_points]" in line and "with the [quick] table" in line


def test_an_unwritable_out_exits_2(isolated, capsys):
    (isolated / "data.csv").write_text(GOOD_CSV, encoding="utf-8")
    blocker = isolated / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    code, line = _simlab(
        capsys, "run", str(_experiment(isolated)), "--out", str(blocker / "run"), "--quiet"
    )
    assert code == 2 and "cannot write the results folder" in line


def _finished_run(folder: pathlib.Path, name="small", *, sweep=False) -> pathlib.Path:
    """A results folder as `simlab run` leaves it (its files, completion marker last)."""
    from simlab.experiment import _folder

    folder.mkdir(parents=True)
    _folder.write_text(folder / "config.toml", 'description = "x"\n[model]\nname = "Lorenz"\n')
    metrics = {"experiment": name, "description": "d", "wall_seconds": {"total": 1.0}}
    if sweep:
        metrics["sweep"] = {"mode": "grid", "num_members": 1, "ranges": {}, "summary": "",
                            "observables": {}}  # fmt: skip
    _folder.write_json(folder / "metrics.json", metrics)
    origin = {"created": "now", "devices": ["cpu"], "simlab_version": "0", "jax_version": "0"}
    _folder.write_json(folder / "provenance.json", origin)
    _folder.write_arrays(folder / "arrays.npz", {"ts": np.linspace(0.0, 1.0, 3)})
    _folder.mark_complete(folder)
    return folder


@pytest.mark.parametrize(
    ("damage", "file"),
    [
        ("metrics_empty", "metrics.json"),
        ("arrays_truncated", "arrays.npz"),
        ("config_empty", "config.toml"),
        ("sweep_missing", "sweep.zarr"),
        ("unfinished", "complete.json"),
    ],
)
def test_damaged_results_folders_exit_2_naming_the_file(isolated, capsys, damage, file):
    run = _finished_run(isolated / "results" / "small" / "1", sweep=damage == "sweep_missing")
    assert _simlab(capsys, "show", str(run))[0] == (0 if damage != "sweep_missing" else 2)
    if damage == "metrics_empty":
        (run / "metrics.json").write_text("{}", encoding="utf-8")
    elif damage == "arrays_truncated":
        (run / "arrays.npz").write_bytes((run / "arrays.npz").read_bytes()[:40])
    elif damage == "config_empty":
        (run / "config.toml").write_text("", encoding="utf-8")
    elif damage == "unfinished":
        (run / "complete.json").unlink()
    for command in ("show", "plot"):
        code, line = _simlab(capsys, command, str(run))
        assert code == 2 and file in line


def test_show_latest_finds_the_newest_run_and_text_is_stripped_of_escapes(isolated, capsys):
    import time

    _finished_run(isolated / "results" / "small" / "20260101-000000")
    time.sleep(0.05)
    newest = _finished_run(isolated / "results" / "other" / "20250101-000000", name="other")
    metrics = json.loads((newest / "metrics.json").read_text())
    metrics["description"] = "red \x1b[31malert\x1b[0m \x07bell"
    (newest / "metrics.json").write_text(json.dumps(metrics))
    from simlab import cli

    assert cli.main(["show", "latest"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("other: red [31malert[0m bell") and "\x1b" not in printed
    assert cli.main(["show", "small"]) == 0 and capsys.readouterr().out.startswith("small")


PARTIAL_WORKER = """
import sys, time
import pathlib
from simlab.experiment import _folder

staging = _folder.staging_folder(pathlib.Path(sys.argv[1]))
_folder.write_json(staging / "metrics.json", {"experiment": "x", "wall_seconds": {}})
_folder.write_json(staging / "provenance.json", {"created": "now", "devices": []})
print(staging, flush=True)
time.sleep(60)  # drawing figures...
"""


def test_a_run_killed_mid_way_is_never_shown_and_clean_removes_it(isolated, capsys):
    import signal
    import subprocess
    import sys

    def start(target):
        worker = subprocess.Popen(
            [sys.executable, "-c", PARTIAL_WORKER, str(target)],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            text=True,
        )
        return worker, pathlib.Path(worker.stdout.readline().strip())

    killed, killed_staging = start(isolated / "results" / "small" / "1")
    alive, alive_staging = start(isolated / "results" / "small" / "2")
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        code, line = _simlab(capsys, "show", str(killed_staging))
        assert code == 2 and "not a finished simlab run" in line
        user_file = isolated / "results" / "small" / "notes.txt"
        user_file.write_text("mine", encoding="utf-8")
        assert _simlab(capsys, "clean")[0] == 0
        assert not killed_staging.exists()
        assert alive_staging.exists() and user_file.exists()  # its process still runs
    finally:
        alive.kill()
        alive.wait(timeout=30)


def test_overwrite_moves_the_old_run_aside_with_the_users_files(isolated):
    from simlab.experiment import _folder

    target = _finished_run(isolated / "run")
    (target / "my-notes.txt").write_text("keep me", encoding="utf-8")
    staging = _folder.staging_folder(target)
    _finished_run(staging / "new")
    for path in (staging / "new").iterdir():
        path.rename(staging / path.name)
    previous = _folder.publish(staging, target)
    assert (previous / "my-notes.txt").read_text(encoding="utf-8") == "keep me"
    assert _folder.is_run(target) and not (target / "my-notes.txt").exists()


# --- 8. figures: the legend survives a plain savefig; bands say what they are ------------


def test_fit_curves_keeps_its_legend_and_its_prediction_band_covers_new_data(tmp_path):
    import io

    import jax.random as jr
    import matplotlib
    import matplotlib.pyplot as plt

    import simlab.plot
    from simlab.plot._fit import bands

    ts = jnp.linspace(0.0, 2.0, 41)
    clean = jnp.stack([jnp.exp(-0.7 * ts), 2.0 * jnp.exp(-1.3 * ts)], axis=1)
    sigma = 0.05
    noisy = clean + sigma * jr.normal(jr.key(1), clean.shape)
    result = simlab.fit(TwoDecays(a=0.5, b=0.5), ts, noisy, y0=Y0, params=["a", "b"])
    with matplotlib.rc_context(matplotlib.rcParamsDefault):  # a plain savefig, no "tight"
        ax = simlab.plot.fit_curves(result, ts, noisy)
        ax.figure.savefig(io.BytesIO(), format="png")
        renderer = ax.figure.canvas.get_renderer()
        legend = ax.get_legend().get_window_extent(renderer)
        figure_box = ax.figure.bbox
        assert figure_box.x0 <= legend.x0 and legend.x1 <= figure_box.x1
        assert figure_box.y0 <= legend.y0 and legend.y1 <= figure_box.y1
    texts = [text.get_text() for text in ax.get_legend().get_texts()]
    assert "95% confidence band of the mean" in texts
    assert "95% prediction band (new observations)" in texts
    plt.close(ax.figure)
    # New observations at the data's times: about 95% inside the prediction band, far
    # fewer inside the confidence band of the mean.
    prediction, confidence, spread = bands(result, ts)
    fresh = clean[None] + sigma * jr.normal(jr.key(2), (200, *clean.shape))
    inside = np.abs(np.asarray(fresh) - prediction) <= spread
    assert 0.93 < inside.mean() < 0.97
    assert (np.abs(np.asarray(fresh) - prediction) <= confidence).mean() < 0.6


def test_models_declare_state_units_and_datasets_their_time_unit():
    assert simlab.models.DampedPendulum.state_units == ("rad", "rad/s")
    assert simlab.models.LotkaVolterra.state_units == ("population", "population")
    assert simlab.datasets.lynx_hare().time_unit == "years"


# --- float32: default tolerances follow the precision of the state -----------------------

_FLOAT32_SOLVES = """
import json, sys, warnings
import jax
jax.config.update("jax_enable_x64", False)
import jax.numpy as jnp
sys.path.insert(0, sys.argv[1])
import simlab
import simlab.experiment
import simlab.plot
from stiff_problems import PROBLEMS
out = {}
robertson = simlab.simulate(
    simlab.models.Robertson(), jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 40.0]), throw=False
)
out["robertson"] = [bool(robertson.succeeded), robertson.ys[-1].tolist()]
for name in ("vdpol", "hires"):
    problem = PROBLEMS[name]
    solution = simlab.simulate(
        lambda t, y, args, p=problem: p.vector_field(t, y),
        jnp.asarray(problem.y0, jnp.float32),
        jnp.array([0.0, problem.t1], jnp.float32),
        solver="rodas5p",
        throw=False,
    )
    out[name] = [bool(solution.succeeded), problem.scd(solution.ys[-1])]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    simlab.simulate(
        simlab.models.Robertson(), jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 1.0]), rtol=1e-6
    )
out["warnings"] = [str(w.message) for w in caught]
print(json.dumps(out))
"""


def test_float32_defaults_solve_the_stiff_test_problems_and_too_tight_rtol_warns():
    """In float32 the defaults (rtol=1e-4, atol=1e-7) solve Robertson and the Test Set's
    van der Pol and HIRES; float64's rtol=1e-6 would run van der Pol into max_steps."""
    import subprocess
    import sys

    finished = subprocess.run(
        [sys.executable, "-c", _FLOAT32_SOLVES, str(HERE)],
        env={**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    out = json.loads(finished.stdout.strip().splitlines()[-1])
    succeeded, robertson = out["robertson"]
    # The widely tabulated Robertson values at t = 40, to the default rtol.
    assert succeeded
    np.testing.assert_allclose(robertson, [0.7158270687, 9.185534764e-06, 0.2841637457], rtol=1e-3)
    for name in ("vdpol", "hires"):
        succeeded, digits = out[name]
        assert succeeded and digits > 3.0, (name, digits)  # the Test Set's reference values
    (warning,) = [w for w in out["warnings"] if "machine epsilons" in w]
    assert "rtol=1e-06 is below 100 machine epsilons of the float32 state" in warning
    assert "Pass rtol>=0.0001" in warning


# --- figure units ---------------------------------------------------------------------------


def _lotka_volterra_trajectory():
    model = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.9, delta=0.03)
    return model, simlab.simulate(model, jnp.array([30.0, 4.0]), jnp.linspace(0.0, 5.0, 21))


def test_phase_portraits_and_trajectories_put_units_on_their_axes():
    model, trajectory = _lotka_volterra_trajectory()
    ax = simlab.plot.phase_portrait(trajectory, units=model.state_units)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("prey (population)", "predator (population)")
    ax = simlab.plot.phase_portrait(trajectory, units=("thousands", "thousands"), ylabel="lynx")
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("prey (thousands)", "lynx")
    assert simlab.plot.phase_portrait(trajectory).get_xlabel() == "prey"  # no units known
    data = simlab.datasets.lynx_hare()
    ax = simlab.plot.trajectory(
        trajectory, units=model.state_units, time_label=f"time ({data.time_unit})"
    )
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time (years)", "state (population)")
    mixed = simlab.plot.trajectory(trajectory, units=("hares", "lynxes"))
    assert mixed.get_ylabel() == "state"  # components in different units share no label
    one = simlab.plot.trajectory(trajectory, units=("hares", "lynxes"), components=["prey"])
    assert one.get_ylabel() == "state (hares)"
    with pytest.raises(ValueError, match="one string per state component"):
        simlab.plot.phase_portrait(trajectory, units=("thousands",))


@pytest.mark.parametrize(
    ("pad_fn", "returned"),
    [
        (lambda u, width: u, r"\(1, 16, 12\)"),  # not padded
        (lambda u, width: jnp.pad(u, [(0, 0), (1, 1), (1, 1)], mode="wrap"), r"\(1, 18, 14\)"),
    ],
    ids=["unpadded", "wrong_width"],
)
def test_heat_steps_names_the_shape_a_wrong_pad_fn_should_have_returned(pad_fn, returned):
    field = jnp.ones((16, 12))
    with pytest.raises(
        ValueError,
        match=r"heat_steps: pad_fn\(field, 4\) on a field of shape \(1, 16, 12\) must return "
        r"shape \(1, 24, 20\) \(4 ghost cells on each side of the two trailing axes\); it "
        f"returned shape {returned}",
    ):
        simlab.kernels.heat_steps(
            field, (0.1, 0.1), pad_fn=pad_fn, diffusivity=0.1, dt=1e-4, num_steps=8
        )


def test_navier_stokes_on_a_narrow_grid_says_which_forcing_mode_to_pass():
    grid = simlab.Grid((16, 6), extent=(2 * np.pi, 2 * np.pi))
    with pytest.raises(
        ValueError,
        match=r"forcing_mode must be an integer in \[1, 2\] on 6 cells along y .*; got 4 \(the "
        r"default\)\. The flow is unforced \(forcing_amplitude = 0\), so any mode in range "
        r"gives the same flow: pass forcing_mode=1",
    ):
        simlab.models.NavierStokes2D(grid=grid)
    forced = r"got 4 \(the default\)\. Pass forcing_mode=1 or 2, or use at least 9 cells along y"
    with pytest.raises(ValueError, match=forced):
        simlab.models.NavierStokes2D(grid=grid, forcing_amplitude=1.0, forcing_mode=4)
    model = simlab.models.NavierStokes2D(grid=grid, forcing_mode=1)  # as the message says
    trajectory = simlab.simulate(
        model, jnp.zeros((16, 6)), jnp.array([0.0, 0.1]), solver="etdrk4", adaptive=False
    )
    np.testing.assert_array_equal(trajectory.ys[-1], 0.0)
