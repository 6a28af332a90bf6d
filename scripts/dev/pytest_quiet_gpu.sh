#!/usr/bin/env bash
# On a GPU machine: the apex_bench fixture on CUDA (plain, under xdist, compared with itself) and
# what a --quiet run prints. Usage: bash scripts/dev/pytest_quiet_gpu.sh OUT
out=${1:?OUT folder}
source scripts/gpu_env.sh
export PYTHONUNBUFFERED=1
py="python3 -m pytest examples/pytest -p no:cacheprovider -o addopts= -rA"
$py --apex-bench-json "$out/one.json" > "$out/one.txt" 2>&1; echo "plain exit $?" >> "$out/one.txt"
$py -n 2 --apex-bench-json "$out/two.json" > "$out/two.txt" 2>&1; echo "xdist exit $?" >> "$out/two.txt"
$py --apex-bench-compare "$out/one.json" >> "$out/two.txt" 2>&1; echo "compare exit $?" >> "$out/two.txt"
python3 - "$out" <<'PY' >> "$out/two.txt" 2>&1
import json, sys
from apex_core.report.schema import validate_report
for name in ("one", "two"):
    record = json.load(open(f"{sys.argv[1]}/{name}.json"))
    validate_report(record)
    print(name, "valid", [(c["workload"], c["backend"], c["status"], c["device"], c["timing_method"],
                          round(c["stats"]["p50_ms"] * 1e3, 2)) for c in record["benchmarks"]])
PY
start=$(date +%s)
apex-bench --quiet --no-history --workloads tilepack,fusiongate \
    --backends torch-reference,triton,torch-compile,jax --output-json /tmp/q/q.json \
    --output-md /tmp/q/q.md > "$out/quiet.out" 2> "$out/quiet.err"
echo "quiet exit $? in $(( $(date +%s) - start )) s" >> "$out/quiet.out"
cp /tmp/q/q.log "$out/quiet.log" 2>/dev/null
tar czf "$out/all.tgz" -C "$out" one.txt two.txt quiet.out quiet.err
