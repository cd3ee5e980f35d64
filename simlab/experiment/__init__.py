"""Experiments: a whole study (data, fit, sweep, figures) in one TOML file, run into a
results folder that can be shown, redrawn and handed on.

The `simlab` command (`simlab.cli`) is a thin layer over `load`, `run`, `show` and `redraw`.
"""

import contextlib
import pathlib
import shutil
import time
from collections.abc import Sequence

import jax

from .._results import status_codes, status_message
from ._figures import (
    draw_all,
    load_branch as load_branch,
    load_sensitivity as load_sensitivity,
    load_sweep as load_sweep,
)
from ._folder import (
    ARRAYS,
    CONFIG,
    METRICS,
    PROVENANCE,
    SWEEP_STORE,
    StoredRun as StoredRun,
    check_target,
    clean_partials as clean_partials,
    default_folder,
    latest_run as latest_run,
    mark_complete,
    provenance,
    publish,
    read_run,
    record_run as record_run,
    staging_folder,
    to_toml,
    write_arrays,
    write_json,
    write_text,
)
from ._run import compute
from ._spec import (
    Experiment as Experiment,
    ExperimentError as ExperimentError,
    load as load,
    parse as parse,
)

__all__ = [
    "Experiment",
    "ExperimentError",
    "StoredRun",
    "load",
    "parse",
    "run",
    "show",
    "redraw",
    "shipped",
    "find",
    "simulation_failure",
    "load_sweep",
    "load_sensitivity",
    "load_branch",
]


def shipped_folder() -> pathlib.Path:
    """The `experiments/` folder next to the package (a source checkout)."""
    return pathlib.Path(__file__).resolve().parents[2] / "experiments"


def shipped() -> dict[str, pathlib.Path]:
    """The shipped experiments, name → file, in `./experiments` and simlab's own folder."""
    found: dict[str, pathlib.Path] = {}
    for folder in (shipped_folder(), pathlib.Path("experiments")):
        if folder.is_dir():
            found.update({path.stem: path for path in sorted(folder.glob("*.toml"))})
    return dict(sorted(found.items()))


def find(name_or_path: str | pathlib.Path) -> pathlib.Path:
    """An experiment file from a path, or the name of a shipped experiment (`lynx_hare`)."""
    path = pathlib.Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        return path
    experiments = shipped()
    if str(name_or_path) in experiments:
        return experiments[str(name_or_path)]
    raise ExperimentError(
        f"{name_or_path}: no such experiment file or shipped experiment; the shipped ones are "
        f"{list(experiments)} (see `simlab list`)."
    )


def run(
    experiment: Experiment,
    *,
    out: str | pathlib.Path | None = None,
    overwrite: bool = False,
    devices: Sequence[jax.Device] | None = None,
    quiet: bool = False,
    results_root: str | pathlib.Path = "results",
) -> pathlib.Path:
    """Runs a checked experiment and writes its results folder.

    The folder holds `config.toml` (the resolved experiment), `metrics.json` (fitted
    parameters ± standard errors, loss, sweep summary, wall times), `arrays.npz`, the sweep
    store `sweep.zarr`, `figures/` (PNG and SVG; GIF animations) and `provenance.json`
    (simlab, jax and Python versions, devices, git commit). It is built under a hidden
    temporary name and renamed when complete, so a crash never leaves a folder that looks
    finished.

    **Arguments:**

    - `experiment`: from [`simlab.experiment.load`][].
    - `out`: the results folder (default `results_root/<name>/<UTC timestamp>`, new each run).
    - `overwrite`: replace `out` if it holds another run (otherwise that is refused).
    - `devices`: the devices the sweep is sharded over (default: all).
    - `quiet`: print nothing.
    - `results_root`: where default folders go.

    **Returns:** the results folder. A failed main simulation does not stop the run: its
    status is recorded (`metrics.json`, `simulation.succeeded` and `simulation.status`),
    and [`simlab.experiment.simulation_failure`][] and `show` report it.

    !!! example

        ```python
        import simlab.experiment

        experiment = simlab.experiment.load("experiments/lynx_hare.toml")
        folder = simlab.experiment.run(experiment)
        print(simlab.experiment.show(folder))
        ```
    """
    target = (
        pathlib.Path(out)
        if out is not None
        else default_folder(pathlib.Path(results_root), experiment.name)
    )
    check_target(target, overwrite=overwrite)
    started = time.perf_counter()
    staging = staging_folder(target)
    try:
        if experiment.petab is not None:  # a PEtab problem: its fit and fitted curves
            from ._petab import compute_petab

            outcome = compute_petab(experiment, quiet=quiet)
        else:
            outcome = compute(
                experiment,
                sweep_store=staging / SWEEP_STORE if experiment.sweep is not None else None,
                devices=devices,
                quiet=quiet,
            )
        used = list(devices) if devices is not None else jax.devices()
        run_provenance = provenance(experiment.path, quick=experiment.quick, devices=used)
        write_text(staging / CONFIG, to_toml(experiment.config))
        write_arrays(staging / ARRAYS, outcome.arrays)
        write_json(staging / PROVENANCE, run_provenance)
        write_json(staging / METRICS, outcome.metrics)
        figures_started = time.perf_counter()
        draw_all(read_run(staging, finished=False))
        outcome.metrics["wall_seconds"]["figures"] = time.perf_counter() - figures_started
        outcome.metrics["wall_seconds"]["total"] = time.perf_counter() - started
        write_json(staging / METRICS, outcome.metrics)
        mark_complete(staging)
        previous = publish(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if not quiet:
        if previous is not None:
            print(f"the previous run in {target} was moved to {previous}")
        print(f"results written to {target}")
        print(f"figures: {target / 'figures'}")
    return target


def simulation_failure(folder: str | pathlib.Path) -> str | None:
    """How the run's main simulation failed, in words; `None` if it succeeded."""
    stored = read_run(folder)
    with _damage_named(stored.folder / METRICS):
        return _failure_text(stored.metrics)


_NOT_VALID = "its states, its event and the figures drawn from them are not valid"


def _failure_text(metrics: dict) -> str | None:
    simulation = metrics.get("simulation", {})
    if simulation.get("succeeded", True):
        return None
    status = simulation.get("status", "failed")
    code = status_codes().get(status)
    message = "" if code is None else f": {status_message(code).rstrip('.')}"
    return f"the main simulation failed ({status} after {simulation['num_steps']} steps{message})"


def redraw(folder: str | pathlib.Path) -> list[pathlib.Path]:
    """Redraws a run's figures from its stored arrays (nothing is recomputed).

    **Returns:** the files written into `folder/figures`.
    """
    stored = read_run(folder)
    with _damage_named(f"{stored.folder / METRICS} or {stored.folder / ARRAYS}"):
        return draw_all(stored)


def show(folder: str | pathlib.Path) -> str:
    """A readable summary of a results folder: fit, sweep, wall times, figures."""
    stored = read_run(folder)
    with _damage_named(stored.folder / METRICS):
        return _summary(stored)


@contextlib.contextmanager
def _damage_named(files: str | pathlib.Path):
    """Content of the wrong shape in a results folder's `files` (an edited or truncated
    table, a value of the wrong type) fails with the files named."""
    try:
        yield
    except ExperimentError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        raise ExperimentError(
            f"{files}: damaged ({type(error).__name__}: {error}); rerun the experiment."
        ) from None


def _summary(stored: StoredRun) -> str:
    metrics, origin = stored.metrics, stored.provenance
    failure = _failure_text(metrics)
    lines = [] if failure is None else [f"FAILED: {failure}; {_NOT_VALID}."]
    lines.append(f"{metrics['experiment']}: {metrics.get('description', '')}".rstrip(": "))
    lines.append(
        f"  run {origin['created']} · simlab {origin['simlab_version']} · jax "
        f"{origin['jax_version']} · {len(origin['devices'])} device(s)"
        + (f" · git {origin['git']['commit'][:10]}" if origin.get("git") else "")
        + (" · quick" if origin.get("quick") else "")
    )
    if "petab" in metrics:
        petab = metrics["petab"]
        value = petab["log_likelihood"]
        lines.append(
            f"  PEtab problem {petab['problem']}: {petab['num_measurements']} measurements in "
            f"{len(petab['conditions'])} condition(s), log-likelihood "
            + ("NaN" if value is None else f"{value:.6g}")
            + f" at the {petab['at']}"
        )
    if "fit" in metrics:
        lines.extend(_fit_lines(metrics["fit"], metrics.get("true_parameters", {})))
    event = metrics.get("simulation", {}).get("event")
    if event is not None:
        lines.append(_event_line(event, failed=failure is not None))
    if "sweep" in metrics:
        sweep = metrics["sweep"]
        ranges = ", ".join(
            f"{name} in [{low:.4g}, {high:.4g}]" for name, (low, high) in sweep["ranges"].items()
        )
        lines.append(f"  sweep ({sweep['mode']}, {sweep['num_members']} members): {ranges}")
        lines.append(f"    {sweep['summary']}")
        for name, summary in sweep["observables"].items():
            if summary["min"] is not None and not summary["shape"]:
                lines.append(f"    {name}: {summary['min']:.4g} … {summary['max']:.4g}")
        if "ensemble" in sweep:
            lines.extend(_ensemble_lines(sweep["ensemble"]))
    if "sensitivity" in metrics:
        lines.extend(_sensitivity_lines(metrics["sensitivity"]))
    if "continuation" in metrics:
        lines.extend(_continuation_lines(metrics["continuation"]))
    wall = metrics.get("wall_seconds", {})
    lines.append("  wall time: " + ", ".join(f"{k} {v:.1f} s" for k, v in wall.items()))
    figures = sorted(path.name for path in stored.figures_folder.glob("*.*"))
    lines.append(f"  figures in {stored.figures_folder}: {', '.join(figures) or 'none'}")
    return "\n".join(lines)


def _event_line(event: dict, *, failed: bool) -> str:
    if event["time"] is None:
        if failed:
            return "  event: not found before the simulation failed"
        return "  event: never happened in the time span"
    states = ", ".join(f"{name} = {value:.4g}" for name, value in event["state"].items())
    return f"  event at t = {event['time']:.6g}: {states}"


def _ensemble_lines(ensemble: dict) -> list[str]:
    """Each swept point's mean ± standard error over its paths, per scalar observable."""
    paths = ensemble["paths"]
    lines = [f"    ensemble: {paths} paths per point, seed {ensemble['seed']}"]
    points = ensemble["points"]
    labels = [
        ", ".join(f"{name} = {values[i]:.4g}" for name, values in points.items())
        for i in range(len(next(iter(points.values()), [])))
    ]
    for name, statistics in ensemble["statistics"].items():
        lines.append(f"    {name}, mean ± standard error over the paths:")
        for label, count, mean, error in zip(
            labels,
            statistics["count"],
            statistics["mean"],
            statistics["standard_error"],
            strict=True,
        ):
            value = "no finite value" if mean is None else f"{mean:.4g} ± {_error_text(error)}"
            lines.append(f"      {label}: {value} ({count} of {paths} paths)")
    return lines


def _error_text(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def _fit_lines(fit: dict, truth: dict) -> list[str]:
    state = "converged" if fit["converged"] else f"not converged ({fit['status']})"
    lines = [f"  fit: {state} after {fit['num_steps']} steps, loss {fit['loss']:.6g}"]
    initial = {f"{name} (t0)": entry for name, entry in fit.get("initial_state", {}).items()}
    width = max(len(name) for name in [*fit["parameters"], *initial])
    for name, entry in fit["parameters"].items():
        error = "unidentifiable" if entry["stderr"] is None else f"{entry['stderr']:.3g}"
        unit = f" {entry['unit']}" if entry["unit"] else ""
        if entry.get("scale", "lin") != "lin":  # a PEtab parameter on its scale
            unit += f" ({entry['scale']} scale)"
        known = f"   (true {truth[name]:.6g})" if name in truth else ""
        lines.append(f"    {name:<{width}} = {entry['value']:.6g} ± {error}{unit}{known}")
    for name, entry in initial.items():
        error = "-" if entry["stderr"] is None else f"{entry['stderr']:.3g}"
        lines.append(f"    {name:<{width}} = {entry['value']:.6g} ± {error}")
    return lines


def _sensitivity_lines(record: dict) -> list[str]:
    ranges = ", ".join(
        f"{name} in [{low:.4g}, {high:.4g}]" for name, (low, high) in record["ranges"].items()
    )
    lines = [f"  sensitivity ({record['method']}, {record['num_members']} runs): {ranges}"]
    width = max(len(name) for name in record["parameters"])
    for output, rows in record["indices"].items():
        lines.append(f"    {output}:")
        for name, measures in rows.items():
            shown = ", ".join(
                f"{measure} {'-' if value is None else f'{value:.3f}'}"
                for measure, value in measures.items()
                if not measure.endswith("_conf")
            )
            lines.append(f"      {name:<{width}}  {shown}")
    return lines


def _continuation_lines(record: dict) -> list[str]:
    found = ", ".join(f"{p['kind']} at {p['value']:.6g}" for p in record["bifurcations"])
    failed = f", {record['num_failed']} failed" if record["num_failed"] else ""
    return [
        f"  continuation over {record['parameter']} ({record['num_points']} points{failed}): "
        + (found or "no fold or Hopf point")
    ]
