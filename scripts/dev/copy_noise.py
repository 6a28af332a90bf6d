"""How precisely a run-start copy measures a card's bandwidth: the median of 10 copies (what
device_facts took until 2026-11-28) against the best of 10 and of 100, in ROUNDS rounds of one
process, each round through the runs' own ``doctor.copy_bandwidth``.
Usage (after ``source scripts/gpu_env.sh``): python scripts/dev/copy_noise.py [ROUNDS]"""

import statistics
import sys
import time

import torch

from apex_core.measure.doctor import copy_bandwidth


def main(rounds):
    rows = {"median of 10": [], "best of 10": [], "median of 100": [], "best of 100": []}
    for _ in range(rounds):
        ten, hundred = copy_bandwidth(repeats=10), copy_bandwidth(repeats=100)
        rows["median of 10"].append(ten["copy_gbps"])
        rows["best of 10"].append(ten["best_gbps"])
        rows["median of 100"].append(hundred["copy_gbps"])
        rows["best of 100"].append(hundred["best_gbps"])
        time.sleep(0.2)
    print(torch.cuda.get_device_name(), f"{rounds} rounds")
    for name, values in rows.items():
        spread, stdev = max(values) / min(values) - 1, statistics.stdev(values) / statistics.mean(values)
        print(f"{name:14s} min {min(values):7.1f} max {max(values):7.1f} GB/s  "
              f"spread {spread:6.2%}  stdev {stdev:6.2%}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
