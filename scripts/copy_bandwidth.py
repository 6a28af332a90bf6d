"""Measure the card's device-to-device copy bandwidth (bytes read + written per second).

The roofline floor of a memory-bound workload is its minimal bytes over this number; every
CUDA run measures it too (``environment.device_facts.copy_gbps``, apex_core/measure/doctor.py).
Usage: python scripts/copy_bandwidth.py [--gib 2] [--json OUT]
"""

from __future__ import annotations

import argparse
import json

from apex_core.measure.doctor import copy_bandwidth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    result = copy_bandwidth(int(args.gib * 2**30), repeats=30)
    print(f"{result['gpu']}: copy {result['copy_gbps']:.0f} GB/s median "
          f"(best {result['best_gbps']:.0f}) over {result['bytes_per_copy'] / 1e9:.1f} GB")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
