#!/usr/bin/env bash
# One call of the device tool (carry .device and .device-min; see device-setup.sh): the kernel suite on
# tilelang-cuda (SUITE_PATHS picks files; a suite past SUITE_TIMEOUT is interrupted, so its summary still
# names the failures), then benchmarks/gpu.py (unless SKIP_BENCH is set). Summaries go to $OUT (suite.txt, gpu.json; draw the chart here with benchmarks/plot.py: the GPU image has no matplotlib); the tails are printed.
set -uo pipefail
S=$(bash tools/device-setup.sh 2>/dev/null)
export PYTHONPATH=$S:$PWD
OUT=${OUT:-/tmp}
INTENT_TRACE_TEST_TARGETS=tilelang-cuda timeout -s INT -k 30 "${SUITE_TIMEOUT:-420}" python3 -m pytest -o addopts="" -q -n 16 \
  -p no:cacheprovider ${SUITE_PATHS:-tests/kernels tests/language tests/backends/test_tilelang_cuda*.py} > "$OUT/suite.txt" 2>&1
tail -15 "$OUT/suite.txt"
[ -n "${SKIP_BENCH:-}" ] && exit 0
timeout "${BENCH_TIMEOUT:-150}" python3 benchmarks/gpu.py > "$OUT/gpu.json" 2> "$OUT/gpu.err"
tail -c 3000 "$OUT/gpu.json"; tail -5 "$OUT/gpu.err"
