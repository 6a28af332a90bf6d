#!/usr/bin/env bash
# One host of several for the spread between hosts (docs/timing.md, "Between hosts"): RUNS fresh
# processes of the fixed triton suite in fp16 on this machine's card 0, each report carrying
# the card's fingerprint (UUID, copy, spin clock). Run it on fresh machines, one call each,
# and compare with `python scripts/dev/cards_spread.py` over the reports.
#   bash scripts/dev/host_triton.sh OUT [RUNS]
out=${1:?OUT folder}
runs=${2:-2}
source scripts/gpu_env.sh >"$out/env.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,pci.bus_id,clocks.max.sm,temperature.gpu --format=csv >>"$out/env.txt"
for r in $(seq 1 "$runs"); do
    start=$(date +%s)
    timeout 240 apex-bench --quiet --no-history --device cuda --backends triton --dtype fp16 \
        --output-json "$out/run$r.json" > "$out/run$r.out" 2>&1
    echo "run$r exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/env.txt"
done
