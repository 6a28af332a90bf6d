"""What the lazy-output check saw: cheat-lazy-mapping (the test plugin) in this process (--inline)
with SpotChecks' read timing and its confirmation printed. On a GPU machine, test plugin installed:
    python scripts/dev/lazy_probe.py [ROUNDS]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from apex_core.cli.main import main
from apex_core.measure import spot_checks

real_slow, real_read, real_keep = (spot_checks.SpotChecks._slow_read, spot_checks.SpotChecks._read_in_time,
                                   spot_checks.SpotChecks.keep)


def slow(self, read_ms, call_ms):
    verdict = real_slow(self, read_ms, call_ms)
    print(f"  slow_read read {read_ms:.4g} ms call {call_ms:.4g} ms -> {verdict}", flush=True)
    return verdict


def read_in_time(self, index, sample_ms):
    recorded = self.read is not None
    print(f"  read_in_time sample {index} ({sample_ms:.4g} ms), read recorded: {recorded}", flush=True)
    return real_read(self, index, sample_ms)


def keep(self, outputs):
    print(f"  keep {type(outputs).__name__}", flush=True)
    return real_keep(self, outputs)


spot_checks.SpotChecks._slow_read = slow
spot_checks.SpotChecks._read_in_time = read_in_time
spot_checks.SpotChecks.keep = keep
for round_ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 2):
    print(f"round {round_}", flush=True)
    report = Path(f"/tmp/lazy{round_}.json")
    main(["--device", os.environ.get("DEVICE", "cuda"), "--workloads", "test-scale", "--backends",
          "cheat-lazy-mapping", "--inline", "--quiet", "--no-history", "--output-json", str(report)])
    cell = json.loads(report.read_text())["benchmarks"][0]
    print(f"  -> {cell['status']}: {cell['reason'][:200]}", flush=True)
