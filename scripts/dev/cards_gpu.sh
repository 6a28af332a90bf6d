#!/usr/bin/env bash
# On a host of several GPUs: the same build on every card at once, each run a fresh process with
# its card's fingerprint (docs/timing.md, "Between hosts"): per card ROUNDS x (the fixed triton
# suite in fp16, the spin pair as is, the spin pair 5 % slower), then on card 0 the
# tilessm-scan cells of torch-reference and torch-compile. (The cards' clocks are left as they
# are: --lock-clocks changes a machine's settings.) Everything lands in
# OUT/cards.tgz. With PROFILE large: only the triton suite, at the large profile (its cells take
# 20-60 s each on an H100: one round did not end within 240 s; give CARDS_TIMEOUT=540 and ROUNDS 1).
# Usage: [CARDS_TIMEOUT=S] bash scripts/dev/cards_gpu.sh OUT [ROUNDS] [PROFILE]
out=${1:?OUT folder}
rounds=${2:-2}
profile=${3:-fixed}
source scripts/gpu_env.sh
python3 -m pip install -q --no-deps --no-build-isolation -e tests/plugins >/dev/null
export PYTHONUNBUFFERED=1
work=/tmp/cards
mkdir -p "$work"
cards=$(nvidia-smi -L | wc -l)
spin=(--workloads test-spin-pair --backends test-working --no-energy)

run() {  # run CARD NAME [flags]: one fresh process on one card, its wall time in NAME.time
    local card=$1 name=$2; shift 2
    local start; start=$(date +%s)
    CUDA_VISIBLE_DEVICES=$card timeout "${CARDS_TIMEOUT:-240}" apex-bench --quiet --no-history --device cuda --profile "$profile" \
        --output-json "$work/$name.json" --output-md "$work/$name.md" --log-file "$work/$name.log" "$@" \
        > "$work/$name.out" 2>&1
    echo "$name exit $? in $(( $(date +%s) - start )) s" >> "$work/times.txt"
}

for card in $(seq 0 $((cards - 1))); do
    (
        for r in $(seq 1 "$rounds"); do
            run "$card" "card$card-triton-$r" --backends triton --dtype fp16
            [ "$profile" = fixed ] || continue
            run "$card" "card$card-spin-$r" "${spin[@]}"
            APEX_TEST_SPIN_SLOWDOWN=1.05 run "$card" "card$card-slow-$r" "${spin[@]}"
        done
    ) &
done
wait
[ "$profile" = fixed ] && run 0 scan --backends torch-reference,torch-compile --workloads tilessm-scan --dtype fp16,fp32
nvidia-smi -L > "$work/cards.txt"
tar czf "$out/cards.tgz" -C "$work" .
cat "$work/times.txt"
