"""Results folders: written under a temporary name and renamed, so a crash never leaves a
folder that looks complete; read back by parsing only (JSON, TOML, `np.load` without pickle).
"""

import dataclasses
import datetime
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib
import uuid
import zipfile
from typing import Any

import numpy as np

from .._provenance import provenance as simlab_provenance
from ..io import atomic_write
from ._check import ExperimentError

CONFIG = "config.toml"
METRICS = "metrics.json"
PROVENANCE = "provenance.json"
ARRAYS = "arrays.npz"
SWEEP_STORE = "sweep.zarr"
FIGURES = "figures"
COMPLETE = "complete.json"  # written last: a folder without it is unfinished
OWNER = ".simlab-owner"  # the process id building a staging folder
STAGING_DIGITS = 8
STAGING_NAME = re.compile(rf"\..+\.partial-[0-9a-f]{{{STAGING_DIGITS}}}")
RUN_MARKERS = (METRICS, PROVENANCE, COMPLETE)
RUN_RECORD = ".simlab-runs"  # in a results root: the runs written elsewhere, a JSON line each
# A profiled parameter NAME is stored as arrays `profile_NAME_<field>` for these fields of
# its `simlab.Profile` (its interval goes to metrics.json, fit.profiles.NAME).
PROFILE_ARRAYS = ("values", "nll", "converged")


def is_run(folder: pathlib.Path) -> bool:
    """Whether `folder` holds a finished simlab run (its completion marker is written last)."""
    return all((folder / name).is_file() for name in RUN_MARKERS)


def mark_complete(folder: pathlib.Path) -> None:
    """Writes the completion marker: the last file of a run."""
    write_json(
        folder / COMPLETE, {"complete": True, "files": sorted(p.name for p in folder.iterdir())}
    )


def default_folder(results_root: pathlib.Path, name: str) -> pathlib.Path:
    """`results_root/<name>/<UTC timestamp>`, with a suffix if that folder exists already."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    folder = results_root / name / stamp
    suffix = 2
    while folder.exists():
        folder = results_root / name / f"{stamp}-{suffix}"
        suffix += 1
    return folder


def check_target(folder: pathlib.Path, *, overwrite: bool) -> None:
    """Refuses a target that holds something we must not replace; called before any work."""
    if not folder.exists():
        return
    if not folder.is_dir():
        raise ExperimentError(f"{folder}: exists and is not a folder; choose another --out.")
    if is_run(folder):
        if not overwrite:
            raise ExperimentError(
                f"{folder}: already holds another run; pass --overwrite (overwrite=True) to "
                "replace it, or choose another --out."
            )
        return
    if any(folder.iterdir()):
        raise ExperimentError(
            f"{folder}: exists, is not empty and is not a simlab run, so it is never "
            "replaced; choose another --out."
        )


def staging_folder(target: pathlib.Path) -> pathlib.Path:
    """A fresh hidden folder next to `target` (same file system, so renaming is atomic),
    holding the id of the process that builds it (see `clean_partials`)."""
    staging = target.parent / f".{target.name}.partial-{uuid.uuid4().hex[:STAGING_DIGITS]}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir()
        (staging / OWNER).write_text(str(os.getpid()), encoding="utf-8")
    except OSError as error:
        raise ExperimentError(
            f"{target}: cannot write the results folder there ({error.strerror or error}); "
            "pass --out a folder you can write to."
        ) from None
    return staging


def publish(staging: pathlib.Path, target: pathlib.Path) -> pathlib.Path | None:
    """Moves the finished `staging` folder to `target`. An old run there is moved aside,
    whole (with any files added to it), to `target.previous-<timestamp>`, never deleted;
    returns where it went (None if there was none)."""
    (staging / OWNER).unlink(missing_ok=True)
    if not target.exists():
        os.rename(staging, target)
        return None
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    retired = target.parent / f"{target.name}.previous-{stamp}"
    suffix = 2
    while retired.exists():
        retired = target.parent / f"{target.name}.previous-{stamp}-{suffix}"
        suffix += 1
    os.rename(target, retired)
    os.rename(staging, target)
    return retired


def clean_partials(root: pathlib.Path) -> tuple[list[pathlib.Path], list[str]]:
    """Removes the unfinished run folders under `root` whose process is gone.

    Only a folder simlab made is removed: a real folder (never a link) named
    `.NAME.partial-XXXXXXXX` that holds the owner marker naming the process that built it.
    A folder whose process still runs is kept.

    **Returns:** the folders removed, and a line for each that could not be removed.
    """
    if not root.is_dir():
        problem = "not a folder" if root.exists() else "no such folder"
        raise ExperimentError(
            f"{root}: {problem}; pass the results folder to clean (simlab clean RESULTS, "
            "default results)."
        )
    removed, failed = [], []
    for folder in sorted(root.rglob(".*.partial-*")):
        if not _abandoned_staging(folder):
            continue
        try:
            shutil.rmtree(folder)
        except OSError as error:
            failed.append(f"{folder} ({error.strerror or error})")
        else:
            removed.append(folder)
    return removed, failed


def _abandoned_staging(folder: pathlib.Path) -> bool:
    """Whether `folder` is a staging folder simlab made, whose process is gone."""
    marker = folder / OWNER
    made_by_simlab = (
        STAGING_NAME.fullmatch(folder.name)
        and not folder.is_symlink()
        and folder.is_dir()
        and not marker.is_symlink()
        and marker.is_file()
    )
    if not made_by_simlab:
        return False
    try:
        os.kill(int(marker.read_text(encoding="utf-8")), 0)  # signal 0: does it exist?
    except ProcessLookupError:  # no such process: the run was killed
        return True
    except (OSError, ValueError, OverflowError):  # another user's process, or no process id
        return False
    return False


def latest_run(root: pathlib.Path, name: str | None = None) -> pathlib.Path:
    """The newest finished run under `root` or recorded there by `record_run` (of
    experiment `name`, if given)."""
    folders = [*root.glob(f"{name}/*" if name else "*/*"), *_recorded_runs(root, name)]
    runs = [f for f in folders if f.is_dir() and not f.name.startswith(".") and is_run(f)]
    if not runs:
        where = f"{root / name}" if name else str(root)
        raise ExperimentError(
            f"{where}: holds no finished run; run one with `simlab run`, or pass a results folder."
        )
    return max(runs, key=lambda f: ((f / COMPLETE).stat().st_mtime, f.name))


def record_run(root: pathlib.Path, folder: pathlib.Path, name: str) -> None:
    """Notes in `root` a run of experiment `name` written to `folder` (wherever that is),
    so that `latest_run(root)` finds it."""
    root.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"experiment": name, "folder": str(folder.resolve())}) + "\n"
    with (root / RUN_RECORD).open("a", encoding="utf-8") as record:
        record.write(line)  # one short append: whole, even when two runs finish together


def _recorded_runs(root: pathlib.Path, name: str | None) -> list[pathlib.Path]:
    try:
        lines = (root / RUN_RECORD).read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError):
        return []
    folders = []
    for line in lines:
        try:
            entry = json.loads(line)
            experiment, folder = entry["experiment"], pathlib.Path(entry["folder"])
        except (ValueError, KeyError, TypeError):  # a damaged line names no run
            continue
        if name is None or experiment == name:
            folders.append(folder)
    return folders


def write_json(path: pathlib.Path, content: Any) -> None:
    write_text(path, json.dumps(content, indent=2, allow_nan=False) + "\n")


def write_text(path: pathlib.Path, text: str) -> None:
    atomic_write(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))


def write_arrays(path: pathlib.Path, arrays: dict[str, np.ndarray]) -> None:
    arrays = {name: np.asarray(value) for name, value in arrays.items()}
    atomic_write(path, lambda temporary: np.savez(temporary, **arrays))


def to_toml(table: dict[str, Any]) -> str:
    """TOML text for a table of tables, arrays of tables, strings, numbers and booleans."""
    lines: list[str] = []
    _emit(table, (), lines)
    return "\n".join(lines).strip() + "\n"


def _emit(table: dict, prefix: tuple[str, ...], lines: list[str]) -> None:
    scalars = {k: v for k, v in table.items() if not _is_table(v) and not _is_table_array(v)}
    for key, value in scalars.items():
        lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in table.items():
        path = (*prefix, key)
        if _is_table(value):
            lines.extend(["", f"[{'.'.join(map(_key, path))}]"])
            _emit(value, path, lines)
        elif _is_table_array(value):
            for entry in value:
                lines.extend(["", f"[[{'.'.join(map(_key, path))}]]"])
                _emit(entry, path, lines)


def _is_table(value) -> bool:
    return isinstance(value, dict)


def _is_table_array(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _key(key: str) -> str:
    bare = key.replace("_", "").replace("-", "").isalnum() and key.isascii()
    return key if bare else json.dumps(key)


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def provenance(experiment_path: pathlib.Path, *, quick: bool, devices) -> dict[str, Any]:
    """Versions, devices, the git commit of the experiment's repository, the command line."""
    return simlab_provenance(
        devices,
        git=_git_state(experiment_path.resolve().parent),
        experiment_file=str(experiment_path),
        quick=quick,
        command=sys.argv,
    )


def _git_state(folder: pathlib.Path) -> dict[str, Any] | None:
    def git(*arguments):
        return subprocess.run(
            ["git", "-C", str(folder), *arguments], capture_output=True, text=True, timeout=10
        )

    try:
        commit = git("rev-parse", "HEAD")
        if commit.returncode != 0:
            return None
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(changed.stdout.strip())}


@dataclasses.dataclass(frozen=True)
class StoredRun:
    """A results folder read back: `config`, `metrics`, `provenance`, `arrays`, `folder`."""

    folder: pathlib.Path
    config: dict[str, Any]
    metrics: dict[str, Any]
    provenance: dict[str, Any]
    arrays: dict[str, np.ndarray]

    @property
    def sweep_store(self) -> pathlib.Path:
        return self.folder / SWEEP_STORE

    @property
    def figures_folder(self) -> pathlib.Path:
        return self.folder / FIGURES


def inside_run(folder: pathlib.Path, path: pathlib.Path) -> pathlib.Path:
    """`path`, once sure that it resolves (links followed) to a place inside the results
    folder `folder`: what simlab writes into a run never lands outside it."""
    resolved = path.resolve()
    if not resolved.is_relative_to(folder.resolve()):
        raise ExperimentError(
            f"{path}: a link there leads outside the results folder {folder} (to {resolved}), "
            "and simlab writes only inside it; remove the link, then try again."
        )
    return path


def read_run(folder: str | pathlib.Path, *, finished: bool = True) -> StoredRun:
    """Reads a results folder (parsing only); `ExperimentError` if it is not a finished run
    (`finished=False`: a run still being built, whose completion marker is not yet written)."""
    folder = pathlib.Path(folder)
    if not folder.is_dir():
        raise ExperimentError(
            f"{folder}: no such results folder; pass a folder `simlab run` wrote."
        )
    if finished:
        _check_finished(folder)
    readers = {
        CONFIG: lambda path: tomllib.loads(path.read_text(encoding="utf-8")),
        METRICS: _read_json,
        PROVENANCE: _read_json,
        ARRAYS: lambda path: StoredRecord(_read_arrays(path), path),
    }
    contents = {}
    for name, reader in readers.items():
        try:
            contents[name] = reader(folder / name)
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as error:
            raise ExperimentError(
                f"{folder / name}: damaged or missing ({type(error).__name__}); rerun the "
                "experiment."
            ) from None
    required = {
        CONFIG: ("model",),
        METRICS: ("experiment", "wall_seconds"),
        PROVENANCE: ("created", "devices"),
    }
    for name, keys in required.items():
        missing = [
            key for key in keys if not isinstance(contents[name], dict) or key not in contents[name]
        ]
        if missing:
            raise ExperimentError(
                f"{folder / name}: damaged (no {missing[0]!r}); rerun the experiment."
            )
    stored_run = StoredRun(
        folder, contents[CONFIG], contents[METRICS], contents[PROVENANCE], contents[ARRAYS]
    )
    _check_analysis_arrays(stored_run)
    if "sweep" in stored_run.metrics and not (stored_run.sweep_store / "zarr.json").is_file():
        raise ExperimentError(
            f"{stored_run.sweep_store}: missing or damaged, though the run has a sweep; rerun "
            "the experiment."
        )
    return stored_run


def _check_finished(folder: pathlib.Path) -> None:
    """A finished run has its completion marker and every file written before it."""
    if not (folder / COMPLETE).is_file():
        raise ExperimentError(
            f"{folder}: not a finished simlab run (no {COMPLETE}: unfinished, interrupted or "
            "not a run; `simlab clean` removes unfinished runs); pass a "
            "folder such as results/<experiment>/<timestamp>."
        )
    for name in (METRICS, PROVENANCE):
        if not (folder / name).is_file():
            raise ExperimentError(
                f"{folder / name}: missing, though {COMPLETE} is there (removed after the run "
                "finished); rerun the experiment."
            )


CONTINUATION_ARRAYS = tuple(
    f"continuation_{name}"
    for name in (
        "values",
        "states",
        "eigenvalues",
        "stability",
        "result",
        "oscillation_min",
        "oscillation_max",
    )
)


def _check_analysis_arrays(run: StoredRun) -> None:
    """The arrays a run's sensitivity indices and branch are redrawn from are all there."""
    needed = []
    if "sensitivity" in run.metrics:
        variables = run.metrics["sensitivity"].get("variables", {})
        needed += [f"sensitivity_{name}" for name in variables] or ["sensitivity_samples"]
    if "continuation" in run.metrics:
        needed += CONTINUATION_ARRAYS
    missing = [name for name in needed if name not in run.arrays]
    if missing:
        raise ExperimentError(
            f"{run.folder / ARRAYS}: damaged (no {missing[0]!r}, though the run's metrics "
            "refer to it); rerun the experiment."
        )


class StoredRecord(dict):
    """A table read from a results file: a key it lacks is reported with the file named (a
    damaged run), not as a bare `KeyError` from deep inside a figure."""

    def __init__(self, content: dict, path: pathlib.Path):
        super().__init__(content)
        self.path = path

    def __missing__(self, key):
        raise ExperimentError(f"{self.path}: damaged (no {key!r}); rerun the experiment.")


def _read_json(path: pathlib.Path) -> Any:
    return json.loads(
        path.read_text(encoding="utf-8"), object_hook=lambda table: StoredRecord(table, path)
    )


def _read_arrays(path: pathlib.Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as stored:
        return {name: stored[name] for name in stored.files}
