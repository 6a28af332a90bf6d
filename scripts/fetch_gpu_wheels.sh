#!/usr/bin/env bash
# Download the wheels the GPU machine lacks into .whl/ (ignored by git, carried by the device call).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl \
    stevedore jsonschema jsonschema-specifications referencing rpds-py nvidia-ml-py
