#!/usr/bin/env bash
# Is a machine kind's timer floor its own, and does the net time carry it? The fixed triton suite
# in fp16 under the event timer (default) and the kernel timer (--timer kernel), on each card
# alone and, on a two-GPU machine, on both cards at once (the two processes share the host).
# Reports KIND-cC-TIMER.json (KIND: alone, both; C the card) in OUT/kind.tgz; compare with
# python scripts/dev/p50_table.py DIR (the .tgz unpacked into DIR).
#   bash scripts/dev/host_kind.sh OUT
dest=${1:?OUT folder}
out=/tmp/kind
rm -rf "$out"; mkdir -p "$out" "$dest"  # a warm machine keeps /tmp: no report of an earlier call
export CUDA_DEVICE_ORDER=PCI_BUS_ID  # CUDA's card numbers as nvidia-smi's, so env.txt names the card measured
source scripts/gpu_env.sh >"$out/env.txt" 2>&1
nvidia-smi --query-gpu=name,uuid,pci.bus_id,driver_version,clocks.max.sm,power.limit,temperature.gpu \
    --format=csv >>"$out/env.txt"
nvidia-smi topo -m >>"$out/env.txt" 2>&1
cards=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
suite() {  # name, card, extra apex-bench arguments
    local name=$1 card=$2; shift 2
    CUDA_VISIBLE_DEVICES=$card timeout 200 apex-bench --quiet --no-history --device cuda \
        --workloads fusiongate,tile-stage1,tilepack,tilessm-scan,tileunpack,ff-infer --backends triton \
        --dtype fp16 "$@" --output-json "$out/$name.json" >"$out/$name.out" 2>&1
    echo "$name exit $?" >>"$out/env.txt"
}
for card in $(seq 0 $((cards - 1))); do
    suite alone-c$card-event "$card"
    suite alone-c$card-kernel "$card" --timer kernel
done
if [ "$cards" -gt 1 ]; then
    for timer in event kernel; do
        args=(); [ $timer = kernel ] && args=(--timer kernel)
        for card in $(seq 0 $((cards - 1))); do suite both-c$card-$timer "$card" "${args[@]}" & done
        wait
    done
else
    suite alone-c0-event2 0
    suite alone-c0-kernel2 0 --timer kernel
fi
tar czf "$dest/kind.tgz" -C "$out" .
cat "$out/env.txt"
