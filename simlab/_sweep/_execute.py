"""One compiled function runs a chunk of members: vmapped per device, shard_map over devices."""

import dataclasses
import functools as ft
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.dtypes import canonicalize_dtype
from jax.sharding import Mesh, PartitionSpec

from .._options import SolveOptions
from .._results import Trajectory, status_code
from .._simulate import simulate
from ..integrate._events import Event
from ..integrate._registry import counts_steps_when_traced
from ..io import VariableSpec
from ..models._base import AbstractModel
from ..parallel import shard_map_over_members
from ..parallel._mesh import MEMBER_AXIS
from ._members import PATH

TRAJECTORY = "trajectory"
RESERVED_NAMES = ("status", "member")
# A chunk's outputs and the solver's working copies should fit comfortably in memory
# (with one more chunk's outputs: the next chunk starts before they are copied back).
MEMORY_BUDGET_BYTES = 256 * 2**20
MAX_CHUNK_SIZE = 8192
# An accelerator's loop costs about as much per iteration at 8192 members as at 65,536,
# and each chunk runs as many iterations as its slowest member: 65,536 adaptive Van der
# Pol members in chunks of 8192 took 2.5 times as long as one vmapped solve on a TPU v5e.
# There a chunk is as wide as the memory budget allows, up to this many per device.
MAX_ACCELERATOR_CHUNK_SIZE = 2**18
# On a CPU a vmapped solve costs in proportion to its width for as long as its slowest
# member runs, so a chunk's members run in groups of at most this many, one group after
# another: a group of neighbouring members (which take similar steps in a grid) stops
# when its own slowest does. Narrower groups would pay the loop's fixed cost per step
# more often. An accelerator runs the whole width at once, so there a chunk is one group,
# and so are the paths of a stochastic model: their draws are wide operations that
# XLA:CPU spreads over the cores, which narrow groups lose (8192 Ornstein-Uhlenbeck paths
# took 1.4-1.9 times as long in groups of 256 on two cores).
CPU_GROUP_SIZE = 256


def member_outputs(
    model: AbstractModel,
    y0: jax.Array,
    ts: jax.Array | np.ndarray,
    values: jax.Array | tuple[jax.Array, ...],
    *,
    names: tuple[str, ...],
    observable: Callable | None,
    settings: SolveOptions,
    event: Event | Callable[[AbstractModel], Event] | None = None,
    key_data: jax.Array | None = None,
) -> tuple[dict[str, jax.Array], jax.Array]:
    """Simulates one member; returns its observables (NaN where it failed) and status code.

    `values` holds the member's value of each of `names`, as an array or a tuple.
    `event` is an `Event`, or a function of the member's model that builds one (for a
    condition that reads the swept parameters). A stochastic model's member draws its path
    from `fold_in(key, path)`, `key` being `key_data` wrapped and `path` its `"path"` value."""
    trajectory = _member_trajectory(
        model, y0, ts, values, key_data, names=names, settings=settings, event=event
    )
    outputs = _observe(trajectory, observable)
    failed = ~trajectory.succeeded
    outputs = {name: jnp.where(failed, jnp.nan, value) for name, value in outputs.items()}
    return outputs, status_code(trajectory.result).astype(jnp.int16)


def _member_trajectory(model, y0, ts, values, key_data, *, names, settings, event) -> Trajectory:
    model, y0 = _with_values(model, y0, names, values)
    member_event = event(model) if callable(event) else event
    key = None if key_data is None else path_key(key_data, values[names.index(PATH)])
    return simulate(model, y0, ts, throw=False, options=settings, event=member_event, key=key)


def path_key(key_data: jax.Array, path: jax.Array) -> jax.Array:
    """The key of path number `path` (held as a float in the member's row)."""
    return jax.random.fold_in(jax.random.wrap_key_data(key_data), path.astype(jnp.uint32))


def _with_values(model, y0, names, values):
    parameters = set(model.parameter_names())
    swept = [(name, values[i]) for i, name in enumerate(names) if name in parameters]
    if swept:
        model = eqx.tree_at(
            lambda m: tuple(getattr(m, name) for name, _ in swept),
            model,
            tuple(value.astype(getattr(model, name).dtype) for name, value in swept),
        )
    for i, name in enumerate(names):
        if name not in parameters and name != PATH:
            y0 = y0.at[model.state_names.index(name)].set(values[i].astype(y0.dtype))
    return model, y0


def _observe(trajectory, observable):
    if observable is None:
        return {TRAJECTORY: trajectory.ys}
    outputs = observable(trajectory)
    if not isinstance(outputs, Mapping):
        raise TypeError(
            "observable must return a dict of named arrays, e.g. "
            "lambda trajectory: {'final_x': trajectory.ys[-1, 0]}; got "
            f"{type(outputs).__name__}."
        )
    checked = {}
    for name, value in outputs.items():
        if not isinstance(name, str) or not name.isidentifier() or name in RESERVED_NAMES:
            raise ValueError(
                f"observable output names must be identifiers other than {RESERVED_NAMES}; "
                f"got {name!r}."
            )
        value = jnp.asarray(value)
        if not jnp.issubdtype(value.dtype, jnp.floating):
            raise TypeError(
                f"observable output {name!r} has dtype {value.dtype}; outputs must be floating "
                "point so that failed members can be masked with NaN. Use .astype(float)."
            )
        checked[name] = value
    return checked


class ChunkStatics(NamedTuple):
    """What a compiled chunk function is specialised on (its cache key): the structure and
    non-array leaves (`None` where an array goes) of the problem, observable and event, the
    mesh, the swept names and the solve settings."""

    treedef: jax.tree_util.PyTreeDef
    leaves: tuple
    mesh: Mesh
    names: tuple[str, ...]
    settings: SolveOptions


@dataclasses.dataclass(frozen=True)
class _ConcreteTimes:
    """Save times held in `ChunkStatics` rather than traced, for an integrator that counts
    its steps when the solve is traced (`counts_steps_when_traced`): a sweep over other
    times compiles anew."""

    values: tuple[float, ...]
    dtype: str

    def array(self) -> np.ndarray:
        return np.asarray(self.values, self.dtype)


def chunk_program(model, y0, ts, *, mesh: Mesh, names, observable, settings, event, key_data=None):
    """The arguments of `compiled_chunk` that every chunk of a sweep shares: the arrays of
    the problem (an observable or event may hold some too), and `ChunkStatics`. `key_data`
    is the sweep's key as `jax.random.key_data` for a stochastic model."""
    if counts_steps_when_traced(settings.integrator):
        ts = _ConcreteTimes(tuple(np.asarray(ts).tolist()), str(np.asarray(ts).dtype))
    # One flatten: `None` is never a leaf, so it can mark where the arrays go.
    leaves, treedef = jax.tree.flatten((model, y0, ts, key_data, observable, event))
    arrays = [leaf for leaf in leaves if eqx.is_array(leaf)]
    static = tuple(None if eqx.is_array(leaf) else leaf for leaf in leaves)
    return arrays, ChunkStatics(treedef, static, mesh, names, settings)


def _problem(arrays: list, statics: ChunkStatics):
    """`(model, y0, ts, key_data, observable, event)` back from `chunk_program`'s arrays
    and statics."""
    remaining = iter(arrays)
    leaves = [next(remaining) if leaf is None else leaf for leaf in statics.leaves]
    model, y0, ts, key_data, observable, event = jax.tree.unflatten(statics.treedef, leaves)
    ts = ts.array() if isinstance(ts, _ConcreteTimes) else ts
    return model, y0, ts, key_data, observable, event


@ft.partial(jax.jit, static_argnums=2)
def compiled_chunk(arrays, values, statics: ChunkStatics):
    """Runs a chunk of members; compiled once per shape and `statics`.

    `values` is the chunk's table of swept values, one row per member, or its columns
    (`member_columns`): a tuple of 1-D arrays, one per swept name, which each member reads
    as a tuple of its values (no table is built on the device). Returns `(outputs,
    status)`: each output flattened to one axis with the members last, shard by shard
    (`host_outputs` gives back the shapes), and the status codes.

    The columns and the flat outputs are what an accelerator transfers fastest: a TPU lays
    an array out in tiles of 128 along its last axis, so a table of one column, or an
    output of two values a member, would be held and moved padded 128 or 64 times over;
    1-D arrays are not padded so. The members go last because a batched solve holds them
    there: flattening member by member instead interleaves the components, a padded
    transpose (65,536 adaptive Van der Pol solves took 8% longer so on a TPU).

    A plain `jax.jit`: a call returns as soon as the chunk is dispatched, so the caller's
    own work overlaps the chunk's (`equinox.filter_jit` waits for the result)."""

    def run_shard(arrays, values):
        model, y0, ts, key_data, observable, event = _problem(arrays, statics)
        member = ft.partial(
            member_outputs,
            model,
            y0,
            ts,
            names=statics.names,
            observable=observable,
            settings=statics.settings,
            event=event,
            key_data=key_data,
        )
        group_size = member_group_size(statics.mesh, stochastic=key_data is not None)
        outputs, status = vmapped_in_groups(member, values, group_size)
        return {
            name: jnp.moveaxis(value, 0, -1).reshape(-1) for name, value in outputs.items()
        }, status

    sharded = shard_map_over_members(
        run_shard,
        statics.mesh,
        in_specs=(PartitionSpec(), PartitionSpec(MEMBER_AXIS)),
        out_specs=PartitionSpec(MEMBER_AXIS),
    )
    return sharded(arrays, values)


def member_columns(rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """A table of swept values (one row per member) as `compiled_chunk` takes it fastest:
    one contiguous 1-D array per swept name."""
    return tuple(np.ascontiguousarray(rows.T))


def host_outputs(
    outputs: Mapping[str, np.ndarray],
    specs: Mapping[str, VariableSpec],
    num_members: int,
    num_shards: int = 1,
) -> dict[str, np.ndarray]:
    """`compiled_chunk`'s flat outputs for `num_members` members on `num_shards` devices,
    copied to the host, in their shapes: each `(num_members, *spec.shape)` (from one
    device a view, not a copy)."""

    def members_first(value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        shards = value.reshape(num_shards, *shape, num_members // num_shards)
        return np.moveaxis(shards, -1, 1).reshape(num_members, *shape)

    return {name: members_first(value, specs[name].shape) for name, value in outputs.items()}


def member_group_size(mesh: Mesh, *, stochastic: bool) -> int | None:
    """How many members of a chunk run at once on each device of `mesh` (`None`: all)."""
    on_cpu = mesh.devices.flat[0].platform == "cpu"
    return CPU_GROUP_SIZE if on_cpu and not stochastic else None


def vmapped_in_groups(fn: Callable, rows: Any, group_size: int | None):
    """`jax.vmap(fn)(rows)`, computed in equal groups of at most `group_size` rows one
    after another (`None`: one group). `rows` is an array or a pytree of arrays with the
    same first axis. The rows are padded with copies of the first to a multiple of the
    group count, and the padding dropped."""
    num_rows = jax.tree.leaves(rows)[0].shape[0]
    num_groups, size = group_shape(num_rows, group_size)
    if num_groups == 1:
        return jax.vmap(fn)(rows)

    def grouped(x):
        padding = jnp.broadcast_to(x[:1], (num_groups * size - num_rows, *x.shape[1:]))
        return jnp.concatenate([x, padding]).reshape(num_groups, size, *x.shape[1:])

    outputs = jax.lax.map(jax.vmap(fn), jax.tree.map(grouped, rows))
    return jax.tree.map(lambda x: x.reshape(num_groups * size, *x.shape[2:])[:num_rows], outputs)


def group_shape(num_rows: int, group_size: int | None) -> tuple[int, int]:
    """How `vmapped_in_groups` splits `num_rows` rows: `(groups, rows per group)`."""
    num_groups = 1 if group_size is None else -(-num_rows // group_size)
    return num_groups, -(-num_rows // num_groups)


class _Abstract(NamedTuple):
    """An array's shape and dtype, in the cache key of `member_shapes`."""

    shape: tuple[int, ...]
    dtype: np.dtype


def member_shapes(
    arrays: list, statics: ChunkStatics, values_dtype
) -> tuple[Trajectory, dict[str, VariableSpec]]:
    """The shapes and dtypes of one member's trajectory (its arrays are
    `jax.ShapeDtypeStruct`s) and of each of its observables, for the sweep that
    `chunk_program` gave `arrays` and `statics`, found without running it.

    Tracing a solve takes longer than running a small chunk of it, so the answer is cached
    on the shapes and dtypes of `arrays` and on `statics`.
    """
    # Cheaper to build on every call than `jax.ShapeDtypeStruct`s, which only a trace needs.
    abstract = tuple(_Abstract(np.shape(a), canonicalize_dtype(a.dtype)) for a in arrays)
    key = (abstract, statics, np.dtype(values_dtype))
    try:
        hash(key)
    except TypeError:  # an unhashable static leaf: trace every time
        return _traced_member_shapes(*key)
    return _cached_member_shapes(*key)


def _traced_member_shapes(abstract, statics: ChunkStatics, values_dtype):
    def member(arrays, row):
        model, y0, ts, key_data, observable, event = _problem(arrays, statics)
        trajectory = _member_trajectory(
            model,
            y0,
            ts,
            row,
            key_data,
            names=statics.names,
            settings=statics.settings,
            event=event,
        )
        return trajectory, _observe(trajectory, observable)

    arrays = [jax.ShapeDtypeStruct(*array) for array in abstract]
    row = jax.ShapeDtypeStruct((len(statics.names),), values_dtype)
    trajectory, outputs = jax.eval_shape(member, arrays, row)
    return trajectory, {
        name: VariableSpec(
            shape=tuple(out.shape),
            dtype=np.dtype(out.dtype),
            dims=tuple(f"{name}_dim_{i}" for i in range(out.ndim)),
        )
        for name, out in outputs.items()
    }


_cached_member_shapes = ft.lru_cache(maxsize=64)(_traced_member_shapes)


def default_chunk_size(
    specs: dict,
    num_times: int,
    state_size: int,
    itemsize: int,
    largest: int = MAX_CHUNK_SIZE,
    budget: int = MEMORY_BUDGET_BYTES,
) -> int:
    """As many members as fit `budget` bytes (outputs plus the solver's saved states), at
    most `largest`."""
    output_bytes = sum(math.prod(s.shape) * s.dtype.itemsize for s in specs.values())
    working_bytes = 2 * num_times * state_size * itemsize + 1024
    return max(1, min(largest, budget // (output_bytes + working_bytes)))


def balanced_chunk_size(num_members: int, largest: int, multiple: int) -> int:
    """The members per chunk for `num_members` in as few chunks of at most `largest` as
    can hold them, all about equal, as a multiple of `multiple` (the device count).

    A chunk costs as long as its slowest member on an accelerator, padding included: on a
    TPU v5e, 2**18 adaptive Van der Pol members in a chunk of 252,297 and one of 9,847
    padded to as many took 21.6 ms, twice as long as one vmapped solve (10.8 ms)."""
    num_chunks = -(-num_members // max(1, largest))
    size = -(-num_members // num_chunks)
    return -(-size // multiple) * multiple


def chunk_memory_budget(mesh: Mesh) -> int:
    """The bytes a chunk's outputs and working copies may take on `mesh`:
    `MEMORY_BUDGET_BYTES`, or on an accelerator a sixteenth of its devices' memory if that
    is more (the members' outputs are gathered to the host whatever the chunk size)."""
    device = mesh.devices.flat[0]
    if device.platform == "cpu":
        return MEMORY_BUDGET_BYTES
    return max(MEMORY_BUDGET_BYTES, _memory_limit(device) // 16 * mesh.size)


@ft.cache  # a device's memory does not change, and asking its runtime costs every sweep
def _memory_limit(device) -> int:
    """The bytes `device` can hold (0 where its runtime does not say)."""
    return (device.memory_stats() or {}).get("bytes_limit", 0)


def largest_chunk_size(mesh: Mesh) -> int:
    """The widest default chunk on `mesh`: `MAX_CHUNK_SIZE` on a CPU, else
    `MAX_ACCELERATOR_CHUNK_SIZE` per device."""
    if mesh.devices.flat[0].platform == "cpu":
        return MAX_CHUNK_SIZE
    return MAX_ACCELERATOR_CHUNK_SIZE * mesh.size
