"""Copies what a bare TPU machine's Python lacks into `.tpu-site/`, for `benchmarks/tpu.sh`.

A TPU machine has JAX, jaxlib, libtpu, NumPy, SciPy, pytest and hypothesis, and no network.
simlab's other dependencies (and the test suite's) are copied here from this checkout's
`.venv`, with their `dist-info` (so that pytest finds the jaxtyping plugin) and without
`__pycache__`; shared objects are stripped of their symbols. Both machines are x86-64 with
CPython 3.11, so the compiled ones load there too. The folder is listed in `.gitignore`;
`tpu.sh` appends it to `PYTHONPATH`, after the machine's own JAX.

Usage: `.venv/bin/python benchmarks/tpu_vendor.py` (or `benchmarks/tpu.sh --vendor`).
"""

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESTINATION = ROOT / ".tpu-site"
# Distributions simlab imports (`import simlab`, the models, kernels, sweeps and fits) and
# the test suite's plugins, beyond what a TPU machine carries.
DISTRIBUTIONS = (
    "equinox",
    "diffrax",
    "lineax",
    "optimistix",
    "optax",
    "absl-py",
    "jaxtyping",
    "wadler-lindig",
    "typing-extensions",
    "tqdm",
    "zarr",
    "numcodecs",
    "donfig",
    "google-crc32c",
    "pyyaml",
    "pygments",
    "beartype",
    "blackjax",
)


def installed_files(name: str) -> list[Path]:
    """The files of one installed distribution, its `dist-info` included."""
    distribution = importlib.metadata.distribution(name)
    base = Path(distribution.locate_file(""))
    return [
        base / entry
        for entry in distribution.files or ()
        if "__pycache__" not in entry.parts and not str(entry).startswith("..")
    ]


def copy_distribution(name: str) -> int:
    site = Path(importlib.metadata.distribution(name).locate_file(""))
    copied = 0
    for source in installed_files(name):
        if not source.is_file():
            continue
        target = DESTINATION / source.relative_to(site)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        if target.suffix == ".so":
            subprocess.run(["strip", "--strip-unneeded", str(target)], check=False)
        copied += target.stat().st_size
    return copied


def main() -> int:
    shutil.rmtree(DESTINATION, ignore_errors=True)
    total = 0
    for name in DISTRIBUTIONS:
        size = copy_distribution(name)
        total += size
        print(f"  {name:<20} {size / 1e6:6.1f} MB")
    print(f"{DESTINATION.relative_to(ROOT)}: {total / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
