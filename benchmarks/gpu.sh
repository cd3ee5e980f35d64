#!/usr/bin/env bash
# The GPU benchmark of simlab.kernels (benchmarks/gpu_kernels.py); the output is kept under
# benchmarks/results/. `benchmarks/gpu.sh --interpret` runs its checks on a CPU instead.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}"
mkdir -p benchmarks/results
name="gpu_kernels$( [[ " $* " == *" --interpret "* ]] && echo _interpret )"
output="benchmarks/results/${name}_$(date -u +%Y%m%dT%H%M%SZ).txt"
"$python" benchmarks/gpu_kernels.py "$@" 2>&1 | tee "$output.tmp"
status=${PIPESTATUS[0]}
mv "$output.tmp" "$output"
echo "output kept in $output"
exit "$status"
