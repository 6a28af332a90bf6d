#!/usr/bin/env bash
# A kernel change measured by apex-bench itself before it lands: ROUNDS rounds of two fresh
# processes each, the working tree as is (A) and with VARIANT's files in place of its own (B), in
# turn, so drift falls on both. Every check stays on, so a wrong B cell reads `incorrect`. Prints
# each cell's p50 (median over rounds) for A and B and B/A; the reports go to DEST/ab.tgz.
# VARIANT is a folder of changed files at their paths in the repository, ignored and named in the
# call's carry (e.g. `git diff --name-only main BRANCH | xargs -I{} sh -c 'mkdir -p .variants/x/$(dirname {})
# && git show BRANCH:{} > .variants/x/{}'`).
#   bash scripts/dev/variant_ab.sh DEST VARIANT ROUNDS [apex-bench arguments ...]
set -u
dest=${1:?DEST folder} variant=${2:?VARIANT folder} rounds=${3:?ROUNDS}
shift 3
out=/tmp/ab
# fresh each time: a warm machine keeps /tmp, and an earlier variant's reports must not be read as this one's
rm -rf "$out"
mkdir -p "$out"
source scripts/dev/variant_files.sh
variant_save "$variant"
source scripts/gpu_env.sh >"$out/env.txt" 2>&1
run() {  # run NAME: one fresh process of the suite
    timeout 280 apex-bench --quiet --no-history --device cuda "$@" --output-json "$out/$name.json" \
        >"$out/$name.out" 2>&1
    echo "$name exit $?" | tee -a "$out/env.txt"
}
for r in $(seq 1 "$rounds"); do
    name=a$r run "$@"
    variant_apply "$variant"
    name=b$r run "$@"
    variant_restore
done
tar czf "$dest/ab.tgz" -C "$out" .
python3 - "$out" <<'PY'
import json, statistics, sys
from pathlib import Path
cells = {}
for path in sorted(Path(sys.argv[1]).glob("[ab]*.json")):
    for cell in json.loads(path.read_text())["benchmarks"]:
        key = f"{cell['workload']}/{cell['case']}/{cell['backend']}/{cell['dtype']}"
        p50 = (cell.get("stats") or {}).get("p50_ms") if cell["status"] == "ok" else None
        cells.setdefault(key, {"a": [], "b": []})[path.name[0]].append(p50)
for key, runs in sorted(cells.items()):
    a, b = ([x for x in runs[s] if x is not None] for s in "ab")
    if not a or not b:
        print(f"{key:50s} A {runs['a']} B {runs['b']} (a cell not ok)")
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{key:50s} A {ma * 1e3:8.3f} us  B {mb * 1e3:8.3f} us  B/A {mb / ma:6.3f}  (runs {len(a)}, {len(b)})")
PY
