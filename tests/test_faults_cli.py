"""The `simlab` command and its files under hostile or damaged conditions: links that lead
out of a results folder, folders simlab never made, device counts no machine has, names
too long for a file, damaged results named by file, byte-order marks, runs written with
`--out`, and a compilation cache that cannot be used.

Real files and real processes, damaged the way a careless edit, a crash or a full disk
would damage them.
"""

import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest
from helpers import SMALL_TOML

import simlab.experiment
from simlab import cli

ROOT = pathlib.Path(__file__).parent.parent


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> pathlib.Path:
    """One real run of SMALL_TOML (a simulation, a two-member sweep, two figures); tests
    damage copies of it."""
    folder = tmp_path_factory.mktemp("finished")
    path = folder / "small.toml"
    path.write_text(SMALL_TOML, encoding="utf-8")
    experiment = simlab.experiment.load(path)
    return simlab.experiment.run(experiment, out=folder / "run", quiet=True)


def _copy(run: pathlib.Path, to: pathlib.Path) -> pathlib.Path:
    to.parent.mkdir(parents=True, exist_ok=True)
    return pathlib.Path(shutil.copytree(run, to))


def _simlab(capsys, *arguments) -> tuple[int, str]:
    """The exit code and the error line (or, on success, what was printed)."""
    code = cli.main(list(arguments))
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    if code == 2:
        assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return code, lines[0] if lines else captured.out


def _experiment(folder: pathlib.Path, text: str = SMALL_TOML, name="small") -> pathlib.Path:
    path = folder / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


# --- plot writes only inside the results folder -------------------------------------------


@pytest.mark.parametrize("link", ["figures folder", "figure file"])
def test_plot_refuses_a_link_that_leads_out_of_the_results_folder(finished, isolated, capsys, link):
    run = _copy(finished, isolated / "run")
    elsewhere = isolated / "thesis"
    elsewhere.mkdir()
    precious = elsewhere / "phase_portrait.svg"
    precious.write_text("chapter 1", encoding="utf-8")
    if link == "figures folder":
        shutil.rmtree(run / "figures")
        (run / "figures").symlink_to(elsewhere, target_is_directory=True)
        named = run / "figures"
    else:
        named = run / "figures" / "phase_portrait.svg"
        named.unlink()
        named.symlink_to(precious)

    code, line = _simlab(capsys, "plot", str(run))
    assert code == 2 and f"{named}: a link there leads outside the results folder" in line
    assert named.is_symlink()  # left as it was
    assert sorted(p.name for p in elsewhere.iterdir()) == ["phase_portrait.svg"]
    assert precious.read_text(encoding="utf-8") == "chapter 1"


def test_plot_follows_links_that_stay_inside_the_results_folder(finished, isolated, capsys):
    run = _copy(finished, isolated / "run")
    (run / "figures").rename(run / "drawn")
    (run / "figures").symlink_to("drawn", target_is_directory=True)
    assert _simlab(capsys, "plot", str(run))[0] == 0
    assert len(list((run / "drawn").glob("*.png"))) == 2


# --- clean removes only what simlab made, and says what it removed ------------------------


def _dead_process_id() -> int:
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait(timeout=60)
    return child.pid


def _staging(folder: pathlib.Path, owner: int | None) -> pathlib.Path:
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text("{}", encoding="utf-8")
    if owner is not None:
        (folder / ".simlab-owner").write_text(str(owner), encoding="utf-8")
    return folder


def test_clean_removes_only_folders_simlab_made_and_reports_the_truth(isolated, capsys):
    dead = _dead_process_id()
    results = isolated / "results"
    thesis = results / ".thesis.partial-2024"
    thesis.mkdir(parents=True)
    (thesis / "chapter1.tex").write_text("\\chapter{One}", encoding="utf-8")
    unmarked = _staging(results / "small" / ".1.partial-0123abcd", owner=None)
    abandoned = _staging(results / "small" / ".2.partial-89abcdef", owner=dead)
    outside = _staging(isolated / "elsewhere", owner=dead)
    link = results / "small" / ".3.partial-deadbeef"
    link.symlink_to(outside, target_is_directory=True)

    code, printed = _simlab(capsys, "clean")
    assert code == 0
    assert printed.splitlines() == [
        f"removed {pathlib.Path('results') / 'small' / abandoned.name}",
        "1 unfinished run folder(s) removed from results.",
    ]
    assert not abandoned.exists()
    assert (thesis / "chapter1.tex").read_text(encoding="utf-8") == "\\chapter{One}"
    assert (unmarked / "metrics.json").exists()
    assert link.is_symlink() and (outside / ".simlab-owner").exists()


@pytest.mark.parametrize("kind", ["no such folder", "not a folder"])
def test_clean_refuses_a_root_that_is_not_a_folder(isolated, capsys, kind):
    root = isolated / "results"
    if kind == "not a folder":
        root.write_text("not a folder", encoding="utf-8")
    code, line = _simlab(capsys, "clean", str(root))
    assert code == 2
    assert line == (
        f"simlab: error: {root}: {kind}; pass the results folder to clean "
        "(simlab clean RESULTS, default results)."
    )
    assert root.is_file() == (kind == "not a folder")


# --- device counts: --check starts none, an impossible count is refused -------------------


def test_a_device_count_no_machine_has_is_refused_in_one_line(isolated, capsys):
    path = _experiment(isolated)
    for arguments in (["--check"], []):
        with pytest.raises(SystemExit) as caught:
            cli.main(["run", str(path), *arguments, "--devices", "100000"])
        assert caught.value.code == 2
        error = capsys.readouterr().err.strip()
        assert len(error.splitlines()) == 1
        assert "--devices: must be at most 1024; got '100000'" in error


CHECK_WORKER = """
import sys
import jax
from simlab import cli

code = cli.main(["run", sys.argv[1], "--check", "--devices", "3"])
print(code, jax.default_backend(), jax.device_count())
"""


def test_check_starts_only_the_cpu_and_no_simulated_devices(tmp_path):
    """A fresh process, as the command is: JAX's devices are fixed once it starts."""
    path = _experiment(tmp_path)
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES", "XLA_FLAGS")
    }
    finished = subprocess.run(
        [sys.executable, "-c", CHECK_WORKER, str(path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**environment, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.splitlines() == [f"{path}: valid.", "0 cpu 1"]


# --- what would fail after the fit is refused at --check; damage is named by file ---------


def test_check_refuses_a_figure_name_too_long_for_a_file(isolated, capsys):
    portrait = 'kind = "phase_portrait"'
    for length, expected in ((100, 0), (300, 2)):
        text = SMALL_TOML.replace(portrait, f'{portrait}\nname = "{"p" * length}"')
        code, line = _simlab(capsys, "run", str(_experiment(isolated, text)), "--check")
        assert code == expected
    assert "[figures[1].name] is 300 characters long" in line and "100 characters" in line


def _edit_metrics(run: pathlib.Path, edit) -> None:
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    edit(metrics)
    (run / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")


def _truncate_chunk(run: pathlib.Path) -> None:
    chunk = run / "sweep.zarr" / "final_angle" / "c" / "0"
    chunk.write_bytes(chunk.read_bytes()[:5])


def _drop_array(run: pathlib.Path) -> None:
    with np.load(run / "arrays.npz") as stored:
        arrays = {name: stored[name] for name in stored.files if name != "simulation_ys"}
    np.savez(run / "arrays.npz", **arrays)


def _swap_chunks(run: pathlib.Path) -> None:
    """Two observables' chunk files exchanged: each still a valid chunk of the same shape."""
    first, second = (run / "sweep.zarr" / name / "c" / "0" for name in SWEEP_OBSERVABLES)
    first_bytes, second_bytes = first.read_bytes(), second.read_bytes()
    assert first_bytes != second_bytes
    first.write_bytes(second_bytes)
    second.write_bytes(first_bytes)


SWEEP_OBSERVABLES = ("final_angle", "final_angular_velocity")

DAMAGES = {
    "metrics.json: a table of the wrong type": (
        lambda run: _edit_metrics(run, lambda m: m.update(wall_seconds=[1.0])),
        "show",
        "metrics.json: damaged (AttributeError",
    ),
    "metrics.json: a table missing": (
        lambda run: _edit_metrics(run, lambda m: m.pop("sweep")),
        "plot",
        "metrics.json: damaged (no 'sweep')",
    ),
    "metrics.json: a value of the wrong type": (
        lambda run: _edit_metrics(run, lambda m: m["sweep"].update(names=3)),
        "plot",
        "metrics.json or ",
    ),
    "sweep.zarr: a truncated chunk": (
        _truncate_chunk,
        "plot",
        "sweep.zarr: damaged: {run}/sweep.zarr/final_angle/c/0 is unreadable",
    ),
    "sweep.zarr: two chunks swapped": (
        _swap_chunks,
        "plot",
        "sweep.zarr: damaged: {run}/sweep.zarr/final_angle/c/0 does not match its checksum; "
        "{run}/sweep.zarr/final_angular_velocity/c/0 does not match its checksum",
    ),
    "metrics.json: missing": (
        lambda run: (run / "metrics.json").unlink(),
        "show",
        "metrics.json: missing, though complete.json is there",
    ),
    "provenance.json: missing": (
        lambda run: (run / "provenance.json").unlink(),
        "plot",
        "provenance.json: missing, though complete.json is there",
    ),
    "arrays.npz: a key missing": (_drop_array, "plot", "arrays.npz: damaged (no 'simulation_ys')"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_results_exit_2_naming_the_file(finished, isolated, capsys, damage):
    run = _copy(finished, isolated / "run")
    damaging, command, message = DAMAGES[damage]
    damaging(run)
    code, line = _simlab(capsys, command, str(run))
    assert code == 2 and line.startswith(f"simlab: error: {run}")
    assert message.format(run=run) in line


# --- a CSV file with a byte-order mark ----------------------------------------------------

CSV_TOML = """
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
csv = "data.csv"

[fit]
parameters = ["alpha"]
"""


@pytest.mark.parametrize("first_line", ["t,prey,predator", "# pelts\nt,prey,predator"])
def test_a_csv_file_with_a_byte_order_mark_is_read(isolated, capsys, first_line):
    """Spreadsheet programs save UTF-8 with a byte-order mark before the header."""
    csv = f"{first_line}\n0,30,4\n1,40,5\n2,50,7\n"
    (isolated / "data.csv").write_bytes(b"\xef\xbb\xbf" + csv.encode("utf-8"))
    path = _experiment(isolated, CSV_TOML, name="fit")
    assert _simlab(capsys, "run", str(path), "--check")[0] == 0
    data = simlab.experiment.load(path).data
    np.testing.assert_array_equal(data.ts, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(data.observations, [[30, 4], [40, 5], [50, 7]])


# --- show latest finds runs written with --out --------------------------------------------


def test_show_latest_finds_a_run_written_with_out(finished, isolated, capsys):
    _copy(finished, isolated / "results" / "small" / "20200101-000000")
    path = _experiment(isolated)
    assert _simlab(capsys, "run", str(path), "--out", "elsewhere/run", "--quiet")[0] == 0
    written = (isolated / "elsewhere" / "run").resolve()
    for name in ("latest", "small"):
        code, printed = _simlab(capsys, "show", name)
        assert code == 0 and f"figures in {written / 'figures'}" in printed
    # Gone again, it is not shown: the newest run left is.
    shutil.rmtree(written)
    code, printed = _simlab(capsys, "show", "latest")
    assert code == 0 and "figures in results/small/20200101-000000/figures" in printed


# --- the compilation cache's problems in one line; --quiet prints none --------------------


def test_an_unwritable_cache_is_named_in_one_line(isolated, capsys, monkeypatch):
    import jax

    (isolated / "a-file").write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv(cli.CACHE_ENVIRONMENT, str(isolated / "a-file" / "cache"))
    cli.configure_jax(None)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "cannot be written" in lines[0] and "SIMLAB_CACHE_DIR" in lines[0]
    assert "a-file" not in str(jax.config.jax_compilation_cache_dir)  # compiled without it
    assert cli.configure_jax(None, quiet=True) is None
    assert capsys.readouterr().err == ""


def _jax_cache_warning(module: str) -> None:
    """The warning JAX gives for each cache entry it cannot read."""
    warnings.warn(
        f"Error reading persistent compilation cache entry for '{module}': error: Error -3 "
        "while decompressing data: incorrect header check",
        UserWarning,
        stacklevel=1,
    )


@pytest.mark.parametrize("quiet", [False, True])
def test_cache_warnings_become_one_line_and_others_pass(isolated, capsys, quiet):
    with cli._cache_problems_in_one_line(isolated / "cache", quiet=quiet):
        for module in ("jit_stage", "jit_where", "jit_solve"):
            _jax_cache_warning(module)
        with pytest.warns(RuntimeWarning, match="a warning of its own"):
            warnings.warn("a warning of its own", RuntimeWarning, stacklevel=1)
    lines = capsys.readouterr().err.splitlines()
    if quiet:
        assert lines == []
    else:
        assert len(lines) == 1 and lines[0].startswith("simlab: warning: cannot use entries")
        assert "incorrect header check" in lines[0] and "SIMLAB_CACHE_DIR" in lines[0]


POPULATE_CACHE = """
import sys
from simlab import cli
import simlab.experiment

cli.configure_jax(None)
simlab.experiment.load(sys.argv[1])  # compiles the conversions that make the model
"""

TINY_TOML = """
[model]
name = "DampedPendulum"
parameters = { length = 1.0, damping = 0.5 }

[initial_state]
angle = 0.0
angular_velocity = 3.0

[time]
stop = 1.0
num_points = 3
"""


def test_a_damaged_cache_is_named_in_one_line(tmp_path):
    """Real processes: one fills the cache, its entries are damaged, the command reads them."""
    path = _experiment(tmp_path, TINY_TOML, name="tiny")
    cache = tmp_path / "cache"
    environment = {**os.environ, "PYTHONPATH": str(ROOT), cli.CACHE_ENVIRONMENT: str(cache)}

    def run(*arguments):
        return subprocess.run(
            [sys.executable, *arguments], capture_output=True, text=True, cwd=tmp_path,
            timeout=300, env=environment,
        )  # fmt: skip

    populated = run("-c", POPULATE_CACHE, str(path))
    assert populated.returncode == 0, populated.stderr
    entries = list(cache.glob("*-cache"))
    assert entries
    for entry in entries:
        entry.write_bytes(b"damaged on disk")
    finished = run("-m", "simlab.cli", "run", str(path), "--out", "run")
    assert finished.returncode == 0, finished.stderr
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1, finished.stderr
    assert lines[0].startswith("simlab: warning: cannot use entries of the compilation cache")
    assert str(cache) in lines[0] and "SIMLAB_CACHE_DIR" in lines[0]


def test_a_quiet_run_silences_arviz(monkeypatch):
    """ArviZ logs that three draws are too few for its diagnostics; a quiet run prints no
    such line, and no Python warning raised meanwhile either."""
    import logging

    import arviz

    from simlab.experiment._run import arviz_silenced

    printed = io.StringIO()
    # ArviZ's own logger, outside logging's tree: its handler is where its lines go.
    monkeypatch.setattr(arviz._log, "handlers", [logging.StreamHandler(printed)])
    draws = arviz.from_dict(posterior={"alpha": np.linspace(0.4, 0.6, 3)[None]})
    for quiet in (False, True):
        printed.seek(0)
        printed.truncate()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with arviz_silenced(quiet):
                table = arviz.summary(draws, round_to="none")
                warnings.warn("ArviZ is undergoing a major refactor", FutureWarning, stacklevel=1)
        assert table.loc["alpha", "mean"] == pytest.approx(0.5)
        assert ("Shape validation failed" in printed.getvalue()) is not quiet
        assert (len(caught) == 0) is quiet
