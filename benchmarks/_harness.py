"""Shared pieces of the benchmarks: a row of the ratio table, and a fair timer."""

import dataclasses
import statistics
import time
from collections.abc import Callable

import jax


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the table: a measured ratio against a baseline, and its target.

    `ratio` is "simlab is this many times better" or a plain ratio (see `unit`);
    `target` is a human-readable goal such as ">= 100x" or "<= 1.1".
    """

    name: str
    ratio: float
    target: str = ""
    detail: str = ""


def median_seconds(fn: Callable[[], object], *, repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of `fn()` after `warmup` calls, waiting for JAX results."""
    for _ in range(warmup):
        jax.block_until_ready(fn())
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
