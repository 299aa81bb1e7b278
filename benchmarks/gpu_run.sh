#!/usr/bin/env bash
# The benchmark run on the GPU machine: every case in benchmarks/ (vtl on numpy, cupy and wgpu,
# with raw NumPy/CuPy and PyTorch CPU/CUDA in the same process), then the ratio report and chart.
#
#   OUT=/some/dir benchmarks/gpu_run.sh        (or: benchmarks/gpu_run.sh /some/dir)
#
# Writes under $OUT: info.txt (vtl info, nvidia-smi), bench.log, bench.json (pytest-benchmark),
# ratios.md (grouped Markdown tables with vtl / reference ratios) and benchmarks.png (the ratios
# as bars; needs matplotlib: without it ratios.md says so, and `python3 benchmarks/report.py
# bench.json --png benchmarks.png` draws it later on any machine with matplotlib).
# Sources .gpu/prelude.sh when present (wgpu wheels and the Vulkan loader; ../shared/GPU.md;
# GPU_RUN_PRELUDE=0 skips it, e.g. for a local try with VTL_BENCH_QUICK=1).
# Expected run time on one H200: about 3-4 minutes for pytest; the whole run is capped at 420 s,
# and VTL_BENCH_BUDGET_S (default 360) skips the cases that would start later, so the JSON
# is written even when the machine is slower than expected.
set -u
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:?set OUT or pass the output folder}}
mkdir -p "$OUT"
if [ -f .gpu/prelude.sh ] && [ "${GPU_RUN_PRELUDE:-1}" != 0 ]; then
  # shellcheck disable=SC1091
  source .gpu/prelude.sh || echo "gpu_run: .gpu/prelude.sh failed; wgpu may be unavailable"
fi
export PYTHONUNBUFFERED=1 CUPY_TF32=0
export VTL_BENCH_BUDGET_S=${VTL_BENCH_BUDGET_S:-360} XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}

{ python3 -m vtl info 2>&1; nvidia-smi 2>&1 | head -15; } > "$OUT/info.txt"
head -25 "$OUT/info.txt"

start=$(date +%s)
timeout 420 python3 -m pytest -q -p no:cacheprovider benchmarks \
  --benchmark-only --benchmark-enable --benchmark-json="$OUT/bench.json" \
  --benchmark-min-rounds=3 --benchmark-max-time=0.3 --benchmark-columns=median,rounds \
  > "$OUT/bench.log" 2>&1
rc=$?
echo "gpu_run: pytest rc=$rc after $(( $(date +%s) - start )) s (124: killed by the 420 s timeout)"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/bench.log" | cut -c1-200 | tail -40

if [ -s "$OUT/bench.json" ]; then
  python3 benchmarks/report.py "$OUT/bench.json" --png "$OUT/benchmarks.png" > "$OUT/ratios.md"
  echo "gpu_run: report rc=$? ($(wc -l < "$OUT/ratios.md") lines in ratios.md)"
else
  echo "gpu_run: no bench.json (pytest was killed before the end); see bench.log"
fi
exit $rc
