"""``apex-bench doctor``: measure this machine's timers once and say what they can time truthfully."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from apex_core.api import check_device, default_device
from apex_core.cli.values import OneLineParser
from apex_core.files import atomic_write_text, check_writable
from apex_core.measure.doctor import advice, device_facts


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="apex-bench doctor",
        description="Measure the timer floors (one empty kernel per method), the host's launch cost, the "
        "copy bandwidth and a spin of known cycles against NVML's SM clock, then say which durations "
        "this machine times truthfully and with which method.")
    parser.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when available")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    device = args.device or default_device()
    check_device(device)
    if args.json:
        check_writable(Path(args.json), "--json")
    facts = device_facts(device)
    for line in advice(facts):
        print(line)
    if args.json:
        atomic_write_text(args.json, json.dumps(facts, indent=2, default=str) + "\n")
    return 0
