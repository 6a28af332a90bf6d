#!/usr/bin/env bash
# Download the wheels the GPU machine lacks into .whl/ (ignored by git, carried by the device call).
# With --ray, also Ray for --executor ray, slimmed into .whl-ray/ray-slim.tar.xz (about 30 MB):
# its wheel (about 80 MB) is more than a device call carries, and apex-bench needs only Ray core.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl \
    stevedore jsonschema jsonschema-specifications referencing rpds-py nvidia-ml-py

if [ "${1:-}" = --ray ]; then
    grep -qx '/.whl-ray/' .git/info/exclude || echo '/.whl-ray/' >> .git/info/exclude
    tmp=$(mktemp -d)
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux2014_x86_64 -d "$tmp" "ray>=2.9"
    mkdir -p "$tmp/site" .whl-ray
    # unzip keeps the executable bits of Ray's gcs_server and raylet
    (cd "$tmp/site" && unzip -q "$tmp"/ray-*.whl \
        && rm -rf ray/jars ray/rllib ray/serve ray/data ray/tune ray/train ray/air ray/llm ray/workflow)
    tar cf - -C "$tmp/site" . | xz -6 -T0 > .whl-ray/ray-slim.tar.xz
    rm -rf "$tmp"
fi
