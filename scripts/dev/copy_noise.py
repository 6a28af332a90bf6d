"""How precisely a run-start copy measures a card's bandwidth: the median of 10 copies (what
device_facts took) against the best of 10 and of 100, in ROUNDS rounds of one process.
Plain torch, so it runs without the project installed. Usage: python scripts/dev/copy_noise.py [ROUNDS]"""

import statistics
import sys
import time

import torch

NBYTES = 512 * 2**20


def copies(src, dst, repeats):
    seconds = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        seconds.append(start.elapsed_time(end) / 1e3)
    return [2 * NBYTES / s / 1e9 for s in seconds]


def main(rounds):
    src = torch.randint(0, 255, (NBYTES,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copies(src, dst, 3)
    rows = {"median of 10": [], "best of 10": [], "median of 100": [], "best of 100": []}
    for _ in range(rounds):
        ten, hundred = copies(src, dst, 10), copies(src, dst, 100)
        rows["median of 10"].append(statistics.median(ten))
        rows["best of 10"].append(max(ten))
        rows["median of 100"].append(statistics.median(hundred))
        rows["best of 100"].append(max(hundred))
        time.sleep(0.2)
    print(torch.cuda.get_device_name(), f"{rounds} rounds")
    for name, values in rows.items():
        spread, stdev = max(values) / min(values) - 1, statistics.stdev(values) / statistics.mean(values)
        print(f"{name:14s} min {min(values):7.1f} max {max(values):7.1f} GB/s  "
              f"spread {spread:6.2%}  stdev {stdev:6.2%}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
