#!/usr/bin/env bash
# Install apex-bench on an offline GPU machine: the wheels it lacks travel in .whl/
# (see docs/gpu.md), then an editable install without touching the network.
# Usage: source scripts/gpu_env.sh
set -e
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null
set +e
python3 - <<'PY'
import torch, triton
p = torch.cuda.get_device_properties(0)
print(f"gpu {p.name}, {p.multi_processor_count} SMs, L2 {p.L2_cache_size/2**20:.0f} MiB; "
      f"torch {torch.__version__}, triton {triton.__version__}")
PY
