#!/usr/bin/env bash
# Stop every process a GPU job started, so none outlives the job and holds the GPU. Used by
# perf_gpu.yml at the start of a job (leftovers of an earlier job whose cleanup never ran)
# and, with `if: always()`, after the benchmark and again at the end.
#
#   gpu_job_cleanup.sh [SESSIONS_FILE]
#
# A process belongs to a job when it carries APEX_GPU_JOB_TAG in its environment (every
# command the workflow starts runs under that tag) or runs in one of the sessions listed in
# SESSIONS_FILE (one id a line; each command starts in its own session, so a worker that
# cleared its environment is still found). Any tag value counts: the self-hosted runner runs
# one job at a time, so a tagged process from an earlier job is an orphan. Each found process
# gets SIGTERM, then SIGKILL after APEX_GPU_CLEANUP_GRACE_S seconds (default 10). Processes
# still holding the GPU that no job started are named in a warning, never killed.
# Exit status: 0, or 1 when a found process survived SIGKILL.
set -uo pipefail

TAG=APEX_GPU_JOB_TAG
# started with the tag, this shell and its subshells would look like the job's own processes
if [ -n "${APEX_GPU_JOB_TAG+set}" ]; then
    exec env -u "$TAG" bash "$0" "$@"
fi
sessions_file="${1:-}"
grace_s="${APEX_GPU_CLEANUP_GRACE_S:-10}"

sessions=()
if [ -n "$sessions_file" ] && [ -f "$sessions_file" ]; then
    mapfile -t sessions < <(grep -E '^[0-9]+$' "$sessions_file")
fi

is_ours() {
    # pure bash (no grep or ps per process): the scan runs every 0.2 s while waiting
    local pid=$1 var stat state sid s
    [ "$pid" = "$$" ] && return 1
    { stat=$(< "/proc/$pid/stat"); } 2>/dev/null || return 1
    # fields after "pid (comm) ": state ppid pgrp session ...; comm may hold spaces
    read -r state _ _ sid _ <<< "${stat##*) }"
    # a zombie has released its memory and the GPU; only its parent can reap it
    [ "$state" = Z ] && return 1
    while IFS= read -r -d '' var; do
        [[ $var == "$TAG="* ]] && return 0
    done 2>/dev/null < "/proc/$pid/environ"
    for s in "${sessions[@]}"; do
        [ "$sid" = "$s" ] && return 0
    done
    return 1
}

ours() {
    local entry pid
    for entry in /proc/[0-9]*; do
        pid=${entry#/proc/}
        is_ours "$pid" && echo "$pid"
    done
}

describe() {
    local pid
    for pid in "$@"; do
        printf '%s(%s) ' "$pid" "$(tr -d '\n' < "/proc/$pid/comm" 2>/dev/null || echo gone)"
    done
}

mapfile -t found < <(ours)
if [ "${#found[@]}" -gt 0 ]; then
    echo "stopping ${#found[@]} process(es) the job left running: $(describe "${found[@]}")"
    kill -TERM "${found[@]}" 2>/dev/null
    deadline=$((SECONDS + grace_s))
    while [ "$SECONDS" -lt "$deadline" ]; do
        mapfile -t found < <(ours)
        [ "${#found[@]}" -eq 0 ] && break
        sleep 0.2
    done
    mapfile -t found < <(ours)
    if [ "${#found[@]}" -gt 0 ]; then
        echo "killing $(describe "${found[@]}")after ${grace_s}s"
        kill -KILL "${found[@]}" 2>/dev/null
        sleep 0.5
    fi
fi

status=0
mapfile -t survivors < <(ours)
if [ "${#survivors[@]}" -gt 0 ]; then
    echo "::error::still running after SIGKILL: $(describe "${survivors[@]}")"
    status=1
fi

# the GPU itself: whatever still holds it was not started by a job (or was reported above)
if command -v nvidia-smi > /dev/null 2>&1; then
    mapfile -t holders < <(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null \
        | tr -d ' ' | grep -E '^[0-9]+$')
    if [ "${#holders[@]}" -gt 0 ]; then
        echo "::warning::processes no job started hold the GPU: $(describe "${holders[@]}")"
    fi
fi

exit "$status"
