"""Makes docs/figures/stiff_work_precision.png: significant correct digits against wall time
on six problems of the Test Set for IVP Solvers, for simlab's Rodas5P and Radau5, Diffrax's
Kvaerno5 and SciPy's Radau, BDF and LSODA, at tolerances 1e-6, 1e-8 and 1e-10.

Run from the repository root: `python docs/scripts/stiff_work_precision.py`. To measure in
several processes, pass `--results DIR --problems hires orego ...` to each (they store JSON
in DIR); the figure is drawn once DIR holds all six problems.
"""

import argparse
import json
import pathlib
import sys

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_num_cpu_devices", 2)  # as benchmarks/run.py

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

ROOT = pathlib.Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_stiff import measure  # noqa: E402

PROBLEMS = ("hires", "orego", "rober", "pollu", "e5", "vdpol")
RTOLS = (1e-6, 1e-8, 1e-10)
STYLES = {
    "Rodas5P": ("C0", "o", "-"),
    "Radau5": ("C1", "s", "-"),
    "Kvaerno5": ("C2", "^", "--"),
    "SciPy Radau": ("C3", "v", ":"),
    "SciPy BDF": ("C4", "D", ":"),
    "SciPy LSODA": ("C5", "x", ":"),
}


def _measure_problem(name):
    runs = [measure(name, rtol, repeats=1) for rtol in RTOLS]
    for rtol, run in zip(RTOLS, runs, strict=True):
        for label, (digits, seconds, steps) in run.items():
            print(
                f"{name:6} rtol {rtol:.0e} {label:12} scd {digits:6.2f} "
                f"{seconds * 1e3:9.1f} ms {steps:7d} steps",
                flush=True,
            )
    return runs


def _plot(all_runs):
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), constrained_layout=True)
    for ax, name in zip(axes.flat, PROBLEMS, strict=True):
        runs = all_runs[name]
        for label, (color, marker, line) in STYLES.items():
            digits = np.array([run[label][0] for run in runs])
            seconds = np.array([run[label][1] for run in runs])
            ax.plot(seconds, digits, line, color=color, marker=marker, label=label)
        ax.set_xscale("log")
        ax.set_title(name.upper() + (" (mixed-error digits)" if name == "e5" else ""))
        ax.set_xlabel("wall time [s]")
        ax.set_ylabel("significant correct digits")
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(
        "Test Set for IVP Solvers: work-precision at rtol 1e-6, 1e-8, 1e-10 "
        "(a missing point is a failed solve)"
    )
    out = ROOT / "docs" / "figures" / "stiff_work_precision.png"
    fig.savefig(out, dpi=110)
    print(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    parser.add_argument("--results", type=pathlib.Path, default=None)
    args = parser.parse_args()
    all_runs = {}
    for name in args.problems:
        all_runs[name] = _measure_problem(name)
        if args.results is not None:
            args.results.mkdir(parents=True, exist_ok=True)
            (args.results / f"{name}.json").write_text(json.dumps(all_runs[name]))
    if args.results is not None:
        for name in PROBLEMS:
            path = args.results / f"{name}.json"
            if path.exists():
                all_runs[name] = json.loads(path.read_text())
    if all(name in all_runs for name in PROBLEMS):
        _plot(all_runs)


if __name__ == "__main__":
    main()
