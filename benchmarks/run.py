"""Runs every `benchmarks/bench_*.py` and prints one table of ratios measured side by side.

Usage: `python benchmarks/run.py [NAME ...]`, where NAME filters the modules (e.g. `simulate`).
Each module defines `rows() -> list[Row]`; ratios compare two things timed in the same run,
because absolute times on shared machines mean little. Every row is checked against its
target: a miss is marked `MISS` in the table and counted at the end.
"""

import importlib
import pathlib
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_num_cpu_devices", 2)

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE))

from _harness import flag, format_row  # noqa: E402


def _modules(filters: list[str]) -> list[str]:
    names = sorted(p.stem for p in HERE.glob("bench_*.py"))
    return [n for n in names if not filters or any(f in n for f in filters)]


def main(filters: list[str]) -> int:
    print(f"simlab benchmarks — jax {jax.__version__}, devices: {jax.devices()}")
    header = f"{'benchmark':<58} {'ratio':>10}  {'target':<10} {'':<4} detail"
    print(header)
    print("-" * len(header))
    misses = []
    for name in _modules(filters):
        start = time.perf_counter()
        for row in importlib.import_module(name).rows():
            print(format_row(row), flush=True)
            if flag(row.ratio, row.target):
                misses.append(row.name.strip())
        print(f"  ({name}: {time.perf_counter() - start:.0f} s)", flush=True)
    print(f"{len(misses)} rows miss their target" + "".join(f"\n  - {m}" for m in misses))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
