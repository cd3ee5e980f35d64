"""The sweep store: a zarr group that xarray opens directly, filled one chunk at a time.

Crash safety rests on three facts. Every file appears whole or not at all (zarr's local
store writes to a temporary name and renames; we add `fsync`, so a finished write survives
a power cut too). Within a chunk, the `status` block is written last, so a chunk whose
status is present is complete. And a new store is built in a temporary folder and renamed
into place, so a store either exists with its identity or not at all.

Damage after the fact is caught too: each chunk's blocks have a SHA-256 checksum (written
before the status block), so a deleted, truncated, edited or foreign chunk file is found
on resume (and recomputed) and on read (and reported with the file named); array metadata
that differs from the sweep's layout (an edited `shape` or `fill_value`) is refused.
"""

import asyncio
import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import uuid
import warnings
from typing import Any

import numpy as np
import zarr
from zarr.storage import LocalStore

from .._misc import warn_at_caller
from .._results import status_codes
from ._atomic import atomic_write, fsync_file_and_folder

STATUS = "status"
NOT_COMPUTED = -1
IDENTITY_ATTR = "simlab_sweep_identity"
CHECKSUMS = ".simlab-checksums"  # one small JSON file per finished chunk


class _DurableLocalStore(LocalStore):
    """zarr's `LocalStore` (atomic writes by rename), plus `fsync` of each file and folder."""

    async def set(self, key: str, value: Any) -> None:
        await super().set(key, value)
        await asyncio.to_thread(fsync_file_and_folder, self.root / key)


@dataclasses.dataclass(frozen=True)
class VariableSpec:
    """One observable: per-member `shape` and `dtype`, and names for its own axes."""

    shape: tuple[int, ...]
    dtype: np.dtype
    dims: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class StoreLayout:
    """What a sweep store holds: `num_members` rows, written `chunk_size` rows at a time.

    `member_coords` gives each swept quantity's value per member; `extra_coords` labels the
    observables' own axes (e.g. `time`); `units` maps coordinate names to units.
    """

    num_members: int
    chunk_size: int
    variables: dict[str, VariableSpec]
    member_coords: dict[str, np.ndarray]
    extra_coords: dict[str, tuple[str, np.ndarray]]
    units: dict[str, str]

    @property
    def num_chunks(self) -> int:
        return -(-self.num_members // self.chunk_size)

    def chunk_bounds(self, index: int) -> tuple[int, int]:
        start = index * self.chunk_size
        return start, min(start + self.chunk_size, self.num_members)


class DamagedStore(ValueError):
    """A sweep store with missing or damaged chunk files; `problems` names each file."""

    def __init__(self, path: pathlib.Path, problems: list[str]):
        self.path, self.problems = path, problems
        super().__init__(
            f"the sweep store {str(path)!r} has missing or damaged chunk files: "
            f"{'; '.join(problems)}. Rerun the sweep with the same store= to recompute them."
        )


class SweepStore:
    """A sweep's results on disk; open it with [`SweepStore.open`][simlab.io.SweepStore.open].

    On disk it is a zarr (v3) group: one array per observable with a leading `member`
    dimension, the swept values as `member` coordinates, `status` (the
    [`simlab.RESULTS`][] code of each member, `-1` while not yet computed), and the
    sweep's identity and provenance as attributes. `xarray.open_zarr(path)` reads it.
    """

    def __init__(self, path: pathlib.Path, layout: StoreLayout, *, read_only: bool = False):
        self.path = path
        self.layout = layout
        self._group = zarr.open_group(
            _DurableLocalStore(path, read_only=read_only),
            mode="r" if read_only else "r+",
            use_consolidated=False,
        )
        self._check_metadata()

    @classmethod
    def open_existing(cls, path: str | os.PathLike) -> "SweepStore":
        """Opens the store at `path` to read it, its layout read from its own metadata (the
        listing of its arrays consolidated when it was created, checked against each)."""
        path = pathlib.Path(path)
        group = zarr.open_group(LocalStore(path, read_only=True), mode="r", use_consolidated=True)
        return cls(path, _stored_layout(group), read_only=True)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        layout: StoreLayout,
        *,
        identity: dict[str, Any],
        attrs: dict[str, Any],
    ) -> "SweepStore":
        """Opens the store of this sweep at `path`, creating it if absent.

        An existing store is resumed only if its recorded `identity` (model, swept values,
        settings) equals this one; otherwise it is refused with a `ValueError` naming what
        differs, so results of two sweeps are never mixed.
        """
        path = pathlib.Path(path)
        identity = _as_json(identity)
        if path.exists():
            _check_identity(path, identity)
        else:
            _create(path, layout, identity=identity, attrs=_as_json(attrs))
        return cls(path, layout)

    def finished_chunks(self) -> np.ndarray:
        """Boolean per chunk: has it been written completely, and is it intact?

        A chunk whose files are missing, damaged or from another store is reported unfinished
        (so a resumed sweep recomputes it), with a warning naming the files.
        """
        finished, damaged = [], []
        for index in range(self.layout.num_chunks):
            _, status, problems = self._read_chunk(index)
            complete = status is not None and np.all(status != NOT_COMPUTED)
            finished.append(complete and not problems)
            if complete:  # an unfinished chunk is recomputed anyway: that is no damage
                damaged += problems
        if damaged:
            warn_at_caller(
                f"the sweep store {str(self.path)!r} has missing or damaged chunk files "
                f"({'; '.join(damaged)}); recomputing those chunks."
            )
        return np.array(finished, bool)

    def write_chunk(self, index: int, outputs: dict[str, np.ndarray], status: np.ndarray) -> None:
        """Writes chunk `index`: observables, their checksums, and `status` last (the
        completion mark)."""
        region = slice(*self.layout.chunk_bounds(index))
        blocks = {
            name: np.asarray(outputs[name], self.layout.variables[name].dtype)
            for name in self.layout.variables
        }
        blocks[STATUS] = np.asarray(status, np.int16)
        # zarr skips a chunk equal to the fill value, and NaN is the fill: a chunk of failed
        # members would be missing from disk and read as never computed.
        with zarr.config.set({"array.write_empty_chunks": True}):
            for name in self.layout.variables:
                self._group[name][region] = blocks[name]
        checksums = {name: _checksum(block) for name, block in blocks.items()}
        folder = self.path / CHECKSUMS
        folder.mkdir(exist_ok=True)
        atomic_write(
            folder / f"{index}.json",
            lambda temporary: temporary.write_text(json.dumps(checksums), encoding="utf-8"),
        )
        self._group[STATUS][region] = blocks[STATUS]

    def read(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """All observables and the status, as NumPy arrays with a leading member axis.

        Raises a `ValueError` naming the files of any chunk that is missing or damaged.
        """
        outputs = {
            name: np.full((self.layout.num_members, *spec.shape), np.nan, spec.dtype)
            for name, spec in self.layout.variables.items()
        }
        status = np.full(self.layout.num_members, NOT_COMPUTED, np.int16)
        damaged = []
        for index in range(self.layout.num_chunks):
            chunk_outputs, chunk_status, problems = self._read_chunk(index)
            complete = chunk_status is not None and np.all(chunk_status != NOT_COMPUTED)
            if problems and complete:
                damaged += problems
                continue
            region = slice(*self.layout.chunk_bounds(index))
            for name, block in chunk_outputs.items():
                outputs[name][region] = block
            if chunk_status is not None:
                status[region] = chunk_status
            if problems and chunk_status is None:
                damaged += problems
        if damaged:
            raise DamagedStore(self.path, damaged)
        return outputs, status

    def _read_chunk(self, index: int):
        """`(outputs, status, problems)` of chunk `index`; `problems` lists each block that is
        unreadable or does not match its recorded checksum, by file."""
        region = slice(*self.layout.chunk_bounds(index))
        try:
            recorded = json.loads((self.path / CHECKSUMS / f"{index}.json").read_text("utf-8"))
        except (OSError, ValueError):
            recorded = {}
        blocks, problems = {}, []
        for name in [*self.layout.variables, STATUS]:
            array = self._group[name]
            key = array.metadata.encode_chunk_key((index,) + (0,) * (array.ndim - 1))
            file = self.path / name / key
            try:
                block = array[region]
            except Exception as error:  # a truncated or garbled file: zarr's codec fails
                problems.append(f"{file} is unreadable ({type(error).__name__})")
                continue
            blocks[name] = block
            if not file.is_file():
                problems.append(f"{file} is missing")
            elif recorded.get(name) != _checksum(block):
                problems.append(f"{file} does not match its checksum")
        status = blocks.pop(STATUS, None)
        return blocks, status, problems

    def _check_metadata(self) -> None:
        """Refuses array metadata that differs from the layout (e.g. an edited `shape`)."""
        layout = self.layout
        expected = {
            name: (
                (layout.num_members, *spec.shape),
                (layout.chunk_size, *spec.shape),
                np.dtype(spec.dtype),
                np.nan,
            )
            for name, spec in layout.variables.items()
        }
        expected[STATUS] = (
            (layout.num_members,),
            (layout.chunk_size,),
            np.dtype(np.int16),
            NOT_COMPUTED,
        )
        for name, (shape, chunks, dtype, fill) in expected.items():
            try:
                array = self._group[name]
                found = (tuple(array.shape), tuple(array.chunks), np.dtype(array.dtype))
                fill_ok = bool(
                    np.isnan(array.fill_value) if np.isnan(fill) else array.fill_value == fill
                )
            except (KeyError, TypeError, ValueError):
                found, fill_ok = None, False
            if found != (shape, chunks, dtype) or not fill_ok:
                raise ValueError(
                    f"the metadata {str(self.path / name / 'zarr.json')!r} does not match this "
                    f"sweep (expected shape {shape}, chunks {chunks}, dtype {dtype}, fill_value "
                    f"{fill}); the store was edited or damaged. Pass store= a new path."
                )

    def attrs(self) -> dict[str, Any]:
        return dict(self._group.attrs)


def _stored_layout(group: zarr.Group) -> StoreLayout:
    """The layout a store was written with, read from its arrays' metadata: the observables
    carry a `coordinates` attribute, the swept values are the other `member` arrays."""
    status = group[STATUS]
    variables, member_coords, extra_coords, units = {}, {}, {}, {}
    for name, array in group.arrays():
        dims = tuple(array.metadata.dimension_names or ())
        if name == STATUS:
            continue
        if "coordinates" in array.attrs:
            variables[name] = VariableSpec(tuple(array.shape[1:]), np.dtype(array.dtype), dims[1:])
        elif dims == ("member",):
            member_coords[name] = array[:]
            units[name] = array.attrs.get("units", "")
        else:
            extra_coords[name] = (dims[0], array[:])
    return StoreLayout(
        num_members=status.shape[0],
        chunk_size=status.chunks[0],
        variables=variables,
        member_coords=member_coords,
        extra_coords=extra_coords,
        units=units,
    )


def _create(path, layout: StoreLayout, *, identity, attrs) -> None:
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = parent / f".{path.name}.{uuid.uuid4().hex}.partial"
        _write_empty_store(staging, layout, attrs={**attrs, IDENTITY_ATTR: identity})
    except OSError as error:
        raise ValueError(
            f"cannot create the sweep store at {str(path)!r} ({error.strerror or error}); "
            "pass store= a path in a writable folder."
        ) from error
    try:
        os.rename(staging, path)  # atomic: the store appears complete or not at all
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not path.exists():
            raise
        _check_identity(path, identity)  # another process created it first


def _write_empty_store(staging: pathlib.Path, layout: StoreLayout, *, attrs) -> None:
    store = _DurableLocalStore(staging)
    group = zarr.open_group(store, mode="w", attributes=attrs)
    member_dims = ("member",)
    coordinate_names = " ".join(layout.member_coords)
    for name, values in layout.member_coords.items():
        group.create_array(
            name,
            data=np.asarray(values),
            chunks=(layout.num_members,),
            dimension_names=member_dims,
            attributes={"units": layout.units.get(name, "")},
        )
    for name, (dim, values) in layout.extra_coords.items():
        group.create_array(name, data=np.asarray(values), dimension_names=(dim,))
    for name, spec in layout.variables.items():
        group.create_array(
            name,
            shape=(layout.num_members, *spec.shape),
            chunks=(layout.chunk_size, *spec.shape),
            dtype=spec.dtype,
            fill_value=np.nan,
            dimension_names=member_dims + spec.dims,
            attributes={"coordinates": coordinate_names},
        )
    group.create_array(
        STATUS,
        shape=(layout.num_members,),
        chunks=(layout.chunk_size,),
        dtype=np.int16,
        fill_value=NOT_COMPUTED,
        dimension_names=member_dims,
        attributes={"coordinates": coordinate_names, **status_flag_attrs()},
    )
    with warnings.catch_warnings():
        # Consolidated metadata is a zarr-python extension to v3; xarray reads it, saving a
        # listing of the folder on every open.
        warnings.filterwarnings("ignore", "Consolidated metadata", UserWarning)
        zarr.consolidate_metadata(store)


def status_flag_attrs() -> dict[str, Any]:
    """CF-style labels of the status codes (`flag_values`, `flag_meanings`)."""
    codes = status_codes()
    return {
        "flag_values": [NOT_COMPUTED, *codes.values()],
        "flag_meanings": " ".join(["not_computed", *codes]),
        "long_name": "solver status per member (0: successful)",
    }


def _check_identity(path: pathlib.Path, identity: dict[str, Any]) -> None:
    recorded = _recorded_identity(path)
    if recorded is None:
        raise ValueError(
            f"{str(path)!r} exists but is not a simlab sweep store; pass store= a new path "
            "(or delete that one)."
        )
    differing = sorted(
        key for key in identity.keys() | recorded.keys() if identity.get(key) != recorded.get(key)
    )
    if differing:
        raise ValueError(
            f"the store at {str(path)!r} belongs to a different sweep (differs in: "
            f"{', '.join(differing)}); its results cannot be mixed with this one's. Pass "
            "store= a new path, or rerun the original sweep to resume it."
        )


def _recorded_identity(path: pathlib.Path) -> dict[str, Any] | None:
    metadata = path / "zarr.json"
    if not metadata.is_file():
        return None
    try:
        attributes = json.loads(metadata.read_text()).get("attributes", {})
    except (OSError, ValueError):
        return None
    return attributes.get(IDENTITY_ATTR)


def _checksum(block: np.ndarray) -> str:
    block = np.ascontiguousarray(block)
    header = str((block.shape, block.dtype.str)).encode()
    return hashlib.sha256(header + block.tobytes()).hexdigest()


def _as_json(value: Any) -> Any:
    """Round-trips through JSON, so that what we compare equals what was stored."""
    return json.loads(json.dumps(value))
