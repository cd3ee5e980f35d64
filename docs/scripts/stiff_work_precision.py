"""Makes docs/figures/stiff_work_precision.png: significant correct digits against wall time
on six problems of the Test Set for IVP Solvers, for simlab's Rodas5P and Radau5, Diffrax's
Kvaerno5 and SciPy's Radau, BDF and LSODA, at tolerances 1e-6, 1e-8 and 1e-10.

Run from the repository root: `python docs/scripts/stiff_work_precision.py`.
"""

import pathlib
import sys

import jax

jax.config.update("jax_enable_x64", True)

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


def main():
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), constrained_layout=True)
    for ax, name in zip(axes.flat, PROBLEMS, strict=True):
        runs = [measure(name, rtol, repeats=1) for rtol in RTOLS]
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
    fig.suptitle("Test Set for IVP Solvers: work-precision at rtol 1e-6, 1e-8, 1e-10")
    out = ROOT / "docs" / "figures" / "stiff_work_precision.png"
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
