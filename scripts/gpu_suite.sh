#!/usr/bin/env bash
# The GPU measurements of the perf notes (docs/perf.md), one part per device call so
# each stays well inside a 10-minute command: every part measures the card's copy
# bandwidth first, and rebuilds results.tgz after each step so a cut-off call still
# returns what finished.
#   bash scripts/gpu_suite.sh fixed OUT   fp16, fixed profile, events then --graph (~8 min)
#   bash scripts/gpu_suite.sh large OUT   fp16, large profile, the bandwidth-bound workloads
#   bash scripts/gpu_suite.sh large-fused OUT  fp16, large profile, tile-stage1 and ff-infer
#   bash scripts/gpu_suite.sh large-scan OUT  fp16, large profile, tilessm-scan and tileunpack:overlap
#   bash scripts/gpu_suite.sh scan-split OUT  tilessm-scan: walk vs split path, then the big scan
#   bash scripts/gpu_suite.sh scan-bidir OUT  the bidirectional split path alone
#   bash scripts/gpu_suite.sh overlap-paths OUT  tileunpack overlap: walk vs row-band runs
#   bash scripts/gpu_suite.sh overlap OUT  tileunpack overlap, apex-bench large and fixed
#   bash scripts/gpu_suite.sh scan-check OUT  the scan's split path in bf16/fp32, and under --graph
#   bash scripts/gpu_suite.sh check OUT   triton correctness in bf16 and fp32, fixed profile
#   bash scripts/gpu_suite.sh check-large OUT  the same at the large profile
#   bash scripts/gpu_suite.sh timers OUT  every CUDA timer against a spin kernel of known cycles
#   bash scripts/gpu_suite.sh triton-methods OUT  triton, fixed profile: two fresh default runs, graph, kernel, unheld
#   bash scripts/gpu_suite.sh triton-repeat OUT  two more default runs, ff-infer under --graph, three backends
#   bash scripts/gpu_suite.sh spread OUT  graph floor by launch kind, then four fresh default runs and --graph
#   bash scripts/gpu_suite.sh gate OUT  spin kernels of ~10 and ~100 us: 3 baseline runs, then 20 A/A and 20 slowed by 10 %
#   bash scripts/gpu_suite.sh gate-more OUT  A/A runs 18-20 and slowed runs 17-20 (gate cut off at the 10-minute limit)
#   bash scripts/gpu_suite.sh baseline OUT  three fresh triton runs at the fixed profile, for the GPU baseline
#   bash scripts/gpu_suite.sh picks OUT  triton, fixed profile: a fresh run with the committed picks, three
#     --retune runs, the picks file written from them (apex_kernels/picks/<model>.json, copied to OUT), then
#     two runs that use it
#   bash scripts/gpu_suite.sh new-model OUT  a model without picks: three --retune runs, the picks file written
#     from them, then the baseline's three fresh runs with it (each step only while time is left)
#   bash scripts/gpu_suite.sh floor-sampling OUT  the floor against the hold's length (floor_delay.py), then
#     triton, fixed profile: three fresh runs with each floor sampling (rounds, interleaved, pooled, in turn),
#     the spread of each triple, each run against the committed baseline
# Autotuning compiles every configuration on first use, so triton cells take 5-40 s to build.
part=${1:?usage: gpu_suite.sh fixed|large|large-fused|large-scan|scan-split|scan-bidir|overlap-paths|overlap|scan-check|check|check-large|timers|triton-methods|triton-repeat|spread|gate|gate-more|baseline|picks|new-model|floor-sampling OUT}
OUT_DIR=${2:-artifacts/gpu}
work=/tmp/apex-gpu-suite/$part
mkdir -p "$work" "$OUT_DIR"
source scripts/gpu_env.sh
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$work/gpu.txt"
python3 scripts/copy_bandwidth.py --json "$work/bandwidth.json"
all=torch-reference,torch-compile,triton
step() {  # step NAME SECONDS ARGS...: one apex-bench run, bounded so later steps still run
  local name=$1 limit=$2; shift 2
  local start
  start=$(date +%s)
  timeout "$limit" apex-bench "$@" --output-json "$work/$name.json" --output-md "$work/$name.md" --quiet
  echo "$name: exit $?, wall $(( $(date +%s) - start )) s: apex-bench $*" | tee -a "$work/steps.txt"
  tar czf "$OUT_DIR/results-$part.tgz" -C "$work" .
}
copy_gbps() {  # this call's measured copy bandwidth, for the dev scripts' fractions
  python3 -c "import json; print(json.load(open('$work/bandwidth.json'))['copy_gbps'])"
}
paths() {  # paths "KEY=V ..." SEGMENTS [CASES]: tilessm-scan's paths, checked, then timed
  local sets
  sets=$(echo "$1" | sed 's/\([^ ]*\)/--set \1/g')
  timeout 150 python3 scripts/dev/scan_paths.py $sets --segments "$2" --bandwidth "$(copy_gbps)" \
      --cases "${3:-forward,backward,bidirectional}" | tee -a "$work/scan-paths.jsonl"
  tar czf "$OUT_DIR/results-$part.tgz" -C "$work" .
}
case $part in
  timers)
    python3 -m pip install -q --no-deps --no-build-isolation -e tests/plugins >/dev/null
    timeout 60 apex-bench doctor --json "$work/doctor.json" | tee "$work/doctor.txt"
    timeout 300 python3 scripts/timer_check.py "$work/timer-check.json" | tee "$work/timer-check.md"
    # a backend that skips the work (flagged, --strict exits 1) and one that syncs inside the hold
    step skips-work 120 --workloads test-scale --backends test-working,test-skips-work --strict
    step syncs 120 --workloads test-scale --backends test-working,test-syncs
    cat "$work/skips-work.md" "$work/syncs.md"
    tar czf "$OUT_DIR/results-$part.tgz" -C "$work" . ;;
  triton-methods)
    # two fresh processes of the default method, then graph, kernel timer and unheld events
    step triton-1 200 --backends triton
    step triton-2 120 --backends triton
    step triton-graph 120 --backends triton --graph
    step triton-kernel 150 --backends triton --timer kernel
    step triton-unheld 120 --backends triton --no-hold
    step triton-raw 120 --backends triton --raw-times
    step triton-graph-kernel 150 --backends triton --graph --timer kernel
    python3 scripts/perf_table.py --methods "$work"/triton-{1,2,graph,kernel,unheld,raw,graph-kernel}.json \
        | tee "$work/methods.md" ;;
  triton-repeat)
    # two more fresh default processes, ff-infer's energy under --graph, and the three backends
    # on a scan whose eager reference queues more launches than a held stream takes
    step triton-3 200 --backends triton
    step triton-4 120 --backends triton
    step ff-graph 150 --backends triton --workloads ff-infer --graph
    step mixed 300 --backends torch-reference,torch-compile,triton --workloads tilepack,ff-infer,tilessm-scan:forward
    python3 scripts/perf_table.py --methods "$work"/{triton-3,triton-4,ff-graph,mixed}.json | tee "$work/methods.md"
    cat "$work/mixed.md" ;;
  gate)
    # the gate's false-positive and detection rates (docs/baselines.md): fresh processes, A/A
    # and +10 % planted by the test plugin, alternating so a drift of the machine hits both alike
    python3 -m pip install -q --no-deps --no-build-isolation -e tests/plugins >/dev/null
    spin=(--workloads test-spin-pair --backends test-working --no-energy)
    for i in 1 2 3; do step "base-$i" 60 "${spin[@]}"; done
    for i in $(seq 1 20); do
      step "aa-$i" 60 "${spin[@]}"
      APEX_TEST_SPIN_SLOWDOWN=1.10 step "slow-$i" 60 "${spin[@]}"
    done ;;
  gate-more)
    python3 -m pip install -q --no-deps --no-build-isolation -e tests/plugins >/dev/null
    spin=(--workloads test-spin-pair --backends test-working --no-energy)
    for i in 17 18 19 20; do
      [ "$i" -ge 18 ] && step "aa-$i" 60 "${spin[@]}"
      APEX_TEST_SPIN_SLOWDOWN=1.10 step "slow-$i" 60 "${spin[@]}"
    done ;;
  baseline)
    # the GPU baseline of perf_gpu.yml: three fresh processes (baselines/README in docs/baselines.md)
    for i in 1 2 3; do step "fixed-triton-$i" 200 --backends triton; done ;;
  picks)
    # the shipped autotuning picks of this GPU model (docs/kernels.md, "Shipped configurations"):
    # first a fresh run with the committed file (empty caches), then a new file from --retune runs
    step shipped-fresh 200 --backends triton --fresh
    python3 -c "import json, collections, sys; r = json.load(open(sys.argv[1])); print('selection sources:', \
dict(collections.Counter(e['selection_source'] for e in r['triton_autotune']['entries'])))" \
        "$work/shipped-fresh.json" | tee "$work/sources.txt"
    for i in 1 2 3; do step "retune-$i" 300 --backends triton --retune; done
    python3 scripts/emit_triton_picks.py "$work"/retune-{1,2,3}.json 2>&1 | tee "$work/emit.txt"
    picks=$(python3 -c "import torch; from apex_kernels.tuned import picks_path; \
print(picks_path(torch.cuda.get_device_name()))")
    cp "$picks" "$OUT_DIR/" && cp "$picks" "$work/"
    for i in 1 2; do step "shipped-$i" 200 --backends triton; done
    python3 scripts/dev/spread.py "$work"/retune-{1,2,3}.json | grep -v "^|   run" | tee "$work/spread-retune.md"
    python3 scripts/dev/spread.py "$work"/shipped-{fresh,1,2}.json "$work/retune-1.json" | tee "$work/spread-shipped.md"
    grep -h "wall" "$work/steps.txt"
    tar czf "$OUT_DIR/results-$part.tgz" -C "$work" . ;;
  new-model)
    # a GPU model without shipped picks or a baseline (the H200): picks from three --retune runs,
    # then the baseline's three fresh runs with those picks; each step skipped once the call has
    # too little of its 10 minutes left, so what finished still comes back
    left() { echo $(( 570 - SECONDS )); }
    for i in 1 2 3; do
      [ "$(left)" -gt 150 ] && step "retune-$i" "$(( $(left) - 120 ))" --backends triton --retune
    done
    python3 scripts/emit_triton_picks.py "$work"/retune-*.json 2>&1 | tee "$work/emit.txt"
    picks=$(python3 -c "import torch; from apex_kernels.tuned import picks_path; \
print(picks_path(torch.cuda.get_device_name()))")
    [ -f "$picks" ] && cp "$picks" "$OUT_DIR/" && cp "$picks" "$work/"
    for i in 1 2 3; do
      [ "$(left)" -gt 40 ] && step "fixed-triton-$i" "$(( $(left) - 10 ))" --backends triton
    done
    python3 scripts/dev/spread.py "$work"/fixed-triton-*.json | tee "$work/spread-baseline.md"
    tar czf "$OUT_DIR/results-$part.tgz" -C "$work" . ;;
  floor-sampling)
    # which floor holds the two-process bar on 2.5-3 us cells (docs/timing.md, "The floor"); first,
    # whether the floor's level follows how long its hold lasts (the L2 flush still draining)
    timeout 150 python3 scripts/dev/floor_delay.py | tee "$work/floor-delay.md"
    for i in 1 2 3; do
      step "rounds-$i" 200 --backends triton --floor-sampling rounds
      step "interleaved-$i" 120 --backends triton --floor-sampling interleaved
      step "pooled-$i" 120 --backends triton --floor-sampling pooled
    done
    for mode in rounds interleaved pooled; do
      python3 scripts/dev/spread.py "$work/$mode"-{1,2,3}.json | grep -v "^|   run" | tee "$work/spread-$mode.md"
    done
    baseline=$(bash scripts/gpu_baseline_path.sh)
    if [ -f "$baseline" ]; then
      for run in "$work"/rounds-*.json "$work"/interleaved-*.json "$work"/pooled-*.json; do
        echo "$(basename "$run"): $(apex-bench compare --baseline "$baseline" --current "$run" --quiet 2>&1 | tail -1)"
      done | tee "$work/gate.txt"
    fi
    tar czf "$OUT_DIR/results-$part.tgz" -C "$work" . ;;
  spread)
    # does the graph floor depend on the kind of launch; then process-to-process spread and picks
    timeout 150 python3 scripts/dev/graph_floor.py | tee "$work/graph-floor.md"
    step spread-1 200 --backends triton
    step spread-2 100 --backends triton
    step spread-3 100 --backends triton
    step spread-4 100 --backends triton
    step spread-graph 100 --backends triton --graph
    python3 scripts/dev/spread.py "$work"/spread-{1,2,3,4}.json | tee "$work/spread.md"
    python3 scripts/dev/spread.py "$work"/spread-{1,graph}.json | tee "$work/spread-graph.md"
    tar czf "$OUT_DIR/results-$part.tgz" -C "$work" . ;;
  fixed)
    step fixed 330 --backends $all
    step fixed-graph 180 --backends $all --graph ;;
  large)
    # on a fresh machine the three backends' builds take most of this step's time
    step large 300 --profile large --backends $all --workloads tilepack,tileunpack:override,fusiongate
    # torch-compile unrolls blend's K = 1024 sequential steps: minutes of compile, left out
    step large-blend 100 --profile large --backends torch-reference,triton --workloads tileunpack:blend
    # t = 16: a tile row of fp16 fills a 32-byte sector, unlike t = 8 (see docs/perf.md)
    step large-t16 120 --profile large --set tile_size=16 --backends torch-compile,triton \
        --workloads tilepack ;;
  large-fused)
    step large-stage1 180 --profile large --backends $all --workloads tile-stage1
    step large-ff 300 --profile large --backends $all --workloads ff-infer ;;
  large-scan)
    # the large profile keeps the scan's 256 steps (torch.compile unrolls the reference
    # loop), 1 MB of tokens; the second step fills the GPU without torch-compile
    step large-scan 180 --profile large --backends $all --workloads tilessm-scan
    step large-scan-big 180 --profile large --set steps=4096 --set channels=2048 \
        --backends torch-reference,triton --workloads tilessm-scan
    step large-overlap 180 --profile large --backends $all --workloads tileunpack:overlap ;;
  scan-split)
    # the walk (0) against segment lengths, each checked first; then apex-bench: the big
    # scan (split path) and the large profile (K = 256, the walk); last, a wide shape
    paths "batch=8 channels=2048 steps=4096" 0,64,128
    paths "batch=1 channels=256 steps=16384" 0,64
    step large-scan-big 200 --profile large --set steps=4096 --set channels=2048 \
        --backends torch-reference,triton --workloads tilessm-scan
    step large-scan-triton 150 --profile large --backends triton --workloads tilessm-scan
    paths "batch=32 channels=4096 steps=512" 0,64 forward,bidirectional ;;
  overlap-paths)
    # tileunpack overlap: the walk against the winner map and its knobs, each checked first,
    # then ncu on the winner map's three launches (autotuned outside the profiled range)
    timeout 240 python3 scripts/dev/unpack_paths.py --profile large --cases overlap \
        --bandwidth "$(copy_gbps)" | tee -a "$work/overlap-paths.jsonl"
    timeout 120 ncu --profile-from-start off --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section MemoryWorkloadAnalysis \
        python3 scripts/dev/ncu_unpack.py overlap-map > "$work/ncu-overlap-map.txt" 2>&1
    grep -E "^  [a-z_]|Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occ|DRAM|Block Limit" \
        "$work/ncu-overlap-map.txt" | head -60 ;;
  overlap)
    # tileunpack overlap with apex-bench at the large and fixed profiles
    step large-overlap 200 --profile large --backends $all --workloads tileunpack:overlap
    step large-overlap-graph 120 --profile large --backends triton --workloads tileunpack:overlap --graph
    step fixed-overlap 100 --backends $all --workloads tileunpack:overlap
    step fixed-overlap-graph 60 --backends $all --workloads tileunpack:overlap --graph
    step check-overlap 60 --backends triton --workloads tileunpack:overlap --dtype bf16,fp32
    step check-large-overlap 150 --profile large --backends triton --workloads tileunpack:overlap \
        --dtype bf16,fp32 --min-time 0.02 --max-time 0.2 ;;
  scan-bidir)
    paths "batch=8 channels=2048 steps=4096" 64 bidirectional
    step large-scan-big-bidir 150 --profile large --set steps=4096 --set channels=2048 \
        --backends triton --workloads tilessm-scan:bidirectional
    paths "batch=32 channels=4096 steps=512" 64 bidirectional ;;
  scan-check)
    # K = 4096 takes the split path (three launches over scratch): every dtype, and graphs
    step scan-check-big 200 --profile large --set steps=4096 --set channels=2048 \
        --backends triton --workloads tilessm-scan --dtype bf16,fp32 --min-time 0.02 --max-time 0.2
    step scan-check-big-graph 120 --profile large --set steps=4096 --set channels=2048 \
        --backends triton --workloads tilessm-scan --graph ;;
  check)
    step check-fixed 250 --backends triton --dtype bf16,fp32 --min-time 0.02 --max-time 0.2 ;;
  check-large)
    # cells at this size take 15-75 s each (drawing the inputs dominates)
    step check-large-bf16 280 --profile large --backends triton --dtype bf16 \
        --min-time 0.02 --max-time 0.2
    step check-large-fp32 280 --profile large --backends triton --dtype fp32 \
        --min-time 0.02 --max-time 0.2 ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
reports=$(ls "$work"/fixed*.json "$work"/large*.json 2>/dev/null)
[ -n "$reports" ] && python3 scripts/perf_table.py --bandwidth "$work/bandwidth.json" $reports \
    | tee "$work/tables.md"
grep -hE "incorrect|error|crashed|timeout" "$work"/*.md || echo "no failing cell"
tar czf "$OUT_DIR/results-$part.tgz" -C "$work" .
