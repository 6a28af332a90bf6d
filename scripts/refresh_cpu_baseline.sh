#!/usr/bin/env bash
# Refresh baselines/cpu-smoke.json on a machine of the CI runner class (docs/baselines.md):
# run the gated suite N times (default 9) exactly as scripts/ci_perf_gate.sh does, then emit a
# baseline whose values are the medians over the runs. Review the diff before committing it.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-9}"
OUT="${APEX_REFRESH_DIR:-artifacts/baseline-refresh}"
PYTHON="${PYTHON:-python}"
mkdir -p "$OUT"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1   # as the gate runs (see ci_perf_gate.sh)
reports=()
for i in $(seq 1 "$RUNS"); do
    "$PYTHON" -m apex_core.cli.main --device cpu --profile smoke --backends torch-reference --quiet \
        --output-json "$OUT/run$i.json" --output-md "$OUT/run$i.md" --log-file "$OUT/run$i.log"
    reports+=("$OUT/run$i.json")
done
"$PYTHON" -m apex_core.cli.main baseline emit --from "${reports[@]}" --output baselines/cpu-smoke.json \
    --notes "CPU perf gate of CI (scripts/ci_perf_gate.sh): smoke profile, torch-reference, fp32, \
OMP_NUM_THREADS=1, on the CI runner class (2-core x86-64 VM). Values are medians over $RUNS runs; \
min_ms gates 2x slowdowns, p50_ms only gross ones. Refresh with scripts/refresh_cpu_baseline.sh \
(docs/baselines.md)."
