#!/usr/bin/env bash
# Every GPU measurement of the perf notes in one call (docs/perf.md): the card's copy
# bandwidth, the fixed profile in both timing modes, the large profile, and the triton
# correctness sweep in bf16 and fp32. Usage (on the GPU machine): bash scripts/gpu_suite.sh OUT
out=${1:-artifacts/gpu}
mkdir -p "$out"
source scripts/gpu_env.sh
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
python3 scripts/copy_bandwidth.py --json "$out/bandwidth.json"
all=torch-reference,torch-compile,triton
step() {  # step NAME SECONDS ARGS...: one apex-bench run, bounded so later steps still run
  local name=$1 limit=$2; shift 2
  local start=$(date +%s)
  timeout "$limit" apex-bench "$@" --output-json "$out/$name.json" --output-md "$out/$name.md" --quiet
  echo "$name: exit $?, wall $(( $(date +%s) - start )) s: apex-bench $*"
}
step fixed 240 --backends $all
step fixed-graph 90 --backends $all --graph
step large 150 --profile large --backends $all \
    --workloads tilepack,tileunpack,fusiongate,tile-stage1,ff-infer
step check-fixed 60 --backends triton --dtype bf16,fp32 --min-time 0.02 --max-time 0.2
step check-large 60 --profile large --backends triton --dtype bf16,fp32 --min-time 0.02 --max-time 0.2
python3 scripts/perf_table.py --bandwidth "$out/bandwidth.json" "$out"/fixed.json \
    "$out"/fixed-graph.json "$out"/large.json > "$out/tables.md"
tail -n +1 "$out"/check-*.md | grep -E "incorrect|error|crashed|timeout" || echo "checks: no failing cell"
cat "$out/tables.md"
