#!/usr/bin/env bash
# One host of several for the spread between hosts (docs/timing.md, "Between hosts"): RUNS fresh
# processes of the fixed triton suite in fp16 on this machine's card 0, each report carrying
# the card's fingerprint (UUID, copy, spin clock). With SPIN=1 each round also runs the test
# plugin's spin pair as is and 5 % slower (a real planted slowdown, for the gate across hosts:
# a baseline from one machine's runs, `apex-bench compare` of the others'). Run it on fresh
# machines, one call each (about 40 s a round, 50 s with SPIN=1, after a minute's start),
# and compare with `python scripts/dev/cards_spread.py` over the reports. VARIANT="ARGS" adds a
# second suite process to each round with those apex-bench arguments (e.g. "--placements 16"),
# written as varN.json, so one set of machines compares a way of measuring with the default;
# several lists separated by ";" add one process each, written as varJ-N.json (J from 1).
# scripts/dev/host_pair.sh runs it on each card of a two-GPU machine at once (ENV_READY=1, the
# card chosen by CUDA_VISIBLE_DEVICES, HOST_TMP its own scratch folder).
#   [SPIN=1] [VARIANT="ARGS"] bash scripts/dev/host_triton.sh OUT [RUNS]
dest=${1:?OUT folder}
runs=${2:-2}
out=${HOST_TMP:-/tmp/host}  # packed into DEST/host.tgz at the end: only a few files come back from a call
rm -rf "$out"; mkdir -p "$out" "$dest"  # a warm machine keeps /tmp: no report of an earlier call
export CUDA_DEVICE_ORDER=PCI_BUS_ID  # CUDA's card numbers as nvidia-smi's, so env.txt names the card measured
if [ "${ENV_READY:-0}" != 1 ]; then
    source scripts/gpu_env.sh >"$out/env.txt" 2>&1
    [ "${SPIN:-0}" = 1 ] && python3 -m pip install -q --no-deps --no-build-isolation -e tests/plugins >/dev/null
fi
spin=(--workloads test-spin-pair --backends test-working --no-energy)
# the built-in workloads by name: with SPIN=1 the test plugin is installed and would join the suite
suite=(--workloads fusiongate,tile-stage1,tilepack,tilessm-scan,tileunpack,ff-infer)
nvidia-smi ${CUDA_VISIBLE_DEVICES:+-i "$CUDA_VISIBLE_DEVICES"} \
    --query-gpu=name,uuid,pci.bus_id,clocks.max.sm,temperature.gpu --format=csv >>"$out/env.txt"
for r in $(seq 1 "$runs"); do
    start=$(date +%s)
    timeout 240 apex-bench --quiet --no-history --device cuda "${suite[@]}" --backends triton --dtype fp16 \
        --output-json "$out/run$r.json" > "$out/run$r.out" 2>&1
    echo "run$r exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/env.txt"
    IFS=';' read -ra variants <<<"${VARIANT:-}"
    for j in "${!variants[@]}"; do
        name=var$r
        [ "${#variants[@]}" -gt 1 ] && name=var$((j + 1))-$r
        # shellcheck disable=SC2086  # each variant is a list of arguments
        timeout 240 apex-bench --quiet --no-history --device cuda "${suite[@]}" --backends triton --dtype fp16 \
            ${variants[$j]} --output-json "$out/$name.json" > "$out/$name.out" 2>&1
        echo "$name (${variants[$j]}) exit $?" | tee -a "$out/env.txt"
    done
    [ "${SPIN:-0}" = 1 ] || continue
    apex-bench --quiet --no-history --device cuda "${spin[@]}" --output-json "$out/spin$r.json" >/dev/null 2>&1
    APEX_TEST_SPIN_SLOWDOWN=1.05 apex-bench --quiet --no-history --device cuda "${spin[@]}" \
        --output-json "$out/slow$r.json" >/dev/null 2>&1
    echo "spin$r, slow$r exit $?" | tee -a "$out/env.txt"
done
tar czf "$dest/host.tgz" -C "$out" .
cat "$out/env.txt"
