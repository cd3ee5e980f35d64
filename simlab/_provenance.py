"""Provenance: what produced a result (versions, devices, platform, time), recorded with it."""

import datetime
import functools
import importlib.metadata
import platform
from collections.abc import Iterable
from typing import Any

import jax

from ._version import __version__


def provenance(devices: Iterable[jax.Device], **fields: Any) -> dict[str, Any]:
    """The record every simlab result carries, plus the caller's own `fields`.

    **Arguments:**

    - `devices`: the devices the computation ran on.
    - `**fields`: what the caller adds (e.g. the model, the experiment file); JSON values.

    **Returns:**

    A dict of JSON values: `simlab_version` (the installed version, or the source tree's
    own where simlab was never installed), `jax_version`, `python_version`, `platform`,
    `devices`, `created` (UTC, ISO 8601) and then `fields`.
    """
    return {
        **_software(),
        "devices": [str(device) for device in devices],
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        **fields,
    }


@functools.cache
def _software() -> dict[str, str]:
    # Reading the package metadata and the platform takes about a millisecond: once is
    # enough, as neither changes while the process runs.
    return {
        "simlab_version": simlab_version(),
        "jax_version": jax.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
    }


def simlab_version() -> str:
    """simlab's installed version, or the version written in the source tree
    (`simlab/_version.py`) where it runs from one that was never installed (no package
    metadata to read)."""
    try:
        return importlib.metadata.version("simlab")
    except importlib.metadata.PackageNotFoundError:
        return __version__
