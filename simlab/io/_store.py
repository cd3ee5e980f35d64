"""The sweep store: a zarr group that xarray opens directly, filled one chunk at a time.

Crash safety rests on three facts. Every file appears whole or not at all (zarr's local
store writes to a temporary name and renames; we add `fsync`, so a finished write survives
a power cut too). Within a chunk, the `status` block is written last, so a chunk whose
status is present is complete. And a new store is built in a temporary folder and renamed
into place, so a store either exists with its identity or not at all.
"""

import asyncio
import dataclasses
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

from .._results import status_codes
from ._atomic import fsync_file_and_folder

STATUS = "status"
NOT_COMPUTED = -1
IDENTITY_ATTR = "simlab_sweep_identity"


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


class SweepStore:
    """A sweep's results on disk; open it with [`SweepStore.open`][simlab.io.SweepStore.open].

    On disk it is a zarr (v3) group: one array per observable with a leading `member`
    dimension, the swept values as `member` coordinates, `status` (the
    [`simlab.RESULTS`][] code of each member, `-1` while not yet computed), and the
    sweep's identity and provenance as attributes. `xarray.open_zarr(path)` reads it.
    """

    def __init__(self, path: pathlib.Path, layout: StoreLayout):
        self.path = path
        self.layout = layout
        self._group = zarr.open_group(_DurableLocalStore(path), mode="r+", use_consolidated=False)

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
        """Boolean per chunk: has it been written completely?"""
        status = self._group[STATUS][:]
        return np.array(
            [
                np.all(status[slice(*self.layout.chunk_bounds(i))] != NOT_COMPUTED)
                for i in range(self.layout.num_chunks)
            ]
        )

    def write_chunk(self, index: int, outputs: dict[str, np.ndarray], status: np.ndarray) -> None:
        """Writes chunk `index` (observables first, `status` last: the completion mark)."""
        region = slice(*self.layout.chunk_bounds(index))
        for name in self.layout.variables:
            self._group[name][region] = outputs[name]
        self._group[STATUS][region] = status

    def read(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """All observables and the status, as NumPy arrays with a leading member axis."""
        outputs = {name: self._group[name][:] for name in self.layout.variables}
        return outputs, self._group[STATUS][:]

    def attrs(self) -> dict[str, Any]:
        return dict(self._group.attrs)


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


def _as_json(value: Any) -> Any:
    """Round-trips through JSON, so that what we compare equals what was stored."""
    return json.loads(json.dumps(value))
