"""Shared pieces of the benchmarks: a row of the ratio table, its target check, a fair timer."""

import dataclasses
import re
import time
from collections.abc import Callable

import jax


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the table: a measured ratio against a baseline, and its target.

    `ratio` is "simlab is this many times better" or a plain ratio (see `unit`);
    `target` is a goal such as ">= 100x", "<= 1.1", "~2x" or "<= 4 GiB" (checked by
    `meets_target`), or a word that sets none ("before": a baseline shown for comparison).
    """

    name: str
    ratio: float
    target: str = ""
    detail: str = ""


TARGET_PATTERN = re.compile(r"^(>=|<=|>|<|~)\s*([0-9.]+)\s*(x|GiB)?$")
APPROXIMATE = 0.25  # "~2x" is met within 25 %


def meets_target(ratio: float, target: str) -> bool | None:
    """Whether `ratio` meets `target`; `None` when the target sets no number."""
    match = TARGET_PATTERN.match(target.strip())
    if match is None:
        return None
    operator, value = match.group(1), float(match.group(2))
    if operator == "~":
        return abs(ratio - value) <= APPROXIMATE * value
    return {">=": ratio >= value, "<=": ratio <= value, ">": ratio > value, "<": ratio < value}[
        operator
    ]


def flag(ratio: float, target: str) -> str:
    """The table's mark for a row: "MISS" when it misses a numeric target, else blank."""
    return "MISS" if meets_target(ratio, target) is False else ""


def shown_ratio(ratio: float, target: str) -> str:
    """`ratio` to 3 significant digits, or as many more as show which side of `target` it
    lies on (1.1017 against "<= 1.1" reads 1.102, not 1.1)."""
    digits = 3
    while digits < 8 and meets_target(float(f"{ratio:.{digits}g}"), target) != meets_target(
        ratio, target
    ):
        digits += 1
    return f"{ratio:.{digits}g}"


def format_row(row: Row) -> str:
    """The row as a line of the printed table (the format of benchmarks/results/*.txt)."""
    return (
        f"{row.name:<58} {shown_ratio(row.ratio, row.target):>10}  {row.target:<10} "
        f"{flag(row.ratio, row.target):<4} {row.detail}"
    ).rstrip()


def best_seconds(fns: dict[str, Callable[[], object]], *, repeats: int = 7) -> dict[str, float]:
    """Best wall time of each function over `repeats` rounds that run them in turn.

    Every contender in a comparison is timed the same way: one warm-up call each (compiling
    JAX functions), then rounds in which each runs once, waiting for JAX results. On a
    shared machine the load changes from second to second; alternating the contenders and
    taking each one's best keeps a ratio meaningful.
    """
    for fn in fns.values():
        jax.block_until_ready(fn())
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            jax.block_until_ready(fn())
            best[name] = min(best[name], time.perf_counter() - start)
    return best
