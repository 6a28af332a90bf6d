"""``apex-bench`` entry point: dispatch, error handling and exit codes.

``apex-bench [flags]`` runs the suite; ``apex-bench SUBCOMMAND ...`` runs one of
``SUBCOMMANDS``, each a module with ``main(argv) -> int``, imported only when used.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from apex_core.errors import ApexBenchError

# name -> module with ``main(argv: list[str]) -> int``
SUBCOMMANDS: dict[str, str] = {
    "compare": "apex_core.cli.compare_command",
    "baseline": "apex_core.cli.baseline_command",
    "attest": "apex_core.cli.attest_command",
    "export-onnx": "apex_core.cli.export_onnx_command",
    "sweep": "apex_core.cli.sweep_command",
    "doctor": "apex_core.cli.doctor_command",
}


def _run_suite(argv: list[str]) -> int:
    from apex_core.cli.args import build_run_parser
    from apex_core.cli.run_command import run_command

    return run_command(build_run_parser().parse_args(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns 0, 1 (failed cell or gate) or 2 (usage error)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] in SUBCOMMANDS:
            return int(importlib.import_module(SUBCOMMANDS[args[0]]).main(args[1:]))
        return _run_suite(args)
    except ApexBenchError as exc:  # usage errors and every other deliberate error: one line
        print(f"apex-bench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
