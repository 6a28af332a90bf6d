"""``apex-bench`` entry point: dispatch, error handling and exit codes."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from apex_core.errors import ApexBenchError, UsageError


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns 0, 1 (failed cell or gate) or 2 (usage error)."""
    from apex_core.cli.args import build_run_parser
    from apex_core.cli.run_command import run_command

    args = build_run_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return run_command(args)
    except UsageError as exc:
        print(f"apex-bench: error: {exc}", file=sys.stderr)
        return 2
    except ApexBenchError as exc:
        print(f"apex-bench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
