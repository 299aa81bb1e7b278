#!/usr/bin/env bash
# One short GPU-machine call: the step, mixed-precision, nn-kernel and core benchmarks on cupy
# and wgpu (BENCH_S, default 170 s), then the whole test suite on numpy, cupy and wgpu in the
# time left. The benchmarks go first: the suite's 14 workers leave the host measurably slower
# for a while after they exit, which showed in host-bound steps measured after them.
#
#   OUT=/some/dir benchmarks/gpu_check.sh      (CALL_S: the whole run's limit, default 570 s)
#
# Writes under $OUT: info.txt, bench.log, bench.json, ratios.md, coop.log (and coop.json where
# wgpu grants cooperative matrices, VTL_WGPU_COOP=1) and tests.log (as
# benchmarks/gpu_run.sh, whose full benchmark run takes a call of its own). Sources
# .gpu/prelude.sh when present (the wgpu wheels and the Vulkan loader; the suite runs on 14
# workers, so fill .gpu with pytest-xdist and execnet too).
set -u
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:?set OUT or pass the output folder}}
mkdir -p "$OUT"
if [ -f .gpu/prelude.sh ]; then
  # shellcheck disable=SC1091
  source .gpu/prelude.sh || echo "gpu_check: .gpu/prelude.sh failed; wgpu may be unavailable"
fi
nvidia-smi -L 2>&1
start=$(date +%s)
bench=${BENCH_S:-170}
export CUPY_TF32=0 VTL_BENCH_BUDGET_S=$(( bench - 30 )) XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
{ python3 -m vtl info; nvidia-smi | head -15; } > "$OUT/info.txt" 2>&1
timeout "$bench" python3 -m pytest -q -p no:cacheprovider \
  benchmarks/test_step_bench.py benchmarks/test_amp_bench.py benchmarks/test_nn_bench.py \
  benchmarks/test_core_bench.py -k "not numpy" --benchmark-only --benchmark-enable \
  --benchmark-json="$OUT/bench.json" --benchmark-min-rounds=3 --benchmark-max-time=0.15 \
  --benchmark-columns=median,rounds > "$OUT/bench.log" 2>&1
echo "gpu_check: benchmarks rc=$? after $(( $(date +%s) - start )) s"
grep -E "passed|failed" "$OUT/bench.log" | tail -2
if [ -s "$OUT/bench.json" ]; then
  python3 benchmarks/report.py "$OUT/bench.json" > "$OUT/ratios.md"
  grep -E "step|amp|softmax|layer.norm|erf|argmax|var|axis0|sdpa" "$OUT/ratios.md" \
    | cut -c1-150 | head -60
fi
# float16 products on cooperative matrices (experimental, opt-in): whether this wgpu grants
# the feature, and if so the path's tests and the float16 matmul benchmarks with it on
VTL_WGPU_COOP=1 timeout 60 python3 -m vtl info > "$OUT/coop.log" 2>&1
grep -E "float16_products" "$OUT/coop.log" | cut -c1-200
if grep -q "float16 products on cooperative matrices" "$OUT/coop.log"; then
  VTL_WGPU_COOP=1 VTL_BENCH_BUDGET_S=40 timeout 120 sh -c "\
    python3 -m pytest -q -p no:cacheprovider tests/test_wgpu_coop.py; \
    python3 -m pytest -q -p no:cacheprovider benchmarks/test_amp_bench.py -k 'matmul and wgpu' \
      --benchmark-only --benchmark-enable --benchmark-json=$OUT/coop.json \
      --benchmark-min-rounds=3 --benchmark-max-time=0.15 --benchmark-columns=median,rounds" \
    >> "$OUT/coop.log" 2>&1
  grep -E "passed|failed|matmul-float16" "$OUT/coop.log" | cut -c1-150 | head -12
fi
left=$(( ${CALL_S:-570} - ($(date +%s) - start) ))
[ "$left" -lt 60 ] && exit 0
# -v: each result line names its worker, so a test that broke a worker's CUDA context (an
# illegal address fails every later cupy test in that process) is the one before its first
# failure there
VTL_TEST_BACKENDS=numpy,cupy,wgpu timeout $(( left - 10 )) python3 -m pytest -v \
  -p no:cacheprovider -n 14 --tb=short -rfE tests > "$OUT/tests.log" 2>&1
echo "gpu_check: pytest rc=$? after $(( $(date +%s) - start )) s"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | cut -c1-180 | head -50
tail -2 "$OUT/tests.log"
if grep -q "illegal memory access" "$OUT/tests.log"; then  # the culprit ran just before
  w=$(awk '/^\[gw[0-9]+\] linux/ {w = $1} /illegal memory access/ && w {print w; exit}' \
    "$OUT/tests.log")
  echo "gpu_check: a CUDA context broke; the last tests of $w before its first failure:"
  grep -F "$w" "$OUT/tests.log" | grep -B4 -m1 "FAILED" | cut -c1-160
fi
