#!/usr/bin/env bash
# The committed GPU baseline of this machine's first GPU model: baselines/gpu-fixed-<model>.json,
# <model> the name nvidia-smi reports, lowercased, "NVIDIA " dropped, runs of other characters
# as "-" ("NVIDIA H100 80GB HBM3" -> baselines/gpu-fixed-h100-80gb-hbm3.json). The gate's
# environment key refuses a baseline of another model anyway; this picks the right file.
set -euo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null || true)
[ -n "$name" ] || { echo "gpu_baseline_path: nvidia-smi named no GPU" >&2; exit 2; }
slug=$(printf '%s' "$name" | sed -e 's/^NVIDIA //I' -e 's/[^A-Za-z0-9]\{1,\}/-/g' -e 's/^-//' -e 's/-$//' \
       | tr '[:upper:]' '[:lower:]')
echo "baselines/gpu-fixed-$slug.json"
