#!/usr/bin/env bash
# scripts/dev/output_pools.py on one card: each round a control process (POOLS=0, runN.json) and one
# whose placements allocate from pools of their own (varN.json), the fixed triton suite in fp16.
# Then: tar xzf pools.tgz -C DIR; python scripts/dev/process_noise.py DIR (several machines: several DIRs).
#   bash scripts/dev/output_pools.sh OUT [RUNS]
dest=${1:?OUT folder}
runs=${2:-3}
out=/tmp/pools
rm -rf "$out"; mkdir -p "$out" "$dest"
[ "${ENV_READY:-0}" = 1 ] || source scripts/gpu_env.sh >"$out/env.txt" 2>&1
suite=(--workloads fusiongate,tile-stage1,tilepack,tilessm-scan,tileunpack,ff-infer --backends triton --dtype fp16)
for r in $(seq 1 "$runs"); do
    POOLS=0 timeout 240 python3 scripts/dev/output_pools.py "$out/run$r.json" "${suite[@]}" >"$out/run$r.out" 2>&1
    echo "run$r (control) exit $?" | tee -a "$out/env.txt"
    POOLS=1 timeout 240 python3 scripts/dev/output_pools.py "$out/var$r.json" "${suite[@]}" >"$out/var$r.out" 2>&1
    echo "var$r (pools) exit $?" | tee -a "$out/env.txt"
done
tar czf "$dest/pools.tgz" -C "$out" .
