#!/usr/bin/env bash
# The closed-form tileunpack blend on a GPU (2026-11-28): each stage of STAGES ("WORKLOADS BACKENDS
# DEADLINE [PROFILE]", ;-separated; default the blend on the four built-in backends at the large
# profile; STAGES= runs none) through large_suspects.sh with every check on, then, while time is
# left and CHEATS is not 0, the CUDA output cheats (CHEAT_STEPS names output_cheats_cuda.py's steps).
#   [STAGES=...] [CHEATS=0|1] [CHEAT_STEPS=...] bash scripts/dev/blend_gpu.sh OUT [BUDGET_S]
OUT=${1:?usage: blend_gpu.sh OUT [BUDGET_S]}
BUDGET=${2:-540}
start=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - start) )); }
mkdir -p "$OUT"
source scripts/gpu_env.sh >"$OUT/env.txt" 2>&1  # not through a pipe: its exports must stay here
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >>"$OUT/env.txt"
suspects() {  # suspects WORKLOADS BACKENDS DEADLINE [PROFILE]
    local cap=$(( $3 < $(left) - 10 ? $3 : $(left) - 10 ))
    [ "$cap" -gt 30 ] || { echo "skipped $1 $2: $(left) s left" | tee -a "$OUT/summary.txt"; return; }
    BACKENDS=$2 bash scripts/dev/large_suspects.sh "$OUT" "$1" "$cap" "${4:-large}" 2>&1 | tee -a "$OUT/summary.txt"
}
IFS=';' read -ra stages <<<"${STAGES-tileunpack:blend torch-reference,torch-compile,triton,jax 260 large}"
for stage in "${stages[@]}"; do suspects $stage; done
if [ "${CHEATS:-1}" = 1 ] && [ "$(left)" -gt 60 ]; then
    timeout -s INT "$(( $(left) - 5 ))" python3 scripts/dev/output_cheats_cuda.py ${CHEAT_STEPS:-} >"$OUT/output_cheats.txt" 2>&1
    echo "output cheats: exit $?" >>"$OUT/output_cheats.txt"
fi
cp /tmp/large-*.log /tmp/fixed-*.log "$OUT"/ 2>/dev/null
echo "done after $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
