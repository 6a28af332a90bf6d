#!/usr/bin/env bash
# The adapters on one GPU (issue 16's device bar): the fixed profile of torch-reference,
# triton, jax and the example external command (examples/external, numpy on the host: its
# numbers are the tool's own, method "external"), then one triton run gated against the
# committed baseline of this GPU model. Reports and logs under OUT.
#   bash scripts/dev/adapters_gpu.sh OUT
OUT_DIR=${1:?usage: adapters_gpu.sh OUT}
mkdir -p "$OUT_DIR"
[ -f scripts/gpu_env.sh ] && [ -d .whl ] && source scripts/gpu_env.sh
export PYTHONUNBUFFERED=1
python3 -c 'import jax; print("jax", jax.__version__, jax.devices())' 2>&1 | tail -1
# the example's own config allows the CPU only; this one lets its cells run beside CUDA cells
cat > "$OUT_DIR/ext.toml" <<TOML
[external.numpy]
command = ["python3", "numpy_bench.py"]
description = "tilepack and fusiongate in numpy (examples/external)"
cwd = "$PWD/examples/external"
workloads = ["tilepack", "fusiongate"]
devices = ["cpu", "cuda"]
TOML
start=$(date +%s)
timeout 420 apex-bench --device cuda --profile fixed --config "$OUT_DIR/ext.toml" \
  --backends torch-reference,triton,jax,ext:numpy --quiet \
  --output-json "$OUT_DIR/adapters.json" --output-md "$OUT_DIR/adapters.md" --no-history
echo "adapters: exit $?, wall $(( $(date +%s) - start )) s"
python3 - "$OUT_DIR/adapters.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["benchmarks"]:
    s = c.get("stats") or {}
    print(f'{c["workload"]:13} {c["case"]:13} {c["backend"]:16} {c["dtype"]:5} {c["status"]:9} '
          f'{c.get("timing_method") or "":14} p50 {s.get("p50_ms", float("nan"))*1e3:9.2f} us  '
          f'{c.get("correctness")}  {(c.get("reason") or "")[:80]}')
PY
baseline=$(bash scripts/gpu_baseline_path.sh)
timeout 240 apex-bench --device cuda --profile fixed --backends triton --quiet --no-history \
  --output-json "$OUT_DIR/triton.json" --output-md "$OUT_DIR/triton.md" \
  --compare --baseline "$baseline" --compare-md "$OUT_DIR/compare.md"
echo "triton gate against $baseline: exit $?"
tail -n +1 "$OUT_DIR/compare.md" | head -60
