"""The table of figure kinds: what each needs, which models it suits, which options it
takes and how it is drawn. Experiments are checked against it, and runs are drawn from it,
from their stored files only, so `simlab plot` never recomputes."""

import dataclasses
import math
import pathlib
from collections.abc import Callable
from typing import Any

import numpy as np

from .._results import RESULTS, Trajectory
from .._sweep import SweepResult
from ..datasets import GHIA_REYNOLDS, ghia_cavity_centreline
from ..grid import Dirichlet
from ..io import DamagedStore, SweepStore, atomic_write
from ..models import (
    AbstractGridModel,
    AbstractHamiltonianModel,
    AbstractModel,
    DoubleWell,
    NavierStokes2D,
    WalledNavierStokes2D,
)
from ._check import Checker, ExperimentError
from ._fields import model_classes, observable_names
from ._folder import CONFIG, PROFILE_ARRAYS, StoredRun, inside_run
from ._model import built_model

VECTOR_FORMAT = "svg"
NEEDS = {
    "fit": "a [fit] table",
    "sweep": "a [sweep] table",
    "fit.starts": "a multi-start fit: fit.starts = N, with fit.bounds for every parameter",
    "fit.profiles": "a [fit.profiles] table",
    "fit.sampling": "a [fit.sampling] table",
    "sensitivity": "a [sensitivity] table",
    "continuation": "a [continuation] table",
    "ensemble": "an [ensemble] table (a stochastic model)",
    "first_passage": (
        "first-passage times: a stochastic model's [ensemble], an [event] threshold and a "
        "[sweep] with observable = 'event'"
    ),
    "petab": "a PEtab problem: [model] petab = PATH",
}
SUITS = {  # what each `suits` says, and which models it admits
    "grid": ("grid models", lambda model: isinstance(model, AbstractGridModel)),
    "ode": (
        "models with named states (ODEs)",
        lambda model: not isinstance(model, AbstractGridModel),
    ),
    "hamiltonian": (
        "Hamiltonian models",
        lambda model: isinstance(model, AbstractHamiltonianModel),
    ),
    "flow": (
        "two-dimensional flows (NavierStokes2D)",
        lambda model: isinstance(model, NavierStokes2D),
    ),
    "walled_flow": (
        "flows with walls (WalledNavierStokes2D)",
        lambda model: isinstance(model, WalledNavierStokes2D),
    ),
    "double_well": ("the double well (DoubleWell)", lambda model: isinstance(model, DoubleWell)),
    "any": ("any model", lambda model: True),
}
STRING_OPTIONS = ("title", "label", "xlabel", "ylabel", "variable")
INTEGER_OPTIONS = {"channel": 0, "every": 1, "modes": 1}  # each with its smallest value


@dataclasses.dataclass(frozen=True)
class FigureKind:
    """One kind of figure that `[[figures]]` may ask for.

    **Attributes:**

    - `name`: the `kind` written in the experiment file.
    - `needs`: what the experiment must have for it: tables (`"fit"`, `"sweep"`,
      `"fit.profiles"`, `"fit.sampling"`, `"sensitivity"`, `"continuation"`,
      `"ensemble"`), `"fit.starts"` (a multi-start fit), `"first_passage"` (a sweep of
      first-passage times over paths) or `"petab"` (a PEtab problem).
    - `suits`: the models it is drawn for: `"grid"`, `"ode"` (named states),
      `"hamiltonian"`, `"flow"`, `"walled_flow"`, `"double_well"` or `"any"`.
    - `options`: the keys it accepts besides `kind` and `name`; any other key is refused.
    - `check_options`: further checks, `check(checker, entry, where, model, spec)`, run
      after the needs and the model are known to fit; `spec` is the spec of the first table
      the kind needs (the `[sweep]` for a kind that needs none).
    - `draw`: `draw(run, entry, stem)` writes the figure's files next to `stem` (a path
      without suffix) and returns them.
    """

    name: str
    needs: tuple[str, ...]
    suits: str
    options: tuple[str, ...]
    check_options: tuple[Callable[..., None], ...]
    draw: Callable[[StoredRun, dict, pathlib.Path], list[pathlib.Path]]

    def check(self, check: Checker, entry: dict, where: str, model: AbstractModel, tables):
        """Refuses the entry if the experiment lacks what it needs, or the model does not
        suit it; `tables` maps each of `NEEDS` to its spec (or `None`)."""
        for table in self.needs:
            if tables[table] is None:
                raise check.fail(f"{where}.kind", f"{self.name!r} needs {NEEDS[table]}.")
        description, admits = SUITS[self.suits]
        if not admits(model):
            raise check.fail(
                f"{where}.kind",
                f"{self.name!r} is a figure for {description}, not {type(model).__name__}.",
            )
        spec = tables[self.needs[0] if self.needs else "sweep"]
        for check_option in self.check_options:
            check_option(check, entry, where, model, spec)


def figure_entries(check: Checker, config: dict) -> list[tuple[str, dict, FigureKind]]:
    """Each `[[figures]]` entry with its place and its kind, once its keys (those its kind
    accepts) and their types are checked: the same for a new experiment and a stored run."""
    entries = config.get("figures", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise check.fail("figures", 'must be an array of tables: [[figures]] kind = "...".')
    checked = []
    for index, entry in enumerate(entries):
        where = f"figures[{index}]"
        kind = FIGURE_KINDS[check.string(entry, "kind", where, choices=tuple(FIGURE_KINDS))]
        check.keys(entry, where, ("kind", "name", *kind.options))
        check.file_stem(entry, "name", where, default=None)
        for key in STRING_OPTIONS:
            check.string(entry, key, where, default=None)
        for key, minimum in INTEGER_OPTIONS.items():
            check.integer(entry, key, where, default=None, minimum=minimum)
        checked.append((where, entry, kind))
    return checked


def draw_all(run: StoredRun) -> list[pathlib.Path]:
    """Draws every figure the run's config asks for into its figures folder.

    Each figure is written as PNG and SVG (animations as GIF), each file atomically. The
    entries are checked first, so an edited `config.toml` fails with the key and the fix;
    a link that would lead a write outside the results folder is refused.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only: never open a window, even when a display exists

    folder = inside_run(run.folder, run.figures_folder)
    entries = figure_entries(Checker(run.folder / CONFIG), run.config)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for _, entry, kind in entries:
        written.extend(kind.draw(run, entry, folder / entry.get("name", kind.name)))
    return written


def _figure_file(run: StoredRun, stem: pathlib.Path, suffix: str) -> pathlib.Path:
    """The file `stem.suffix` of a figure, refused if a link there leads out of the run."""
    return inside_run(run.folder, stem.with_name(f"{stem.name}.{suffix}"))


def _still(drawer: Callable[[StoredRun, dict], Any]):
    """`draw` for a figure that `drawer` returns: titled, saved as PNG and SVG, closed."""

    def draw(run: StoredRun, entry: dict, stem: pathlib.Path) -> list[pathlib.Path]:
        import matplotlib.pyplot as plt

        paths = [_figure_file(run, stem, suffix) for suffix in ("png", VECTOR_FORMAT)]
        figure = drawer(run, entry)
        if "title" in entry:
            figure.suptitle(entry["title"])
        written = [_save(figure, path) for path in paths]
        plt.close(figure)
        return written

    return draw


def _save(figure, path: pathlib.Path) -> pathlib.Path:
    from simlab.plot import style

    with style():  # its savefig settings: tight bounding box, print resolution
        return atomic_write(path, figure.savefig)


def _model_class(run: StoredRun):
    return model_classes()[run.config["model"]["name"]]


def _model(run: StoredRun) -> AbstractModel:
    """The model that ran, rebuilt from the stored config with the fitted parameters, if any:
    its state names and energies are an instance's, not its class's."""
    fitted = run.metrics.get("fit", {}).get("parameters", {})
    values = {  # JSON keeps a non-finite fit as None
        name: np.nan if record["value"] is None else record["value"]
        for name, record in fitted.items()
    }
    return built_model(run.config, run.folder / CONFIG, values)


def _state_names(run: StoredRun) -> tuple[str, ...]:
    return tuple(_model(run).state_names)


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


def _units(run: StoredRun) -> tuple[tuple[str, ...], str]:
    """`(state units, time unit)` for axis labels: a shipped data set's own units where the
    run fits one (its observations are the state), else the model's `state_units`."""
    names = _state_names(run)
    dataset = run.config.get("data", {}).get("dataset")
    if dataset is not None:
        from .. import datasets

        records = getattr(datasets, dataset)()
        return (records.value_unit,) * len(names), records.time_unit
    units = tuple(_model_class(run).state_units)
    return (units if len(units) == len(names) else ()), ""


def _labels(run: StoredRun, entry: dict) -> dict[str, Any]:
    """The time and value labels of a trajectory figure: the entry's own, else with units."""
    units, time_unit = _units(run)
    return {
        "time_label": entry.get("xlabel", f"time ({time_unit})" if time_unit else "time"),
        "value_label": entry.get("ylabel"),
        "units": units,
    }


def _fit_figure(run: StoredRun, entry: dict):
    import simlab.plot

    fitted = _trajectory(run, "fit_prediction")
    ax = simlab.plot.trajectory(
        fitted,
        data=_data(run, fitted.ys.shape[1]),
        stderr=run.arrays["fit_prediction_stderr"],
        **_labels(run, entry),
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
    ax = simlab.plot.phase_portrait(
        trajectory,
        data=None if data is None else data[1],
        units=_units(run)[0],
        xlabel=entry.get("xlabel"),
        ylabel=entry.get("ylabel"),
    )
    return ax.figure


def _loss(run: StoredRun, entry: dict):
    import simlab.plot

    ax = simlab.plot.loss_curve(run.arrays["fit_loss_history"])
    _axis_labels(ax, entry)
    return ax.figure


# The figures of a fit's likelihood: multi-start, profiles, posterior.


def _waterfall(run: StoredRun, entry: dict):
    import jax.numpy as jnp

    import simlab
    import simlab.plot

    record, arrays = run.metrics["fit"]["starts"], run.arrays
    columns = {name: index for index, name in enumerate(record["names"])}
    starts = simlab.Starts(
        initial={n: jnp.asarray(arrays["fit_starts_initial"][:, i]) for n, i in columns.items()},
        params={n: jnp.asarray(arrays["fit_starts_params"][:, i]) for n, i in columns.items()},
        loss=jnp.asarray(arrays["fit_starts_loss"]),
        converged=jnp.asarray(arrays["fit_starts_converged"]),
        best=jnp.asarray(record["best"]),
        # Runs stored before failing starts were drawn again drew each start once.
        draws=jnp.asarray(
            arrays.get("fit_starts_draws", np.ones(arrays["fit_starts_loss"].shape, int))
        ),
    )
    ax = simlab.plot.waterfall(starts)
    _axis_labels(ax, entry)
    return ax.figure


def stored_profiles(run: StoredRun) -> dict:
    """The run's profile likelihoods as `simlab.Profile`s, from its arrays and metrics."""
    import jax.numpy as jnp

    import simlab

    profiles = {}
    for name, record in run.metrics["fit"]["profiles"].items():
        arrays = {f: jnp.asarray(run.arrays[f"profile_{name}_{f}"]) for f in PROFILE_ARRAYS}
        lower = -np.inf if record["lower"] is None else record["lower"]
        upper = np.inf if record["upper"] is None else record["upper"]
        profiles[name] = simlab.Profile(
            name=name,
            **arrays,
            threshold=jnp.asarray(record["threshold"]),
            estimate=jnp.asarray(record["estimate"]),
            lower=jnp.asarray(lower),
            upper=jnp.asarray(upper),
            lower_open=jnp.asarray(record["lower_open"]),
            upper_open=jnp.asarray(record["upper_open"]),
            level=record["level"],
        )
    return profiles


def _profiles(run: StoredRun, entry: dict):
    import simlab.plot

    axes = simlab.plot.profiles(stored_profiles(run))
    if entry.get("ylabel"):
        axes[0].set_ylabel(entry["ylabel"])
    return axes[0].figure


def stored_posterior(run: StoredRun):
    """The run's posterior draws as a `simlab.Posterior`."""
    import jax.numpy as jnp

    import simlab

    draws = run.arrays["posterior_samples"]
    return simlab.Posterior(
        samples={
            n: jnp.asarray(draws[..., i]) for i, n in enumerate(run.metrics["sampling"]["names"])
        },
        log_density=jnp.asarray(run.arrays["posterior_log_density"]),
        divergent=jnp.asarray(run.arrays["posterior_divergent"]),
        acceptance_rate=jnp.asarray(run.arrays["posterior_acceptance_rate"]),
    )


def _corner(run: StoredRun, entry: dict):
    import simlab.plot

    fitted = run.config["fit"]["parameters"]
    return simlab.plot.corner(stored_posterior(run), names=fitted)


def _posterior_predictive(run: StoredRun, entry: dict):
    import simlab.plot

    curves, sampling = run.arrays["posterior_predictive"], run.metrics["sampling"]
    observed = run.config.get("data", {}).get("columns") or list(_state_names(run))
    data = None
    if "data_ts" in run.arrays and run.arrays["data_observations"].shape[1] == curves.shape[2]:
        data = (run.arrays["data_ts"], run.arrays["data_observations"])
    ax = simlab.plot.posterior_band(
        run.arrays["simulation_ts"],
        curves,
        data=data,
        fitted=run.arrays.get("fit_prediction"),
        labels=observed if len(observed) == curves.shape[2] else None,
        legend_title=(
            f"{curves.shape[0]} posterior draws simulated ({sampling['num_chains']} chains × "
            f"{sampling['num_samples']} draws, {sampling['num_divergent']} divergent)"
        ),
        time_label=entry.get("xlabel", "time"),
        value_label=entry.get("ylabel", "observed value"),
    )
    return ax.figure


def load_sweep(run: StoredRun) -> SweepResult:
    """The run's sweep, read back from its zarr store (no pickles, no recompute), every
    chunk checked against its recorded checksum."""
    summary, path = run.metrics["sweep"], run.sweep_store
    store = _from_store(path, lambda: SweepStore.open_existing(path))
    outputs, status = _from_store(path, store.read)
    layout = store.layout
    names = tuple(summary["names"])
    swept = _from_store(path, lambda: [layout.member_coords[name] for name in names])
    observables = _from_store(path, lambda: {n: outputs[n] for n in summary["observables"]})
    grid_axes = None
    if summary["mode"] == "grid":
        grid_axes = tuple(np.asarray(axis) for axis in summary["grid_axes"])
    return SweepResult(
        names=names,
        values=np.stack(swept, axis=-1),
        observables=observables,
        status=status,
        mode=summary["mode"],
        grid_axes=grid_axes,
        units=summary["units"],
        dims={name: layout.variables[name].dims for name in observables},
        coords={},
        attrs=store.attrs(),
        stats=summary["stats"],
    )


def _from_store(path: pathlib.Path, read: Callable[[], Any]) -> Any:
    """What `read` reads from the sweep store; damage is reported with the files named."""
    try:
        return read()
    except DamagedStore as error:
        raise ExperimentError(
            f"{path}: damaged: {'; '.join(error.problems)}; rerun the experiment."
        ) from None
    except Exception as error:  # zarr's codecs fail on truncated or garbled files variously
        raise ExperimentError(
            f"{path}: damaged or unreadable ({type(error).__name__}); rerun the experiment."
        ) from None


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

    figure = simlab.plot.sweep_gallery(
        load_sweep(run), "final_field", channel=entry.get("channel"), label=entry.get("label")
    )
    if "xlabel" in entry:
        figure.supxlabel(entry["xlabel"])
    if "ylabel" in entry:
        figure.supylabel(entry["ylabel"])
    return figure


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
    _axis_labels(ax, {"xlabel": entry.get("xlabel")})  # its ylabel names the colour bar
    ax.set_title(f"t = {float(trajectory.ts[-1]):.4g}")
    return ax.figure


def _space_time(run: StoredRun, entry: dict):
    """A 1-D field's history: position across, time up."""
    import simlab.plot

    ax = simlab.plot.space_time(
        _field_trajectory(run, entry),
        _grid(run),
        label=entry.get("label", "u"),
        position_label=entry.get("xlabel", "x"),
        time_label=entry.get("ylabel", "time"),
    )
    return ax.figure


def _snapshots(run: StoredRun, entry: dict):
    """A 1-D field at a few data times: observations as points, the fitted model as lines."""
    import matplotlib.pyplot as plt

    from simlab.plot._style import COLOURS, style

    xs = _coordinates(run)
    ts, ys = run.arrays["simulation_ts"], run.arrays["simulation_ys"]
    data_ts, observations = run.arrays.get("data_ts"), run.arrays.get("data_observations")
    chosen = _spread_indices(len(ts))
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


def _spread_indices(num_times: int, count: int = 4) -> np.ndarray:
    """Up to `count` save indices spread evenly from the first to the last."""
    return np.unique(np.linspace(0, num_times - 1, min(count, num_times)).round().astype(int))


def _vorticity(run: StoredRun) -> Trajectory:
    """The vorticity of a stored flow (the first channel, with a passive scalar)."""
    ys = run.arrays["simulation_ys"]
    ys = ys[:, 0] if ys.ndim == 4 else ys
    return Trajectory(ts=run.arrays["simulation_ts"], ys=ys, result=RESULTS.successful, stats={})


def _flow_snapshots(run: StoredRun, entry: dict):
    """The vorticity with streamlines at four times, first to last (sparser streamlines
    than one large panel's, which also keeps the drawing quick)."""
    import matplotlib.pyplot as plt

    import simlab.plot

    vorticity, grid = _vorticity(run), _grid(run)
    chosen = _spread_indices(len(vorticity.ts))
    figure, axes = plt.subplots(
        1, len(chosen), figsize=(4.2 * len(chosen), 3.8), layout="constrained", squeeze=False
    )
    for ax, index in zip(axes[0], chosen, strict=True):
        simlab.plot.flow_field(vorticity.ys[index], grid, density=0.8, ax=ax)
        ax.set_title(f"t = {float(vorticity.ts[index]):.4g}")
        _axis_labels(ax, entry)
    return figure


def _energy_enstrophy(run: StoredRun, entry: dict):
    import simlab.plot

    return simlab.plot.energy_enstrophy(
        _vorticity(run), _grid(run), time_label=entry.get("xlabel", "time")
    )


def _energy_spectrum(run: StoredRun, entry: dict):
    """E(k) at four times, first to last, with Kraichnan's k^-3."""
    import simlab.plot

    vorticity = _vorticity(run)
    chosen = _spread_indices(len(vorticity.ts))
    ax = simlab.plot.energy_spectrum(
        vorticity.ys[chosen], _grid(run), slope=-3.0,
        labels=[f"t = {float(vorticity.ts[index]):.4g}" for index in chosen],
    )  # fmt: skip
    _axis_labels(ax, entry)
    return ax.figure


def _walled_flow_field(run: StoredRun, entry: dict):
    """The speed with streamlines at the last time."""
    import simlab.plot

    model, ts = _model(run), run.arrays["simulation_ts"]
    ax = simlab.plot.walled_flow_field(run.arrays["simulation_ys"][-1], model, density=1.4)
    ax.set_title(f"t = {float(ts[-1]):.4g}, {'×'.join(map(str, model.grid.shape))} cells")
    _axis_labels(ax, entry)
    return ax.figure


def _centreline(run: StoredRun, entry: dict):
    """u on the vertical centreline at four times (the last darkest), with Ghia et al.'s
    values for a cavity at a Reynolds number they tabulate."""
    import simlab.plot

    model, ys = _model(run), run.arrays["simulation_ys"]
    reynolds = _cavity_reynolds(model)
    reference = None
    if reynolds is not None and any(np.isclose(reynolds, GHIA_REYNOLDS)):
        reference = ghia_cavity_centreline(reynolds)
    ax = simlab.plot.centreline_profile(
        ys[_spread_indices(len(ys))], model, reference=reference,
        reference_label="Ghia, Ghia & Shin (1982)",
    )  # fmt: skip
    shown = f", Re = {reynolds:.4g}" if reynolds is not None else ""
    ax.set_title(f"t = {float(run.arrays['simulation_ts'][-1]):.4g}{shown}", fontsize=9)
    _axis_labels(ax, entry)
    return ax.figure


def _cavity_reynolds(model) -> float | None:
    """$Re = U L / \nu$ of a lid-driven cavity (walls all round, only the top one moving at
    $U$, $L$ its width); `None` for any other flow."""
    grid = model.grid
    sides = [side for axis in grid.boundaries for side in axis]
    if any(grid.is_periodic) or not all(isinstance(side, Dirichlet) for side in sides):
        return None
    speeds = [float(np.asarray(side.value)) for side in sides]
    lid = speeds[-1]  # the top wall, y = y0 + L_y
    if lid == 0 or any(speeds[:-1]) or float(model.viscosity) == 0:
        return None
    return abs(lid) * grid.extent[0] / float(model.viscosity)


def _animation(run: StoredRun, entry: dict, stem: pathlib.Path) -> list[pathlib.Path]:
    import simlab.plot

    trajectory = _field_trajectory(run, entry, every=int(entry.get("every", 1)))
    path = _figure_file(run, stem, "gif")
    return [
        simlab.plot.field_animation(
            trajectory, _grid(run), path, label=entry.get("ylabel", "field")
        )
    ]


def _scalar_variable(check: Checker, entry: dict, where: str, model, sweep) -> None:
    """`variable` is one the sweep's observable produces."""
    check.string(
        entry, "variable", where, choices=observable_names(sweep.observable, model.state_names)
    )


def _two_name_grid_sweep(check: Checker, entry: dict, where: str, model, sweep) -> None:
    if len(sweep.axes) != 2 or sweep.mode != "grid":
        raise check.fail(f"{where}.kind", f"{entry['kind']!r} needs a grid sweep over two names.")


def _existing_channel(check: Checker, entry: dict, where: str, model, sweep) -> None:
    num_channels = model.channel_shape[0] if model.channel_shape else 0
    if "channel" in entry and entry["channel"] >= num_channels:
        raise check.fail(
            f"{where}.channel",
            f"{type(model).__name__} has no channel {entry['channel']}; drop it for "
            "single-field models.",
        )


def _one_dimensional(check: Checker, entry: dict, where: str, model, sweep) -> None:
    if model.grid.ndim != 1:
        raise check.fail(f"{where}.kind", f"{entry['kind']!r} draws 1-D fields; use 'field'.")


def load_sensitivity(run: StoredRun):
    """The run's sensitivity indices as the `xarray.Dataset` that `simlab.sensitivity`
    returned, rebuilt from `arrays.npz` and `metrics.json` (nothing is recomputed)."""
    import xarray as xr

    record = run.metrics["sensitivity"]
    names = record["parameters"]
    return xr.Dataset(
        {
            variable: (tuple(dims), run.arrays[f"sensitivity_{variable}"])
            for variable, dims in record["variables"].items()
        },
        coords={"parameter": names, "parameter_2": names},
        attrs=record["attrs"],
    )


def _sensitivity(run: StoredRun, entry: dict):
    import simlab.plot

    ax = simlab.plot.sensitivity(load_sensitivity(run), entry["variable"])
    ax.set_title(entry.get("label", entry["variable"]))
    _axis_labels(ax, entry)
    return ax.figure


def load_branch(run: StoredRun):
    """The run's branch of fixed points as the `simlab.Branch` that `simlab.continuation`
    returned, rebuilt from `arrays.npz` and `metrics.json`."""
    from .._continuation import Bifurcation, Branch

    record, arrays = run.metrics["continuation"], run.arrays
    return Branch(
        parameter=record["parameter"],
        values=arrays["continuation_values"],
        states=arrays["continuation_states"],
        state_names=_state_names(run),
        eigenvalues=arrays["continuation_eigenvalues"],
        stability=arrays["continuation_stability"],
        result=arrays["continuation_result"],
        bifurcations=tuple(
            Bifurcation(
                kind=point["kind"],
                value=point["value"],
                state=np.asarray(point["state"]),
                index=point["index"],
                eigenvalues=np.asarray(point["eigenvalues_real"])
                + 1j * np.asarray(point["eigenvalues_imag"]),
            )
            for point in record["bifurcations"]
        ),
        oscillation_min=arrays["continuation_oscillation_min"],
        oscillation_max=arrays["continuation_oscillation_max"],
    )


def _bifurcation(run: StoredRun, entry: dict):
    import simlab.plot

    branch = load_branch(run)
    ax = simlab.plot.bifurcation(branch, entry.get("variable", branch.state_names[0]))
    _axis_labels(ax, entry)
    return ax.figure


def _sensitivity_output(check: Checker, entry: dict, where: str, model, sensitivity) -> None:
    """`variable` is one of the outputs the analysed observable produces."""
    check.string(
        entry,
        "variable",
        where,
        choices=observable_names(sensitivity.observable, model.state_names),
    )


def _state_component(check: Checker, entry: dict, where: str, model, spec) -> None:
    check.string(entry, "variable", where, default=None, choices=model.state_names)


# The figures of stochastic paths.


def _escape_over_noise(check: Checker, entry: dict, where: str, model, passage) -> None:
    """Only the noise strength is swept, and the paths start below the threshold they
    must rise to (the exact mean first-passage time is for `start < end`)."""
    if list(passage.sweep.axes) != ["D"]:
        raise check.fail(
            f"{where}.kind",
            f"'escape_rate' draws rates against the noise strength; sweep D alone, not "
            f"{list(passage.sweep.axes)}.",
        )
    start, event = float(passage.y0[0]), passage.event
    if event.direction == -1 or not start < event.threshold:
        raise check.fail(
            "event",
            f"'escape_rate' times the first rise from x = {start:g} to the threshold; give a "
            "threshold above the initial state with direction = 'rising'.",
        )


def _escape_rate(run: StoredRun, entry: dict):
    """Escape rates from the mean first-passage times of the sweep's paths, against the
    exact rate by quadrature and Kramers' formula."""
    import simlab.plot

    ensemble = run.metrics["sweep"]["ensemble"]
    times = ensemble["statistics"]["event_time"]
    start = float(run.config["initial_state"]["x"])
    threshold = float(run.config["event"]["threshold"])
    figure = simlab.plot.escape_rates(
        ensemble["points"]["D"],
        [np.nan if v is None else v for v in times["mean"]],
        [np.nan if v is None else v for v in times["standard_error"]],
        exact_time=lambda D: DoubleWell(D=D).mean_first_passage_time(start, threshold),
        asymptotic_rate=lambda D: DoubleWell(D=D).kramers_rate(),
        sample_label=_paths_label(run, ensemble, times),
    )
    _axis_labels(figure.axes[-1], {"xlabel": entry.get("xlabel")})
    _axis_labels(figure.axes[0], {"ylabel": entry.get("ylabel")})
    figure.axes[0].set_title(f"first passage from x = {start:g} to x = {threshold:g}", fontsize=9)
    return figure


def _paths_label(run: StoredRun, ensemble: dict, times: dict) -> str:
    """What the points are: paths per point, the step, and how many never arrived."""
    step = run.config.get("solver", {}).get("dt0")
    label = f"simulated: mean of {ensemble['paths']} paths" + (f", dt = {step:g}" if step else "")
    missing = ensemble["paths"] * len(times["count"]) - int(sum(times["count"]))
    if missing:
        horizon = run.config["time"]["stop"]
        label += f"\n({missing} paths had not arrived by t = {horizon:g}, left out)"
    return label


# The figures of a Hamiltonian simulation.


def _model_and_path(plot: str, *passed: str):
    """A drawer of `simlab.plot.<plot>(model, trajectory, ...)` for the run that ran, with
    the entry's keys `passed` as options and its axis labels."""

    def draw(run: StoredRun, entry: dict):
        import simlab.plot

        options = {key: entry[key] for key in passed if key in entry}
        ax = getattr(simlab.plot, plot)(_model(run), _trajectory(run), **options)
        _axis_labels(ax, entry)
        return ax.figure

    return draw


def _energy_error(run: StoredRun, entry: dict):
    import simlab.plot

    solver = run.config.get("solver", {})
    steps = f", dt = {solver['dt0']:g}" if "dt0" in solver else ""
    label = f"{solver.get('name', 'default solver')}{steps}"
    ax = simlab.plot.energy_error(_model(run), {label: _trajectory(run)})
    _axis_labels(ax, entry)
    return ax.figure


def _bodies_in_a_plane(check: Checker, entry: dict, where: str, model, spec) -> None:
    from simlab.plot._hamiltonian import body_dimension

    try:
        body_dimension(model)
    except ValueError as error:
        raise check.fail(f"{where}.kind", str(error)) from None


def _two_degrees_of_freedom(check: Checker, entry: dict, where: str, model, spec) -> None:
    if len(model.state_names) != 4:
        raise check.fail(
            f"{where}.kind",
            f"a Poincaré section needs two degrees of freedom; {type(model).__name__} has "
            f"{len(model.state_names) // 2}.",
        )


def _normal_modes(check: Checker, entry: dict, where: str, model, spec) -> None:
    if not hasattr(model, "mode_energies"):
        raise check.fail(
            f"{where}.kind", f"{type(model).__name__} has no normal modes; use an FPUTChain."
        )
    num_modes = len(model.state_names) // 2
    if entry.get("modes", 1) > num_modes:
        raise check.fail(f"{where}.modes", f"is {entry['modes']}; the chain has {num_modes} modes.")


# The figure of a PEtab problem (`_petab`).


def _petab_fit(run: StoredRun, entry: dict):
    """The figure kind `petab_fit`: one panel per observable, each measured series' data
    as points and its simulated curve as a line, a colour per condition; the estimates and
    the log-likelihood above. Measurements at steady state (`time = inf`) are not drawn."""
    import matplotlib.pyplot as plt

    from simlab.plot._style import COLOURS, style

    record, arrays = run.metrics["petab"], run.arrays
    series = record["series"]
    observables = list(dict.fromkeys(item["observable"] for item in series))
    conditions = list(dict.fromkeys(item["label"] for item in series))
    colours = {label: COLOURS[i % len(COLOURS)] for i, label in enumerate(conditions)}
    columns = min(len(observables), 3)
    rows = math.ceil(len(observables) / columns)
    data_ts, data_values = arrays["petab_data_ts"], arrays["petab_data_values"]
    with style():
        figure, axes = plt.subplots(
            rows,
            columns,
            figsize=(4.2 * columns, 3.2 * rows + 0.6),
            squeeze=False,
            layout="constrained",
        )
        for ax in axes.flat[len(observables) :]:
            ax.set_visible(False)
        for number, item in enumerate(series):
            ax = axes.flat[observables.index(item["observable"])]
            colour = colours[item["label"]]
            label = item["label"] + (f" ({item['overrides']})" if item["overrides"] else "")
            ax.plot(arrays["petab_curve_ts"], arrays["petab_curves"][number], color=colour,
                    label=label)  # fmt: skip
            chosen = (arrays["petab_data_series"] == number) & np.isfinite(data_ts)
            ax.plot(data_ts[chosen], data_values[chosen], "o", color=colour, markersize=3.5,
                    alpha=0.8)  # fmt: skip
        for position, observable in enumerate(observables):
            ax = axes.flat[position]
            ax.set_title(observable, fontsize=10)
            ax.set_xlabel("time")
            _axis_labels(ax, entry)
            if len(ax.get_lines()) > 2 or position == 0:
                ax.legend(fontsize=7, title="lines: simulated\npoints: measured",
                          title_fontsize=7)  # fmt: skip
        figure.suptitle(_petab_heading(run), fontsize=9)
    return figure


def _petab_heading(run: StoredRun) -> str:
    """The problem, its log-likelihood, and the estimates with their standard errors."""
    record = run.metrics["petab"]
    value = record["log_likelihood"]
    shown = "NaN (a solve failed)" if value is None else f"{value:.6g}"
    name = pathlib.PurePath(record["problem"]).stem  # the problem, not where it was read
    line = f"{name}: log-likelihood {shown} at the {record['at']}"
    if "fit" not in run.metrics:
        return line
    scales = sorted(set(record["scales"]))
    scale = f" ({scales[0]} scale)" if len(scales) == 1 else " (on their PEtab scales)"
    return f"{line}\n{_parameter_text(run).replace('fit: ', f'fit{scale}: ', 1)}"


_LABELS = ("title", "xlabel", "ylabel")
FIGURE_KINDS = {
    kind.name: kind
    for kind in (  # name, needs, suits, options, check_options, draw
        FigureKind("fit", ("fit",), "ode", _LABELS, (), _still(_fit_figure)),
        FigureKind("phase_portrait", (), "ode", _LABELS, (), _still(_phase_portrait)),
        FigureKind("loss", ("fit",), "any", _LABELS, (), _still(_loss)),
        FigureKind("petab_fit", ("petab",), "any", _LABELS, (), _still(_petab_fit)),
        FigureKind("waterfall", ("fit.starts",), "any", _LABELS, (), _still(_waterfall)),
        FigureKind(
            "profiles", ("fit.profiles",), "any", ("title", "ylabel"), (), _still(_profiles)
        ),
        FigureKind("corner", ("fit.sampling",), "any", ("title",), (), _still(_corner)),
        FigureKind(
            "posterior_predictive",
            ("fit.sampling",),
            "ode",
            _LABELS,
            (),
            _still(_posterior_predictive),
        ),
        FigureKind(
            "sweep_heatmap",
            ("sweep",),
            "any",
            (*_LABELS, "variable", "label"),
            (_two_name_grid_sweep, _scalar_variable),
            _still(_sweep_heatmap),
        ),
        FigureKind(
            "sweep_lines",
            ("sweep",),
            "any",
            (*_LABELS, "variable", "label"),
            (_scalar_variable,),
            _still(_sweep_lines),
        ),
        FigureKind(
            "pattern_gallery",
            ("sweep",),
            "grid",
            (*_LABELS, "channel", "label"),
            (_two_name_grid_sweep, _existing_channel),
            _still(_pattern_gallery),
        ),
        FigureKind(
            "field", (), "grid", (*_LABELS, "channel"), (_existing_channel,), _still(_field)
        ),
        FigureKind("snapshots", (), "grid", _LABELS, (_one_dimensional,), _still(_snapshots)),
        FigureKind(
            "sensitivity",
            ("sensitivity",),
            "ode",
            (*_LABELS, "variable", "label"),
            (_sensitivity_output,),
            _still(_sensitivity),
        ),
        FigureKind(
            "bifurcation",
            ("continuation",),
            "ode",
            (*_LABELS, "variable"),
            (_state_component,),
            _still(_bifurcation),
        ),
        FigureKind(
            "space_time",
            (),
            "grid",
            (*_LABELS, "label", "channel"),
            (_one_dimensional, _existing_channel),
            _still(_space_time),
        ),
        FigureKind(
            "orbits",
            (),
            "hamiltonian",
            _LABELS,
            (_bodies_in_a_plane,),
            _still(_model_and_path("orbits")),
        ),
        FigureKind("energy_error", (), "hamiltonian", _LABELS, (), _still(_energy_error)),
        FigureKind(
            "poincare_section",
            (),
            "hamiltonian",
            _LABELS,
            (_two_degrees_of_freedom,),
            _still(_model_and_path("poincare_section")),
        ),
        FigureKind(
            "mode_energies",
            (),
            "hamiltonian",
            (*_LABELS, "modes"),
            (_normal_modes,),
            _still(_model_and_path("mode_energies", "modes")),
        ),
        FigureKind("flow_snapshots", (), "flow", _LABELS, (), _still(_flow_snapshots)),
        FigureKind("energy_spectrum", (), "flow", _LABELS, (), _still(_energy_spectrum)),
        FigureKind("walled_flow_field", (), "walled_flow", _LABELS, (), _still(_walled_flow_field)),
        FigureKind("centreline", (), "walled_flow", _LABELS, (), _still(_centreline)),
        FigureKind(
            "escape_rate",
            ("first_passage",),
            "double_well",
            _LABELS,
            (_escape_over_noise,),
            _still(_escape_rate),
        ),
        FigureKind(
            "energy_enstrophy", (), "flow", ("title", "xlabel"), (), _still(_energy_enstrophy)
        ),
        FigureKind(
            "animation",
            (),
            "grid",
            ("ylabel", "channel", "every"),
            (_existing_channel,),
            _animation,
        ),
    )
}
"""Every figure an experiment may draw, by `kind`."""
