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
  [ -f "$work/$profile.json" ] && python3 scripts/perf_table.py --versus triton,torch-compile "$work/$profile.json" \
    | tee "$work/$profile-versus.md"
  tar czf "$OUT_DIR/versus.tgz" -C "$work" .
done
