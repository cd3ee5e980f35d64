"""The error every experiment problem raises, and the reader of typed TOML values behind it."""

import math
import pathlib
import re
from typing import Any

FILE_STEM = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
# File systems allow 255 bytes per name; a figure's files and their temporaries add a suffix.
MAX_FILE_STEM = 100


class ExperimentError(ValueError):
    """An experiment file that cannot be run as written; the message names key and fix."""


class Checker:
    """Reads typed values out of the TOML table, raising errors that name file and key."""

    def __init__(self, path: pathlib.Path):
        self.path = path

    def fail(self, key: str, problem: str) -> ExperimentError:
        return ExperimentError(f"{self.path}: [{key}] {problem}")

    def table(self, parent: dict, key: str, where: str, *, required: bool = True) -> dict | None:
        if key not in parent:
            if required:
                raise self.fail(where, f"is missing; add a [{where}] table.")
            return None
        value = parent[key]
        if not isinstance(value, dict):
            raise self.fail(where, f"must be a table; got {type(value).__name__} {value!r}.")
        return value

    def keys(self, table: dict, where: str, allowed: tuple[str, ...]) -> None:
        for key in table:
            if key not in allowed:
                raise self.fail(
                    f"{where}.{key}" if where else key,
                    f"is not a known key; the keys allowed here are {list(allowed)}.",
                )

    def number(self, table: dict, key: str, where: str, *, default: Any = ..., positive=False):
        if key not in table:
            if default is ...:
                raise self.fail(f"{where}.{key}", "is missing; give a number.")
            return default
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"{where}.{key}", f"must be a number; got {value!r}.")
        if not math.isfinite(value) or (positive and value <= 0):
            kind = "a positive finite number" if positive else "a finite number"
            raise self.fail(f"{where}.{key}", f"must be {kind}; got {value!r}.")
        return float(value)

    def integer(self, table: dict, key: str, where: str, *, default: Any = ..., minimum=1):
        if key not in table:
            if default is ...:
                raise self.fail(f"{where}.{key}", f"is missing; give an integer >= {minimum}.")
            return default
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(f"{where}.{key}", f"must be an integer >= {minimum}; got {value!r}.")
        return value

    def string(self, table: dict, key: str, where: str, *, default: Any = ..., choices=None):
        if key not in table:
            if default is ...:
                raise self.fail(f"{where}.{key}", "is missing; give a string.")
            return default
        value = table[key]
        if not isinstance(value, str):
            raise self.fail(f"{where}.{key}", f"must be a string; got {value!r}.")
        if choices is not None and value not in choices:
            raise self.fail(f"{where}.{key}", f"is {value!r}; use one of {list(choices)}.")
        return value

    def boolean(self, table: dict, key: str, where: str, *, default: bool) -> bool:
        value = table.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(f"{where}.{key}", f"must be true or false; got {value!r}.")
        return value

    def names(self, table: dict, key: str, where: str, allowed: tuple[str, ...]) -> tuple:
        value = table.get(key)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{where}.{key}", f"must be a non-empty list of names; got {value!r}.")
        for name in value:
            if name not in allowed:
                raise self.fail(
                    f"{where}.{key}", f"names {name!r}; the choices are {list(allowed)}."
                )
        return tuple(value)

    def file_stem(self, table: dict, key: str, where: str, *, default: Any = ...) -> Any:
        """A string that names a file inside a folder (no separators, no leading dot), or
        `default` when the key is absent."""
        value = self.string(table, key, where, default=default)
        if value is default:
            return value
        if not FILE_STEM.fullmatch(value):
            raise self.fail(
                f"{where}.{key}",
                f"is {value!r}; a name becomes a file name in the figures folder, so use only "
                "letters, digits, '_', '-' and '.' (not first), e.g. 'fit_overview'.",
            )
        if len(value) > MAX_FILE_STEM:
            raise self.fail(
                f"{where}.{key}",
                f"is {len(value)} characters long; a name becomes a file name in the figures "
                f"folder, so keep it to {MAX_FILE_STEM} characters.",
            )
        return value


FLOAT_BYTES = 8
MEMORY_LIMIT = 8 * 2**30  # the arrays one run may hold; more is refused at --check


def check_memory(check: Checker, key: str, what: str, num_bytes: int | float) -> None:
    """Refuses a size whose arrays would need more than `MEMORY_LIMIT` bytes."""
    if num_bytes > MEMORY_LIMIT:
        raise check.fail(
            key,
            f"is too large: {what} would need {num_bytes / 2**30:.3g} GiB of memory, above the "
            f"{MEMORY_LIMIT / 2**30:g} GiB a run may use; reduce it.",
        )
