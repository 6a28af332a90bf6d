#!/usr/bin/env bash
# On a GPU machine: every fixed-profile cell of torch-reference, triton and jax under --quiet (what
# reaches the terminal), torch-compile on two workloads, the Markdown and HTML at a glance, and the
# apex_bench fixture under xdist. Usage: bash scripts/dev/glance_gpu.sh OUT
out=${1:?OUT folder}
source scripts/gpu_env.sh
export PYTHONUNBUFFERED=1
mkdir -p /tmp/q
start=$(date +%s)
apex-bench --quiet --no-history --device cuda --profile fixed --backends torch-reference,triton,jax \
    --output-json /tmp/q/fixed.json --output-md /tmp/q/fixed.md --html /tmp/q/fixed.html \
    > "$out/quiet.out" 2> "$out/quiet.err"
echo "fixed exit $? in $(( $(date +%s) - start )) s" >> "$out/quiet.out"
start=$(date +%s)
apex-bench --quiet --no-history --device cuda --workloads tilepack,fusiongate --backends torch-compile \
    --output-json /tmp/q/compile.json --output-md /tmp/q/compile.md >> "$out/quiet.out" 2>> "$out/quiet.err"
echo "compile exit $? in $(( $(date +%s) - start )) s" >> "$out/quiet.out"
python3 -m pytest examples/pytest -p no:cacheprovider -o addopts= -q -n 2 --apex-bench-json /tmp/q/fixture.json \
    > "$out/fixture.txt" 2>&1; echo "fixture exit $?" >> "$out/fixture.txt"
python3 - > "$out/cells.txt" 2>&1 <<'PY'
import json
for name in ("fixed", "compile", "fixture"):
    record = json.load(open(f"/tmp/q/{name}.json"))
    for c in record["benchmarks"]:
        p50 = (c.get("stats") or {}).get("p50_ms")
        print(name, c["workload"], c["case"], c["backend"], c["dtype"], c["status"],
              None if p50 is None else round(p50 * 1e3, 2), c.get("flags"),
              (c.get("metadata") or {}).get("host_load"), c.get("reason", "")[:80])
PY
cp /tmp/q/fixed.md /tmp/q/fixed.html /tmp/q/compile.md "$out/"
