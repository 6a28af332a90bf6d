#!/usr/bin/env bash
# The core's GPU bar: torch-reference and torch-compile at the fixed profile, fp16, on one card.
# Usage (on the GPU machine): bash scripts/gpu_core_bench.sh OUTDIR
out=${1:-artifacts}
mkdir -p "$out"
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
export PYTHONUNBUFFERED=1
start=$(date +%s)
apex-bench --backends torch-reference,torch-compile --output-json "$out/fixed.json" \
    --output-md "$out/fixed.md"
echo "exit $?; wall $(( $(date +%s) - start )) s (fixed profile, fp16, cold L2, events)"
start=$(date +%s)
apex-bench --backends torch-reference,torch-compile --graph --output-json "$out/fixed-graph.json" \
    --output-md "$out/fixed-graph.md" --quiet
echo "exit $?; wall $(( $(date +%s) - start )) s (fixed profile, fp16, cold L2, CUDA graph)"
cat "$out/fixed.md" "$out/fixed-graph.md"
