"""The figures of a run, drawn from its stored files only, so `simlab plot` never recomputes."""

import os
import pathlib
import uuid

import numpy as np

from .._results import RESULTS, Trajectory
from .._sweep import SweepResult
from ._folder import StoredRun
from ._spec import model_classes

VECTOR_FORMAT = "svg"


def draw_all(run: StoredRun, folder: pathlib.Path | None = None) -> list[pathlib.Path]:
    """Draws every figure the run's config asks for into `folder` (default: its figures/).

    Each figure is written as PNG and SVG (animations as GIF), each file atomically.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only: never open a window, even when a display exists
    import matplotlib.pyplot as plt

    folder = run.figures_folder if folder is None else folder
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for entry in run.config.get("figures", []):
        kind, name = entry["kind"], entry.get("name", entry["kind"])
        if kind == "animation":
            written.append(_animation(run, entry, folder / f"{name}.gif"))
            continue
        figure = DRAWERS[kind](run, entry)
        if "title" in entry:
            figure.suptitle(entry["title"])
        for suffix in ("png", VECTOR_FORMAT):
            written.append(_save(figure, folder / f"{name}.{suffix}"))
        plt.close(figure)
    return written


def _save(figure, path: pathlib.Path) -> pathlib.Path:
    from simlab.plot import style

    temporary = path.with_name(f".{path.stem}.tmp-{uuid.uuid4().hex[:8]}{path.suffix}")
    with style():  # its savefig settings: tight bounding box, print resolution
        figure.savefig(temporary)
    os.replace(temporary, path)
    return path


def _model_class(run: StoredRun):
    return model_classes()[run.config["model"]["name"]]


def _state_names(run: StoredRun) -> tuple[str, ...]:
    return tuple(getattr(_model_class(run), "state_names", ()))


def _trajectory(run: StoredRun, ys_name: str = "simulation_ys") -> Trajectory:
    """A stored curve as a `Trajectory`, so the plot functions take what `simulate` returns."""
    return Trajectory(
        ts=run.arrays["simulation_ts"],
        ys=run.arrays[ys_name],
        result=RESULTS.successful,
        stats={},
        state_names=_state_names(run) or None,
    )


def _data(run: StoredRun, num_components: int):
    if "data_ts" not in run.arrays:
        return None
    observations = run.arrays["data_observations"]
    if observations.ndim != 2 or observations.shape[1] != num_components:
        return None  # only some components observed: draw the curves alone
    return run.arrays["data_ts"], observations


def _labels(entry: dict, x: str, y: str) -> dict[str, str]:
    return {"time_label": entry.get("xlabel", x), "value_label": entry.get("ylabel", y)}


def _fit_figure(run: StoredRun, entry: dict):
    import simlab.plot

    fitted = _trajectory(run, "fit_prediction")
    ax = simlab.plot.trajectory(
        fitted,
        data=_data(run, fitted.ys.shape[1]),
        stderr=run.arrays["fit_prediction_stderr"],
        **_labels(entry, "time", "state"),
    )
    ax.set_title(_parameter_text(run), fontsize=9)
    return ax.figure


def _parameter_text(run: StoredRun, per_line: int = 3) -> str:
    """The fitted values ± standard errors, a few to a line."""
    parts = []
    truth = run.metrics.get("true_parameters", {})
    for name, fitted in run.metrics["fit"]["parameters"].items():
        error = "unidentifiable" if fitted["stderr"] is None else f"{fitted['stderr']:.2g}"
        known = f" (true {truth[name]:.3g})" if name in truth else ""
        parts.append(f"{name} = {fitted['value']:.4g} ± {error}{known}")
    lines = [",  ".join(parts[i : i + per_line]) for i in range(0, len(parts), per_line)]
    return "fit: " + "\n".join(lines)


def _phase_portrait(run: StoredRun, entry: dict):
    import simlab.plot

    trajectory = _trajectory(run)
    data = _data(run, trajectory.ys.shape[1])
    ax = simlab.plot.phase_portrait(trajectory, data=None if data is None else data[1])
    return ax.figure


def _loss(run: StoredRun, entry: dict):
    import simlab.plot

    return simlab.plot.loss_curve(run.arrays["fit_loss_history"]).figure


def load_sweep(run: StoredRun) -> SweepResult:
    """The run's sweep, read back from its zarr store (no pickles, no recompute)."""
    import zarr

    summary = run.metrics["sweep"]
    group = zarr.open_group(str(run.sweep_store), mode="r")
    names = tuple(summary["names"])
    observables = {name: group[name][:] for name in summary["observables"]}
    grid_axes = None
    if summary["mode"] == "grid":
        grid_axes = tuple(np.asarray(axis) for axis in summary["grid_axes"])
    return SweepResult(
        names=names,
        values=np.stack([group[name][:] for name in names], axis=-1),
        observables=observables,
        status=group["status"][:],
        mode=summary["mode"],
        grid_axes=grid_axes,
        units=summary["units"],
        dims={name: tuple(group[name].metadata.dimension_names[1:]) for name in observables},
        coords={},
        attrs=dict(group.attrs),
        stats=summary["stats"],
    )


def _sweep_heatmap(run: StoredRun, entry: dict):
    import simlab.plot

    result = load_sweep(run)
    ax = simlab.plot.sweep_heatmap(result, entry["variable"])
    if "label" in entry:
        ax.collections[0].colorbar.set_label(entry["label"])
    _axis_labels(ax, entry)
    fitted = run.metrics.get("fit", {}).get("parameters", {})
    x, y = result.names[:2]
    if x in fitted and y in fitted:
        ax.plot(
            fitted[x]["value"],
            fitted[y]["value"],
            marker="x",
            color="white",
            markersize=10,
            markeredgewidth=2.5,
            linestyle="",
            label="fit",
        )
        ax.legend(loc="upper right")
    return ax.figure


def _sweep_lines(run: StoredRun, entry: dict):
    import simlab.plot

    ax = simlab.plot.sweep_lines(load_sweep(run), entry["variable"])
    _axis_labels(ax, {"ylabel": entry.get("label"), **entry})
    return ax.figure


def _axis_labels(ax, entry: dict) -> None:
    """The experiment's own axis labels, where it gives them."""
    if entry.get("xlabel"):
        ax.set_xlabel(entry["xlabel"])
    if entry.get("ylabel"):
        ax.set_ylabel(entry["ylabel"])


def _pattern_gallery(run: StoredRun, entry: dict):
    import simlab.plot

    return simlab.plot.sweep_gallery(
        load_sweep(run), "final_field", channel=entry.get("channel"), label=entry.get("label")
    )


def _grid(run: StoredRun):
    from ..grid import Grid

    grid = run.config["model"]["grid"]
    return Grid(
        tuple(grid["shape"]), extent=grid["extent"], boundary=grid.get("boundary", "periodic")
    )


def _coordinates(run: StoredRun) -> np.ndarray:
    return np.asarray(_grid(run).coordinates()[0])


def _field_trajectory(run: StoredRun, entry: dict, every: int = 1) -> Trajectory:
    """The simulated field (one channel of a multi-field state) as a `Trajectory`."""
    ys = run.arrays["simulation_ys"]
    ys = ys[:, entry["channel"]] if "channel" in entry else ys
    return Trajectory(
        ts=run.arrays["simulation_ts"][::every], ys=ys[::every], result=RESULTS.successful, stats={}
    )


def _field(run: StoredRun, entry: dict):
    """A 1-D field's history as a space-time image; a 2-D field at the last time."""
    import simlab.plot

    trajectory = _field_trajectory(run, entry)
    label = entry.get("ylabel", "field")
    if trajectory.ys.ndim == 2:
        ax = simlab.plot.space_time(
            trajectory,
            coordinates=_coordinates(run),
            label=label,
            position_label=entry.get("xlabel", "x"),
        )
        return ax.figure
    ax = simlab.plot.field_image(trajectory.ys[-1], _grid(run), label=label)
    ax.set_title(f"t = {float(trajectory.ts[-1]):.4g}")
    return ax.figure


def _snapshots(run: StoredRun, entry: dict):
    """A 1-D field at a few data times: observations as points, the fitted model as lines."""
    import matplotlib.pyplot as plt

    from simlab.plot._style import COLOURS, style

    xs = _coordinates(run)
    ts, ys = run.arrays["simulation_ts"], run.arrays["simulation_ys"]
    data_ts, observations = run.arrays.get("data_ts"), run.arrays.get("data_observations")
    chosen = np.unique(np.linspace(0, len(ts) - 1, min(4, len(ts))).round().astype(int))
    with style():
        figure, ax = plt.subplots(figsize=(6, 3.8))
        for position, index in enumerate(chosen):
            colour = COLOURS[position % len(COLOURS)]
            ax.plot(xs, ys[index], color=colour, label=f"t = {ts[index]:.3g}")
            if data_ts is not None:
                nearest = int(np.argmin(np.abs(data_ts - ts[index])))
                ax.plot(xs, observations[nearest], "o", color=colour, markersize=3, alpha=0.7)
        ax.set_xlabel(entry.get("xlabel", "x"))
        ax.set_ylabel(entry.get("ylabel", "u"))
        ax.legend(title="lines: fitted model\npoints: data" if data_ts is not None else None)
        if "fit" in run.metrics:
            ax.set_title(_parameter_text(run), fontsize=9)
    return figure


def _animation(run: StoredRun, entry: dict, path: pathlib.Path) -> pathlib.Path:
    import simlab.plot

    trajectory = _field_trajectory(run, entry, every=int(entry.get("every", 1)))
    return simlab.plot.field_animation(
        trajectory, _grid(run), path, label=entry.get("ylabel", "field")
    )


DRAWERS = {
    "fit": _fit_figure,
    "phase_portrait": _phase_portrait,
    "loss": _loss,
    "sweep_heatmap": _sweep_heatmap,
    "sweep_lines": _sweep_lines,
    "pattern_gallery": _pattern_gallery,
    "field": _field,
    "snapshots": _snapshots,
}
