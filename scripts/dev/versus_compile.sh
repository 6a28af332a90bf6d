#!/usr/bin/env bash
# Issue 28's bar, triton's kernel time at or below torch.compile's: both backends in one process per
# profile, fp16, the kernel timer, every check on; each profile cut at its deadline with SIGINT (the
# report keeps every finished cell). Writes OUT/versus.tgz (reports, roofline tables, the p50 table).
#   bash scripts/dev/versus_compile.sh OUT [PROFILE:DEADLINE_S ...]   (default fixed:240 large:300)
OUT_DIR=${1:?usage: versus_compile.sh OUT [PROFILE:DEADLINE_S ...]}
shift
specs=${*:-fixed:240 large:300}
work=/tmp/versus-compile
for spec in $specs; do
  [[ $spec == *:* ]] || { echo "versus_compile: not PROFILE:DEADLINE_S: '$spec'" >&2; exit 2; }
done
# fresh each time: a warm machine keeps /tmp, and an earlier call's report must not be read as this one's
rm -rf "$work"
mkdir -p "$OUT_DIR" "$work"
[ -f scripts/gpu_env.sh ] && [ -d .whl ] && source scripts/gpu_env.sh
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader > "$work/gpu.txt"
python3 scripts/copy_bandwidth.py --json "$work/bandwidth.json" > /dev/null
for spec in $specs; do
  profile=${spec%%:*} deadline=${spec##*:}
  start=$(date +%s)
  timeout -s INT -k 30 "$deadline" apex-bench --device cuda --profile "$profile" \
    --backends triton,torch-compile --dtype fp16 --timer kernel --no-history --quiet \
    --output-json "$work/$profile.json" --output-roofline "$work/$profile-roofline.md" \
    > "$work/$profile.log" 2>&1
  echo "$profile: exit $? after $(( $(date +%s) - start )) s" | tee -a "$work/steps.txt"
  [ -f "$work/$profile.json" ] || echo "$profile: no report (see $profile.log)"
  [ -f "$work/$profile.json" ] && python3 - "$work/$profile.json" <<'PY' | tee "$work/$profile-versus.md"
import json, sys
cells = json.load(open(sys.argv[1]))["benchmarks"]
by = {}
for c in cells:
    p50 = (c.get("stats") or {}).get("p50_ms") if c["status"] == "ok" else None
    by.setdefault(f"{c['workload']}/{c['case']}", {})[c["backend"]] = (c["status"], p50)
print("| cell | triton us | torch-compile us | triton / torch-compile |\n| --- | --- | --- | --- |")
for cell, b in by.items():
    t, k = (b.get(name, ("absent", None)) for name in ("triton", "torch-compile"))
    text = [f"{1e3 * v[1]:.3f}" if v[1] else v[0] for v in (t, k)]
    ratio = f"{t[1] / k[1]:.2f}" if t[1] and k[1] else "–"
    print(f"| {cell} | {text[0]} | {text[1]} | {ratio} |")
PY
  tar czf "$OUT_DIR/versus.tgz" -C "$work" .
done
