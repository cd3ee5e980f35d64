#!/usr/bin/env bash
# The GPU benchmark of simlab.kernels (benchmarks/gpu_kernels.py), each measurement beside
# the roofline model's prediction (benchmarks/gpu_model.py); the output is written to
# benchmarks/results/gpu.txt. `benchmarks/gpu.sh --interpret` runs its checks on a CPU
# instead (into gpu_interpret.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}"
mkdir -p benchmarks/results
output=benchmarks/results/gpu.txt
if [[ " $* " == *" --interpret "* ]]; then output=benchmarks/results/gpu_interpret.txt; fi
status=0  # a failed check must not lose the output: keep it, then report the failure
"$python" benchmarks/gpu_kernels.py "$@" 2>&1 | tee "$output.tmp" || status=$?
mv "$output.tmp" "$output"
echo "output kept in $output"
exit "$status"
