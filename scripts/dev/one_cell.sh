#!/usr/bin/env bash
# Does a cell measured alone read as it does in the whole suite? scripts/gpu_gate_confirm.sh
# measures only the failing cells again, so its runs must read what a full run would. Each round:
# the fixed triton suite in fp16 (runN.json), then each of CELLS in a process of its own
# (one-CELL-N.json); compare the two with python scripts/dev/p50_table.py DIR (onecell.tgz unpacked).
#   [CELLS="w:c w2"] bash scripts/dev/one_cell.sh OUT [RUNS]
dest=${1:?OUT folder}
runs=${2:-3}
out=/tmp/onecell
rm -rf "$out"; mkdir -p "$out" "$dest"  # a warm machine keeps /tmp: no report of an earlier call
[ "${ENV_READY:-0}" = 1 ] || source scripts/gpu_env.sh >"$out/env.txt" 2>&1
suite=(--workloads fusiongate,tile-stage1,tilepack,tilessm-scan,tileunpack,ff-infer)
cells=${CELLS:-tilessm-scan:forward tilepack tileunpack:blend}
for r in $(seq 1 "$runs"); do
    timeout 240 apex-bench --quiet --no-history --device cuda "${suite[@]}" --backends triton --dtype fp16 \
        --output-json "$out/run$r.json" >"$out/run$r.out" 2>&1
    echo "run$r exit $?" | tee -a "$out/env.txt"
    for cell in $cells; do
        timeout 120 apex-bench --quiet --no-history --device cuda --workloads "$cell" --backends triton --dtype fp16 \
            --output-json "$out/one-${cell/:/-}-$r.json" >"$out/one-${cell/:/-}-$r.out" 2>&1
        echo "one $cell $r exit $?" | tee -a "$out/env.txt"
    done
done
tar czf "$dest/onecell.tgz" -C "$out" .
