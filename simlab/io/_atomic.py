"""Whole-file-or-nothing writes: a temporary name in the same folder, `fsync`, then rename."""

import os
import pathlib
import uuid
from collections.abc import Callable


def atomic_write(path: str | os.PathLike, write: Callable[[pathlib.Path], object]) -> pathlib.Path:
    """Writes the file at `path` whole or not at all.

    `write(temporary)` writes the content to `temporary`, a fresh hidden name in the same
    folder as `path` (so the final rename stays on one file system) with the same suffix
    (for writers that choose the format by suffix, such as Matplotlib's). The temporary file
    is flushed to disk (`fsync`) and renamed onto `path` with `os.replace`, which is atomic:
    a reader sees the old file or the new one, never a part. If `write` raises, the old file
    is left as it was and the temporary is removed.

    **Arguments:**

    - `path`: the file to write; its folder must exist.
    - `write`: a function of the temporary path that writes the whole content there.

    **Returns:**

    `path`, as a `pathlib.Path`.

    !!! example

        ```python
        atomic_write("notes.txt", lambda tmp: tmp.write_text("done\\n", encoding="utf-8"))
        ```
    """
    path = pathlib.Path(path)
    temporary = path.with_name(f".{path.stem}.tmp-{uuid.uuid4().hex[:8]}{path.suffix}")
    try:
        write(temporary)
        _fsync(temporary, os.O_RDONLY)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync(path.parent, os.O_RDONLY | os.O_DIRECTORY)  # makes the rename itself durable
    return path


def fsync_file_and_folder(path: pathlib.Path) -> None:
    """Flushes the file at `path` and the folder entry that names it to disk."""
    _fsync(path, os.O_RDONLY)
    _fsync(path.parent, os.O_RDONLY | os.O_DIRECTORY)


def _fsync(target: pathlib.Path, flags: int) -> None:
    descriptor = os.open(target, flags)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
