"""Measure the card's device-to-device copy bandwidth (bytes read + written per second).

The roofline floor of a memory-bound workload is its minimal bytes over this number.
Usage: python scripts/copy_bandwidth.py [--gib 2] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch


def copy_bandwidth(gib: float, repeats: int = 30) -> dict:
    n = int(gib * 2**30)
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(5):
        dst.copy_(src)
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    assert torch.equal(dst[:: 2**20], src[:: 2**20])
    median = statistics.median(times)
    return {
        "gpu": torch.cuda.get_device_name(),
        "bytes_per_copy": 2 * n,
        "median_s": median,
        "copy_gbps": 2 * n / median / 1e9,
        "best_gbps": 2 * n / min(times) / 1e9,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    result = copy_bandwidth(args.gib)
    print(f"{result['gpu']}: copy {result['copy_gbps']:.0f} GB/s median "
          f"(best {result['best_gbps']:.0f}) over {result['bytes_per_copy'] / 1e9:.1f} GB")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
