#!/usr/bin/env bash
# simlab on a TPU: the kernels compiled by Mosaic TPU against their references, their
# throughput beside the roofline model, tiles measured on the chip, impl="auto" against
# "xla" and "pallas" in simulate, the stiff solvers in float32, the ensemble rows
# (benchmarks/tpu_bench.py), then the accelerator tests (`pytest -m accelerator`) in
# float32. The output is kept in benchmarks/results/tpu.txt. `--float64` runs the float64
# stiff solves' accelerator tests alone (kept in tpu-float64.txt): with them the whole run
# passes the ten minutes a command may hold the chip.
#
# A TPU machine has JAX, NumPy, SciPy and pytest but not simlab's other dependencies, and
# no network. Here, first: `benchmarks/tpu.sh --vendor` copies them from .venv into
# .tpu-site/ (ignored by git); carry that folder to the machine, and there run
# `benchmarks/tpu.sh < /dev/null`, then `benchmarks/tpu.sh --float64 < /dev/null` (and
# `benchmarks/tpu.sh --probes < /dev/null` where the time goes) as separate calls. It appends
# .tpu-site and the checkout to PYTHONPATH, so the machine's own JAX stays first. One
# program at a time holds the chip: each step runs alone, pytest without xdist.
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--vendor" ]]; then
    exec .venv/bin/python benchmarks/tpu_vendor.py
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD:$PWD/.tpu-site"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
python="${PYTHON:-python3}"
# `--float64`: a TPU's LU is float32 only, so Rodas5P eliminates in float64 (tests/test_stiff_lu.py).
if [[ "${1:-}" == "--float64" ]]; then
    mkdir -p benchmarks/results
    {
        echo "# benchmarks/tpu.sh --float64, $(date -u +%Y-%m-%d), commit ${SIMLAB_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
        SIMLAB_TEST_X64=1 "$python" -m pytest -m accelerator -p no:xdist -p no:cacheprovider \
            -q -rfE --durations=5 tests/test_stiff_lu.py < /dev/null
    } 2>&1 | tee benchmarks/results/tpu-float64.txt
    exit "${PIPESTATUS[0]}"
fi
# `--probes`: where the time goes (benchmarks/tpu_probes.py), kept in tpu-probes.txt.
if [[ "${1:-}" == "--probes" ]]; then
    shift
    mkdir -p benchmarks/results
    "$python" benchmarks/tpu_probes.py "$@" < /dev/null | tee benchmarks/results/tpu-probes.txt
    exit
fi
output=benchmarks/results/tpu.txt
mkdir -p benchmarks/results
status=0  # a failed check must not lose the output: keep it, then report the failure
{
    commit="${SIMLAB_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    echo "# benchmarks/tpu.sh, $(date -u +%Y-%m-%d), commit $commit"
    "$python" benchmarks/tpu_bench.py "$@" < /dev/null || status=$?
    echo
    echo "accelerator tests (pytest -m accelerator, float32):"
    # The files with accelerator tests: collecting the others would import what the
    # machine lacks (matplotlib, xarray, pandas).
    SIMLAB_TEST_X64=0 "$python" -m pytest -m accelerator -p no:xdist -p no:cacheprovider \
        -q -rfE --durations=5 $(grep -l "mark.accelerator" tests/test_*.py) < /dev/null \
        || status=$?
    exit "$status"
} 2>&1 | tee "$output.tmp"
status=${PIPESTATUS[0]}  # the group's: it runs in a subshell of its own
mv "$output.tmp" "$output"
echo "output kept in $output (exit status $status)"
exit "$status"
