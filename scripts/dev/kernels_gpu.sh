#!/usr/bin/env bash
# After a kernel change, the checks and measurements that need a GPU, in one device call:
#   1. the launcher tests compiled on the GPU, every configuration they pin (TEST_FILES: other files
#      than the three kernel test files)
#      (APEX_TEST_KERNEL_DEVICE=cuda, docs/kernels.md), with TEST_VARIANT's files in place when
#      it is set (its tests too, where the folder carries them; restored after), spread over
#      TEST_PROCS processes a test
#      at a time, each test's duration in the log (every pinned config compiles: on an H200 the
#      181 tests of 2026-11-28 took 303.6 s on 4 processes, pyproject's --maxprocesses 4 then
#      capping -n; the script now passes its own);
#   2. each VARIANT folder against the tree as is, by apex-bench itself (variant_ab.sh), at
#      PROFILE, for WORKLOADS;
#   3. torch.compile's kernel beside the triton launcher for each of CELLS (compile_vs_triton.py).
# Every step writes into DEST as it goes and appends its summary to DEST/summary.txt, printing it
# too, so a call cut off at its limit still returns what the steps before it wrote. DEST is the
# device's $OUT, which returns at most 8 files: this writes 5 (env, tests, summary and the two
# of CELLS), plus 2 per VARIANT, so name at most one with every step on. Each step has its own
# time limit; the call's must cover their sum.
#   [PROFILE=fixed] [ROUNDS=2] [WORKLOADS=ff-infer,tilessm-scan] [CELLS="tilepack"] [TESTS=1] \
#       [TEST_PROCS=14] [TEST_TIMEOUT=450] [TEST_VARIANT=.variants/x] [TEST_FILES="tests/... ..."] \
#       bash scripts/dev/kernels_gpu.sh DEST [VARIANT ...]
set -u
dest=${1:?DEST folder}
shift
mkdir -p "$dest"
source scripts/gpu_env.sh >"$dest/env.txt" 2>&1
say() { printf '%s\n' "$@" | tee -a "$dest/summary.txt"; }
if [ "${TESTS:-1}" = 1 ]; then
    limit=${TEST_TIMEOUT:-450}
    if [ -n "${TEST_VARIANT:-}" ]; then
        source scripts/dev/variant_files.sh
        variant_save "$TEST_VARIANT"
        variant_apply "$TEST_VARIANT"
    fi
    # shellcheck disable=SC2086  # TEST_FILES is a list of files
    APEX_TEST_KERNEL_DEVICE=cuda timeout "$limit" python3 -m pytest -v -p no:cacheprovider -x \
        -n "${TEST_PROCS:-14}" --maxprocesses "${TEST_PROCS:-14}" --dist load --durations=40 \
        ${TEST_FILES:-tests/apex_kernels/test_tile_kernels.py tests/apex_kernels/test_gate_scan_kernels.py \
        tests/apex_kernels/test_ff_infer_kernels.py} >"$dest/tests.txt" 2>&1
    code=$?
    [ -n "${TEST_VARIANT:-}" ] && variant_restore
    cut=""
    [ "$code" = 124 ] && cut="cut off at $limit s, "
    passed=$(grep -c ' PASSED' "$dest/tests.txt")
    failed=$(grep -c ' FAILED' "$dest/tests.txt")
    say "kernel tests on the GPU${TEST_VARIANT:+ with $TEST_VARIANT}: exit $code (${cut}$passed passed, $failed failed)," \
        "$(tail -1 "$dest/tests.txt")"
fi
for variant in "$@"; do
    name=variant-$(basename "$variant")  # never one of this script's own file names
    mkdir -p "$dest/$name"
    bash scripts/dev/variant_ab.sh "$dest/$name" "$variant" "${ROUNDS:-2}" --profile "${PROFILE:-fixed}" \
        --workloads "${WORKLOADS:-ff-infer,tilessm-scan}" --backends triton --dtype fp16 >"$dest/$name.txt" 2>&1
    say "$name against the tree (B/A):" "$(grep ' [B-I]/A \|not ok' "$dest/$name.txt")"
done
if [ -n "${CELLS:-}" ]; then
    rm -rf /tmp/compile
    mkdir -p /tmp/compile
    # shellcheck disable=SC2086  # CELLS is a list of cells
    timeout 300 python3 scripts/dev/compile_vs_triton.py /tmp/compile $CELLS --profile "${PROFILE:-fixed}" \
        >"$dest/compile.txt" 2>&1
    tar czf "$dest/compile.tgz" -C /tmp/compile .
    say "torch.compile beside triton:" "$(grep '^{' "$dest/compile.txt")"
fi
