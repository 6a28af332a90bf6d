#!/usr/bin/env bash
# A kernel change measured by apex-bench itself before it lands: ROUNDS rounds of fresh
# processes, the working tree as is (A) and with VARIANT's files in place of its own (B), in
# turn, each round starting one arm later, so drift falls on all. Every check stays on, so a
# wrong B cell reads `incorrect`. Prints each cell's p50 (median over rounds) for A and B and
# B/A; the reports go to DEST/ab.tgz. VARIANT is a folder of changed files at their paths in the
# repository, ignored and named in the call's carry; several folders joined by ':' are each
# measured in every round (one process each), written as b, c, d, ... (at most 8), each printed
# against A. A folder from a branch:
#   git diff --name-only main BRANCH | xargs -I{} sh -c \
#       'mkdir -p .variants/x/$(dirname {}) && git show BRANCH:{} > .variants/x/{}'
#   bash scripts/dev/variant_ab.sh DEST VARIANT[:VARIANT ...] ROUNDS [apex-bench arguments ...]
set -u
dest=${1:?DEST folder} variant=${2:?VARIANT folder} rounds=${3:?ROUNDS}
shift 3
out=/tmp/ab
# fresh each time: a warm machine keeps /tmp, and an earlier variant's reports must not be read as this one's
rm -rf "$out"
mkdir -p "$out" "$dest"
source scripts/dev/variant_files.sh
IFS=: read -r -a variants <<<"$variant"
letters=(b c d e f g h i)
if (( ${#variants[@]} < 1 || ${#variants[@]} > ${#letters[@]} )); then
    echo "variant_ab: 1 to ${#letters[@]} variants, got ${#variants[@]}" >&2
    exit 2
fi
for v in "${variants[@]}"; do
    # an empty name would save and then copy the whole repository over itself
    [ -n "$v" ] && [ -d "$v" ] || { echo "variant_ab: not a variant folder: '$v'" >&2; exit 2; }
done
applied=0
# the tree's own files back however the script ends (a device call's time limit included)
trap '[ "$applied" = 1 ] && variant_restore' EXIT
trap 'exit 130' INT TERM
source scripts/gpu_env.sh >"$out/env.txt" 2>&1
run() {  # run NAME: one fresh process of the suite
    local start
    start=$(date +%s)
    timeout 280 apex-bench --quiet --no-history --device cuda "$@" --output-json "$out/$name.json" \
        >"$out/$name.out" 2>&1
    echo "$name exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/env.txt"
}
arms=("" "${variants[@]}")  # "" is the tree as is
names=(a "${letters[@]:0:${#variants[@]}}")
for r in $(seq 1 "$rounds"); do
    # each round starts one arm later, so no arm always runs first or last
    for i in "${!arms[@]}"; do
        j=$(( (i + r - 1) % ${#arms[@]} ))
        if [ -n "${arms[$j]}" ]; then
            variant_save "${arms[$j]}"
            variant_apply "${arms[$j]}"
            applied=1
        fi
        name=${names[$j]}$r run "$@"
        if [ "$applied" = 1 ]; then
            variant_restore
            applied=0
        fi
    done
done
paste -d' ' <(printf '%s\n' "${names[@]:1}") <(printf '%s\n' "${variants[@]}") | tee "$out/variants.txt"
tar czf "$dest/ab.tgz" -C "$out" .
python3 - "$out" <<'PY'
import json, statistics, sys
from pathlib import Path
cells = {}
for path in sorted(Path(sys.argv[1]).glob("[a-i][0-9]*.json")):
    for cell in json.loads(path.read_text())["benchmarks"]:
        key = f"{cell['workload']}/{cell['case']}/{cell['backend']}/{cell['dtype']}"
        p50 = (cell.get("stats") or {}).get("p50_ms") if cell["status"] == "ok" else None
        cells.setdefault(key, {}).setdefault(path.name[0], []).append(p50)
for key, runs in sorted(cells.items()):
    a = [x for x in runs.get("a", []) if x is not None]
    for side in sorted(set(runs) - {"a"}):
        b = [x for x in runs[side] if x is not None]
        if not a or not b:
            print(f"{key:50s} A {runs.get('a')} {side.upper()} {runs[side]} (a cell not ok)")
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{key:50s} A {ma * 1e3:8.3f} us  {side.upper()} {mb * 1e3:8.3f} us  "
              f"{side.upper()}/A {mb / ma:6.3f}  (runs {len(a)}, {len(b)})")
PY
