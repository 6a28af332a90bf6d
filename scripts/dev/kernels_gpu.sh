#!/usr/bin/env bash
# After a kernel change, the checks and measurements that need a GPU, in one device call:
#   1. the launcher tests compiled on the GPU, every configuration they pin
#      (APEX_TEST_KERNEL_DEVICE=cuda, docs/kernels.md);
#   2. each VARIANT folder against the tree as is, by apex-bench itself (variant_ab.sh), at
#      PROFILE, for WORKLOADS;
#   3. torch.compile's kernel beside the triton launcher for each of CELLS (compile_vs_triton.py).
# Everything lands in DEST/kernels.tgz; the last lines printed are each step's summary.
#   [PROFILE=fixed] [ROUNDS=2] [WORKLOADS=ff-infer,tilessm-scan] [CELLS="tilepack"] [TESTS=1] \
#       bash scripts/dev/kernels_gpu.sh DEST [VARIANT ...]
set -u
dest=${1:?DEST folder}
shift
out=/tmp/kernels
mkdir -p "$out"
source scripts/gpu_env.sh >"$out/env.txt" 2>&1
summary=()
if [ "${TESTS:-1}" = 1 ]; then
    APEX_TEST_KERNEL_DEVICE=cuda timeout 400 python3 -m pytest -q -p no:cacheprovider -x \
        tests/apex_kernels/test_tile_kernels.py tests/apex_kernels/test_gate_scan_kernels.py \
        tests/apex_kernels/test_ff_infer_kernels.py >"$out/tests.txt" 2>&1
    summary+=("kernel tests on the GPU: exit $?, $(tail -1 "$out/tests.txt")")
fi
for variant in "$@"; do
    name=$(basename "$variant")
    mkdir -p "$out/$name"
    bash scripts/dev/variant_ab.sh "$out/$name" "$variant" "${ROUNDS:-2}" --profile "${PROFILE:-fixed}" \
        --workloads "${WORKLOADS:-ff-infer,tilessm-scan}" --backends triton --dtype fp16 >"$out/$name.txt" 2>&1
    summary+=("$name against the tree (B/A):" "$(grep 'B/A\|not ok' "$out/$name.txt")")
done
if [ -n "${CELLS:-}" ]; then
    # shellcheck disable=SC2086  # CELLS is a list of cells
    timeout 300 python3 scripts/dev/compile_vs_triton.py "$out/compile" $CELLS --profile "${PROFILE:-fixed}" \
        >"$out/compile.txt" 2>&1
    summary+=("torch.compile beside triton:" "$(grep '^{' "$out/compile.txt")")
fi
tar czf "$dest/kernels.tgz" -C "$out" .
printf '%s\n' "${summary[@]}"
