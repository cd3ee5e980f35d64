"""`sweep`: run a model over many parameter values, chunk by chunk, on every device."""

import contextlib
import dataclasses
import functools
import json
import logging
import math
import pathlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import numpy as np
from jax.dtypes import canonicalize_dtype
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from tqdm.auto import tqdm

from .. import _display as display
from .._identity import (
    abstract_time_and_state,
    event_identity,
    function_identity,
    model_identity,
    qualified_name,
)
from .._memory import check_fits
from .._misc import Integer, RealNumber, as_count, show_progress
from .._options import DEFAULT_MAX_STEPS, SolveOptions, merged_options
from .._provenance import provenance as simlab_provenance
from .._results import Trajectory
from .._simulate import checked_ts, checked_y0, with_default_solver
from ..grid import Grid
from ..integrate._brownian import checked_key
from ..integrate._events import Event, event_name
from ..integrate._sde import check_additive, is_stochastic
from ..io import StoreLayout, SweepStore
from ..io._fingerprint import array_digest
from ..io._store import NOT_COMPUTED
from ..models._base import AbstractModel
from ..parallel import gather_to_host, member_mesh, replicate, shard_rows
from ..parallel._mesh import MEMBER_AXIS
from ._execute import (
    TRAJECTORY,
    balanced_chunk_size,
    chunk_memory_budget,
    chunk_program,
    compiled_chunk,
    default_chunk_size,
    group_shape,
    host_outputs,
    largest_chunk_size,
    member_columns,
    member_group_size,
    member_shapes,
)
from ._members import Members, PathMembers, build_members, with_paths
from ._result import SweepResult
from ._statistics import EnsembleStatistics, checked_quantiles

# How JAX's runtime error names a failed `equinox.error_if` check, before its message.
EQUINOX_ERROR = "_EquinoxRuntimeError: "
# Path p draws from fold_in(key, p), p < 2**32 - 1; sampled points from the last number.
POINTS_STREAM = 2**32 - 1
SPATIAL_DIMS = ("x", "y", "z")  # the names of a grid's axes in a trajectory's dims


def sweep(
    model: AbstractModel,
    params: Mapping[str, Any],
    y0: Any,
    ts: Any,
    *,
    mode: str = "grid",
    observable: Callable[[Any], Mapping[str, Any]] | None = None,
    observable_name: str | None = None,
    num_samples: Integer | None = None,
    chunk_size: Integer | None = None,
    mesh: Mesh | None = None,
    store: Any = None,
    progress: bool | None = None,
    key: Any = None,
    options: SolveOptions | None = None,
    solver: str | dfx.AbstractSolver | None = None,
    rtol: RealNumber | None = None,
    atol: RealNumber | None = None,
    dt0: RealNumber | None = None,
    adaptive: bool = True,
    max_steps: Integer = DEFAULT_MAX_STEPS,
    integrator: str = "auto",
    event: Event | Callable[[AbstractModel], Event] | None = None,
    paths: Integer | None = None,
    quantiles: Sequence[RealNumber] = (0.05, 0.5, 0.95),
    keep_paths: bool = False,
) -> SweepResult:
    r"""Simulates `model` for many values of its parameters (or initial state), in parallel.

    Each *member* is one simulation, $y_m(t) = y_0 + \int_{t_0}^{t} f_{\theta_m}(s, y_m)\,ds$,
    with its own values $\theta_m$ of the swept quantities. Members are run in chunks: a chunk
    is vmapped on each device and split over the devices of `mesh` with `jax.shard_map`; the
    chunk function is compiled once and reused for every chunk (the last one is padded, and
    the padding dropped). On a CPU a deterministic model's members run in groups of 256,
    one group after another, so that a group of neighbouring members stops when its own
    slowest does (see the sweeps guide). Each chunk starts before the previous one's
    results are copied back, so that the host's work overlaps the devices'. Under
    `jax.distributed` every process runs the same call and computes its share of each
    chunk. A member whose solve fails is recorded with its status and its observables set
    to `NaN`; it never stops the sweep.

    **Arguments:**

    - `model`: a [`simlab.models.AbstractModel`][] holding the values of unswept parameters.
    - `params`: maps swept names (the model's parameters, or components of the initial
      state such as `"prey"`) to 1-D arrays of values. In `mode="samples"`, each maps to
      `[lower, upper]`, the range to draw from.
    - `y0`: the initial state (swept components are overwritten per member).
    - `ts`: strictly increasing save times.
    - `mode`: `"grid"` (the Cartesian product of the arrays), `"zip"` (the i-th values of
      all arrays together; equal lengths), or `"samples"` (`num_samples` uniform random
      points in the given ranges, drawn with `key`).
    - `observable`: maps a [`simlab.Trajectory`][] to a dict of named floating-point
      arrays to keep (e.g. the final state), so memory stays small; `None` keeps the
      whole trajectory as `"trajectory"`. Use a function defined once (not a new lambda
      per call): it is part of the compiled function's cache key. A store records its name
      and a digest of what it computes (its jaxpr, with the values it closes over and the
      globals it reads), so a different function is never mixed into a store.
    - `observable_name`: a name that identifies `observable` in the store instead of its
      digest (e.g. `"final_z-v2"`): give it to resume a store written under another JAX
      version, whose jaxprs, hence digests, may differ.
    - `num_samples`: how many points `mode="samples"` draws.
    - `chunk_size`: members per chunk (rounded up to a multiple of the number of devices);
      `None` sizes chunks to a memory budget (256 MiB, or on an accelerator a sixteenth
      of its memory if more), at most 8192 members on a CPU and 2**18 per device on an
      accelerator, and splits the members into chunks of about equal size.
    - `mesh`: a one-axis mesh (see [`simlab.parallel.member_mesh`][]) whose axis is named
      `"members"`; `None` uses every device of every process.
    - `store`: a folder path; results are written there chunk by chunk (a zarr store that
      `xarray.open_zarr` reads). Rerunning the same sweep resumes it, skipping finished
      chunks; a store of a different sweep is refused, naming what differs. The model, the
      observable and the event count as the same only if they compute the same (a class or
      function redefined under its name is a different one).
    - `progress`: show a progress bar (members per second, ETA): `True` always, `False`
      never, `None` (the default) when the process is interactive (stderr is a terminal,
      or a Jupyter kernel, where it is a notebook widget).
    - `key`: a `jax.random` key, for `mode="samples"`.
    - `options`: the solve settings as one [`simlab.SolveOptions`][] (part of the compiled
      chunk function's cache key and of the store's identity), or the keywords
      `solver`, `rtol`, `atol`, `dt0`, `adaptive`, `max_steps`, `integrator`, as
      [`simlab.simulate`][] takes them. Explicit solvers run on simlab's lean loop by
      default, many times faster under `vmap` than Diffrax.
    - `event`: a [`simlab.Event`][] for every member, or a function `event(model)` that
      builds one from each member's model (for a condition that reads swept parameters,
      such as an epidemic's growth rate). The observable then reads
      `trajectory.event_time` and `trajectory.event_state`; a member whose event never
      fires reports `NaN` there and keeps its successful status. Part of the compiled
      chunk function's cache key and of the store's identity: define it once.
    - `paths`: for a stochastic model ([`simlab.models.AbstractSDEModel`][]), how many
      paths to run at every parameter point. Path `p` draws its Brownian increments from
      `jax.random.fold_in(key, p)` at every point (common random numbers: differences
      between points are not drowned in sampling noise), so a path is the same under any
      chunking, device count or resumed store, and equals
      `simulate(..., key=jax.random.fold_in(key, p))`. `key` is then required (in
      `mode="samples"` the points are drawn from `fold_in(key, 2**32 - 1)`).
    - `quantiles`: with `paths`, the levels whose quantiles are kept (see below).
    - `keep_paths`: with `paths`, keep every path as a member (its number is the swept
      name `"path"`, the last grid dimension in grid mode), so that `store` can hold them;
      otherwise the paths of each point are reduced chunk by chunk to statistics, and
      memory does not grow with the number of paths.

    **Returns:** a [`simlab.SweepResult`][]; `.to_xarray()` labels it. With `paths` and
    without `keep_paths`, its members are the parameter points, and each observable `x`
    (or `trajectory`) becomes `x_count` (paths with a finite value), `x_mean`,
    `x_variance` (unbiased), `x_quantiles` (a `quantile` axis after the point axis) and
    `x_quantile_bound`: streamed quantiles lie within this bound of `numpy.quantile` of all
    the paths (histograms of 1,024 bins that widen as needed; the bound is
    below 2/1023 of the range of the values). A point's status is that of a failed path,
    if any; failed paths are left out of its statistics.

    !!! example

        ```python
        import jax.numpy as jnp
        import simlab

        def final_z(trajectory):
            return {"final_z": trajectory.ys[-1, 2]}


        model = simlab.models.Lorenz(sigma=10.0, rho=28.0, beta=8 / 3)
        result = simlab.sweep(
            model,
            {"rho": jnp.linspace(0.5, 30.0, 64)},
            jnp.array([1.0, 1.0, 1.0]),
            jnp.linspace(0.0, 1.0, 11),
            observable=final_z,
        )
        result.to_xarray()["final_z"]  # one value per rho
        ```
    """
    start_time = time.perf_counter()
    if not isinstance(model, AbstractModel):
        raise TypeError(
            f"sweep needs a simlab.models.AbstractModel (to know its parameters); got "
            f"{type(model).__name__}."
        )
    # Kept on the host: the compiled chunk function places them faster than a transfer.
    ts = checked_ts(ts, keep_on_host=True)
    y0 = checked_y0(model, y0, keep_on_host=True)
    if observable_name is not None and (
        not isinstance(observable_name, str) or not observable_name.strip()
    ):
        raise ValueError(f"observable_name must be a non-empty string; got {observable_name!r}.")
    stochastic = _check_paths(model, paths, key, keep_paths, store)
    if stochastic:
        check_additive(model, y0, None, ts[0])
    key_data = jax.random.key_data(checked_key(key)) if stochastic else None
    points_key = jax.random.fold_in(checked_key(key), POINTS_STREAM) if stochastic else key
    members = build_members(model, params, mode=mode, key=points_key, num_samples=num_samples)
    if stochastic:
        quantiles = checked_quantiles(quantiles)
        members = with_paths(members, paths)
    mesh = _checked_mesh(mesh)
    if chunk_size is not None:  # refused before anything is traced
        chunk_size = as_count("chunk_size", chunk_size)
    settings = merged_options(
        options,
        dict(
            solver=solver,
            rtol=rtol,
            atol=atol,
            dt0=dt0,
            adaptive=adaptive,
            max_steps=max_steps,
            integrator=integrator,
        ),
    )
    settings = with_default_solver(model, y0, ts, settings)
    statics = dict(names=members.names, observable=observable, settings=settings, event=event)
    dtype = canonicalize_dtype(float)
    arrays, chunk_statics = chunk_program(model, y0, ts, mesh=mesh, key_data=key_data, **statics)
    trajectory, specs = member_shapes(arrays, chunk_statics, dtype)
    trajectory_dims, extra_coords = _trajectory_labels(model, y0, ts, observable)
    if trajectory_dims:
        specs = {TRAJECTORY: dataclasses.replace(specs[TRAJECTORY], dims=trajectory_dims)}
    observable_id = _observable_identity(
        observable, observable_name, trajectory, digest=store is not None
    )
    if not stochastic or keep_paths:
        _check_results_fit(members.num_members, specs, stochastic)
    chunk_size = _chunk_size(chunk_size, members, specs, y0, ts, mesh)
    layout = StoreLayout(
        num_members=members.num_members,
        chunk_size=chunk_size,
        variables=specs,
        # Only a store needs every member's values (a table as long as all the paths).
        member_coords={}
        if store is None
        else dict(zip(members.names, members.values.T, strict=True)),
        extra_coords=extra_coords,
        units=_units(model, members.names),
    )
    provenance = None
    sweep_store = None
    if store is not None:
        provenance = _provenance(model, mesh, members, settings, observable_id, event)
        # Tracing the model and event for their digests is needed only to check a store.
        identity = _identity(
            model, y0, ts, members, layout, settings, observable_id, event, key_data
        )
        sweep_store = _open_store(store, layout, identity, provenance)
    finished = _finished_chunks(sweep_store, layout)
    with _model_checks():
        chunks = _started_chunks(
            _replicated(mesh, arrays), chunk_statics, members, layout, finished
        )
        # Built while the first chunk runs.
        if provenance is None:
            provenance = _provenance(model, mesh, members, settings, observable_id, event)
        collected = (
            EnsembleStatistics(members, specs, quantiles)
            if stochastic and not keep_paths
            else AllMembers(layout, sweep_store)
        )
        bar = _progress_bar(progress, layout, finished)
        for index, begin, end, outputs, status in chunks:
            collected.add(index, begin, end, outputs, status)
            bar.update(end - begin)
        bar.close()
    if store is not None:
        collected.outputs, collected.status = _read_back(sweep_store, store, layout)
    resumed = int(finished.sum())
    group_size = member_group_size(mesh, stochastic=stochastic)
    stats = {
        "chunk_size": chunk_size,
        "group_size": group_shape(chunk_size // mesh.size, group_size)[1],
        "num_chunks": layout.num_chunks,
        "chunks_computed": layout.num_chunks - resumed,
        "chunks_resumed": resumed,
        "seconds": time.perf_counter() - start_time,
    }
    if isinstance(collected, EnsembleStatistics):
        provenance = {**provenance, "paths": members.paths}
        members = members.points
    return SweepResult(
        names=members.names,
        values=members.values,
        observables=collected.outputs,
        status=collected.status,
        mode=members.mode,
        grid_axes=members.grid_axes,
        units={name: layout.units[name] for name in members.names},
        dims=collected.dims,
        coords={**layout.extra_coords, **collected.coords},
        attrs=provenance,
        stats=stats,
    )


class AllMembers:
    """Keeps every member's observables and status, writing each chunk to the store."""

    def __init__(self, layout: StoreLayout, sweep_store: SweepStore | None):
        self.sweep_store = sweep_store
        self.outputs = {
            name: np.full((layout.num_members, *spec.shape), np.nan, spec.dtype)
            for name, spec in layout.variables.items()
        }
        self.status = np.full(layout.num_members, NOT_COMPUTED, np.int16)
        self.dims = {name: spec.dims for name, spec in layout.variables.items()}
        self.coords = {}

    def add(self, index: int, begin: int, end: int, outputs, status) -> None:
        if self.sweep_store is not None:
            self.sweep_store.write_chunk(index, outputs, status)
        for name, value in outputs.items():
            self.outputs[name][begin:end] = value
        self.status[begin:end] = status


def _started_chunks(arrays, statics, members, layout: StoreLayout, finished):
    """Yields `(index, begin, end, outputs, status)` for every chunk not yet finished, on
    the host, running `compiled_chunk(arrays, rows, statics)`. The first chunk starts at
    once, and each later one before the previous one is copied back: the host's work
    (building the next chunk's rows, copying back, writing the store, and what the caller
    does meanwhile) overlaps the devices'."""

    def start(index: int):
        begin, end = layout.chunk_bounds(index)
        columns = member_columns(_padded(members.rows(begin, end), layout.chunk_size))
        running = compiled_chunk(arrays, _placed_rows(columns, statics.mesh), statics)
        if jax.process_count() == 1:
            # Each result starts its way to the host as soon as the chunk is done, while
            # the host still works (as `jax.device_get` does for several arrays).
            for array in jax.tree.leaves(running):
                array.copy_to_host_async()
        return index, begin, end, running

    def copied_back(index: int, begin: int, end: int, running):
        outputs, status = gather_to_host(running)
        outputs = host_outputs(outputs, layout.variables, layout.chunk_size, statics.mesh.size)
        outputs = {name: value[: end - begin] for name, value in outputs.items()}
        return index, begin, end, outputs, status[: end - begin]

    unfinished = np.flatnonzero(~finished).tolist()
    running = [start(index) for index in unfinished[:1]]  # now, not at the first `next`

    def chunks():
        for index in unfinished[1:]:
            running.append(start(index))
            yield copied_back(*running.pop(0))
        yield from (copied_back(*chunk) for chunk in running)

    return chunks()


@contextlib.contextmanager
def _model_checks():
    """Runs chunks so that a check in the model that fails (`equinox.error_if`) raises
    `equinox.EquinoxRuntimeError` with its message, as under `equinox.filter_jit`: the
    chunk function is a plain `jax.jit`, under which JAX would log the check's traceback
    and raise its own runtime error around the message."""
    callback_logger = logging.getLogger("jax._src.callback")
    callback_logger.addFilter(_not_a_failed_callback)
    try:
        yield
    except jax.errors.JaxRuntimeError as error:
        text = str(error)
        if EQUINOX_ERROR not in text:
            raise
        raise eqx.EquinoxRuntimeError(text.split(EQUINOX_ERROR, 1)[1].splitlines()[0]) from None
    finally:
        callback_logger.removeFilter(_not_a_failed_callback)


def _not_a_failed_callback(record: logging.LogRecord) -> bool:
    return record.getMessage() != "jax.pure_callback failed"


def _check_paths(model, paths, key, keep_paths: bool, store) -> bool:
    """Whether `model` is stochastic, after checking that `paths`, `key`, `keep_paths` and
    `store` fit it."""
    name = type(model).__name__
    if not is_stochastic(model):
        if paths is not None or keep_paths:
            raise ValueError(
                f"paths and keep_paths are for stochastic models; {name} is deterministic: "
                "leave them out."
            )
        return False
    if paths is None or key is None:
        raise ValueError(
            f"{name} is stochastic: pass paths=... (how many paths per parameter point) and "
            "key=jax.random.key(seed) (path p draws from jax.random.fold_in(key, p))."
        )
    if store is not None and not keep_paths:
        raise ValueError(
            "store keeps every member, but without keep_paths=True the paths are reduced "
            "to statistics in memory: pass keep_paths=True to store the paths, or leave "
            "store out."
        )
    return True


def _check_results_fit(num_members: int, specs, stochastic: bool) -> None:
    """Refuses a sweep whose kept results (every member's observables) cannot fit in the
    host's memory, before any member runs."""
    member_bytes = sum(math.prod(spec.shape) * spec.dtype.itemsize for spec in specs.values())
    fix = "keep_paths=False streams statistics instead, " if stochastic else ""
    check_fits(
        f"{num_members:.3g} members' results",
        num_members * member_bytes,
        f"{fix}an observable that keeps less (such as the final state) or fewer members fit",
        device=False,
    )


def _checked_mesh(mesh: Mesh | None) -> Mesh:
    if mesh is None:
        return member_mesh()
    if not isinstance(mesh, Mesh) or mesh.axis_names != (MEMBER_AXIS,):
        raise ValueError(
            f"mesh must be a one-axis jax.sharding.Mesh with axis {MEMBER_AXIS!r}; build one "
            "with simlab.parallel.member_mesh(devices)."
        )
    return mesh


def _chunk_size(chunk_size, members: Members | PathMembers, specs, y0, ts, mesh: Mesh) -> int:
    """The members per chunk: given or sized to memory, a multiple of the device count."""
    if chunk_size is None:
        largest = default_chunk_size(
            specs,
            ts.shape[0],
            y0.size,
            y0.dtype.itemsize,
            largest_chunk_size(mesh),
            chunk_memory_budget(mesh),
        )
        return balanced_chunk_size(members.num_members, largest, mesh.size)
    return -(-chunk_size // mesh.size) * mesh.size


def _padded(rows: np.ndarray, chunk_size: int) -> np.ndarray:
    """Fills a short last chunk with copies of its first member (valid values)."""
    missing = chunk_size - rows.shape[0]
    return np.concatenate([rows, np.repeat(rows[:1], missing, axis=0)]) if missing else rows


def _placed_rows(columns: tuple[np.ndarray, ...], mesh: Mesh):
    """A chunk's columns of swept values for the chunk function: in one process the host
    arrays themselves, which the compiled function splits over `mesh` on the way in
    (faster than a transfer of its own); under `jax.distributed` each process's share,
    laid on its devices."""
    if jax.process_count() == 1:
        return columns
    return tuple(shard_rows(column, mesh) for column in columns)


def _replicated(mesh: Mesh, arrays: list) -> list:
    """`arrays` ready for the chunk function on `mesh`.

    In one process, arrays not committed to a device (as `jnp.asarray` makes them) and
    host arrays are left as they are: the compiled chunk function places those itself,
    faster than a transfer of its own (about 0.1 ms per sweep call). Committed arrays
    are copied to every device of `mesh`, unless they already are."""
    target = _replicated_sharding(mesh)
    to_place = [i for i, array in enumerate(arrays) if _needs_placing(array, target)]
    if not to_place:  # even an empty transfer costs about 0.1 ms
        return arrays
    placed = replicate([arrays[i] for i in to_place], mesh)
    arrays = list(arrays)
    for i, array in zip(to_place, placed, strict=True):
        arrays[i] = array
    return arrays


@functools.lru_cache(maxsize=16)
def _replicated_sharding(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def _needs_placing(array: Any, target: NamedSharding) -> bool:
    if jax.process_count() > 1:  # every process must hand over global arrays
        return True
    return isinstance(array, jax.Array) and array.committed and array.sharding != target


def _trajectory_labels(model, y0, ts, observable) -> tuple[tuple[str, ...], dict]:
    """The dims of the whole trajectory (kept when `observable` is None; else `()`) and
    their coordinates: `time` and `component` (the state's names), or for a field on a
    grid `time`, its channel axis if any, and the grid's axes `x`, `y`, `z` at the cell
    centres."""
    if observable is not None:
        return (), {}
    coords = {"time": ("time", np.asarray(ts))}
    grid = getattr(model, "grid", None)
    if isinstance(grid, Grid):
        axes = SPATIAL_DIMS[: grid.ndim]
        centres = zip(axes, grid.coordinates(), strict=True)
        coords |= {axis: (axis, np.asarray(x)) for axis, x in centres}
        return ("time", *_numbered("channel", y0.ndim - grid.ndim), *axes), coords
    names = np.asarray(model.state_names)
    if y0.ndim == 1 and names.size == y0.size:
        coords["component"] = ("component", names)
    return ("time", *_numbered("component", y0.ndim)), coords


def _numbered(name: str, count: int) -> tuple[str, ...]:
    """`count` dims named `name`, numbered where there are several."""
    return (name,) if count == 1 else tuple(f"{name}_{i}" for i in range(count))


def _units(model: AbstractModel, names) -> dict[str, str]:
    units = model.parameter_units()
    return {name: units.get(name, "") for name in names}


def _is_writer() -> bool:
    return jax.process_index() == 0


def _open_store(store, layout: StoreLayout, identity, provenance) -> SweepStore | None:
    """Process 0 opens (or creates) the store; the others learn whether that worked."""
    opened, error = None, None
    if _is_writer():
        try:
            opened = SweepStore.open(store, layout, identity=identity, attrs=provenance)
        except (ValueError, OSError) as caught:
            error = caught
    if jax.process_count() > 1:
        refused = multihost_utils.broadcast_one_to_all(np.asarray(error is not None))
        if refused and error is None:
            raise ValueError(f"process 0 could not open the sweep store {str(store)!r}.")
    if error is not None:
        raise error
    return opened


def _finished_chunks(sweep_store: SweepStore | None, layout: StoreLayout) -> np.ndarray:
    if jax.process_count() == 1:
        if sweep_store is None:
            return np.zeros(layout.num_chunks, bool)
        return sweep_store.finished_chunks()
    local = (
        sweep_store.finished_chunks()
        if sweep_store is not None
        else np.zeros(layout.num_chunks, bool)
    )
    return np.asarray(multihost_utils.broadcast_one_to_all(local), bool)


def _read_back(sweep_store: SweepStore | None, store, layout: StoreLayout):
    """The whole store, including chunks finished by an earlier run."""
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices("simlab.sweep: store complete")
    if sweep_store is None:  # not process 0: open what process 0 wrote
        sweep_store = SweepStore(pathlib.Path(store), layout)
    return sweep_store.read()


class _NoProgressBar:
    """What `_progress_bar` gives when no bar is shown: a disabled `tqdm` bar still costs
    about 0.1 ms to build."""

    def update(self, members: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar(progress: bool | None, layout: StoreLayout, finished: np.ndarray):
    if not (show_progress(progress) and _is_writer()):
        return _NoProgressBar()
    chunks = np.flatnonzero(finished).tolist()
    already = sum(end - begin for begin, end in map(layout.chunk_bounds, chunks))
    return tqdm(
        total=layout.num_members,
        initial=already,
        unit="member",
        desc=f"sweep ({layout.num_chunks} chunks of {layout.chunk_size})",
    )


def _observable_identity(
    observable, name: str | None, trajectory: Trajectory, *, digest: bool
) -> str:
    """What identifies the observable: the user's name for it, or its qualified name and,
    with `digest` (a store, which must tell definitions apart), a digest of what it
    computes from `trajectory` (shapes only). Tracing for the digest takes longer than a
    small sweep itself, so a sweep without a store records the name alone."""
    if name is not None:
        return f"name:{name}"
    if observable is None:
        return "trajectory"
    return function_identity(observable, trajectory) if digest else qualified_name(observable)


def _identity(
    model, y0, ts, members, layout: StoreLayout, settings, observable_id, event, key_data
):
    """Everything that determines the results: a store is resumed only if this matches."""
    unswept = {
        name: np.asarray(value).tolist()
        for name, value in model.parameters().items()
        if name not in members.names
    }
    t, y = abstract_time_and_state(ts, y0)
    identity = {
        "model": model_identity(model, t, y),
        "unswept_parameters": unswept,
        "y0": array_digest(y0),
        "ts": array_digest(ts),
        "mode": members.mode,
        "swept_names": list(members.names),
        "swept_values": array_digest(members.values),
        "observable": observable_id,
        "outputs": {name: [list(s.shape), s.dtype.str] for name, s in layout.variables.items()},
        "settings": settings.record(),
        "chunk_size": layout.chunk_size,
    }
    # Only with an event or a key, so that stores of sweeps without them keep their identity.
    if key_data is not None:
        identity["key"] = array_digest(np.asarray(key_data))
    return identity if event is None else {**identity, "event": event_identity(event, model, t, y)}


def _model_record(model: AbstractModel) -> str:
    """The model's class and parameter values, e.g. `Lorenz(sigma=10, rho=28, beta=2.667)`."""

    def describe(value):
        value = np.asarray(value)
        return display.number(value.item()) if value.size == 1 else f"array{value.shape}"

    # By name rather than `model.parameters()`: calling a method of an Equinox module first
    # builds a bound-method module, which costs more than the rest of this record.
    arguments = ", ".join(
        f"{name}={describe(getattr(model, name))}" for name in model.parameter_names()
    )
    return f"{type(model).__name__}({arguments})"


def _provenance(
    model, mesh: Mesh, members: Members | PathMembers, settings, observable_id, event
) -> dict[str, Any]:
    return simlab_provenance(
        mesh.devices.flat,
        num_processes=jax.process_count(),
        model=_model_record(model),
        mode=members.mode,
        swept=list(members.names),
        observable=observable_id,
        solver_settings=_settings_json(settings),
        **({} if event is None else {"event": event_name(event)}),
    )


@functools.lru_cache(maxsize=64)
def _settings_json(settings: SolveOptions) -> str:
    """The settings' record as JSON, encoded once per settings (they are hashable: the
    compiled chunk function is cached on them too)."""
    return json.dumps(settings.record())
