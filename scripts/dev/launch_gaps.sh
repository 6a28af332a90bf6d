#!/usr/bin/env bash
# The device's gaps between dependent launches, into one file (the device returns few files):
# pdl_chain.py (what programmatic dependent launch takes off a chain of small kernels), then
# kernel_timeline.py for CELLS on the tree as is and, if VARIANT is given, with its files in place
# (restored after: variant_files.sh).
#   [CELLS="ff-infer"] [PROFILE=fixed] bash scripts/dev/launch_gaps.sh OUT_FILE [VARIANT]
set -u
out=${1:?OUT_FILE} variant=${2:-}
source scripts/gpu_env.sh >/dev/null 2>&1
timeline() {
    # shellcheck disable=SC2086  # CELLS is a list of cells
    timeout 150 python3 scripts/dev/kernel_timeline.py ${CELLS:-ff-infer} --profile "${PROFILE:-fixed}"
}
{
    echo "## pdl_chain"
    timeout 120 python3 scripts/dev/pdl_chain.py
    echo "## kernel_timeline, the tree"
    timeline
} >>"$out" 2>&1
if [ -n "$variant" ]; then
    source scripts/dev/variant_files.sh
    variant_save "$variant"
    variant_apply "$variant"
    { echo "## kernel_timeline, $variant"; timeline; } >>"$out" 2>&1
    variant_restore
fi
