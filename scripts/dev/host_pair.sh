#!/usr/bin/env bash
# scripts/dev/host_triton.sh on both cards of a two-GPU machine at once, each card its own
# fresh processes (OUT/gpu0/host.tgz, OUT/gpu1/host.tgz): two cards for one machine's start.
# The two share the host's CPUs (32 cores) and nothing else the suite times.
#   [SPIN=1] [VARIANT="ARGS"] bash scripts/dev/host_pair.sh OUT [RUNS]
dest=${1:?OUT folder}
runs=${2:-2}
mkdir -p "$dest"
cards=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
[ "$cards" -ge 2 ] || { echo "host_pair.sh: $cards card(s) here, 2 needed" >&2; exit 2; }
source scripts/gpu_env.sh >"$dest/env.txt" 2>&1
[ "${SPIN:-0}" = 1 ] && python3 -m pip install -q --no-deps --no-build-isolation -e tests/plugins >/dev/null
for card in 0 1; do
    ENV_READY=1 HOST_TMP=/tmp/host$card CUDA_VISIBLE_DEVICES=$card \
        bash scripts/dev/host_triton.sh "$dest/gpu$card" "$runs" >"$dest/gpu$card.txt" 2>&1 &
done
wait
cat "$dest"/*.txt
