"""``apex-bench`` entry point: dispatch, error handling and exit codes.

``apex-bench [flags]`` runs the suite; ``apex-bench SUBCOMMAND ...`` runs one of
``SUBCOMMANDS``, each a module with ``main(argv) -> int``, imported only when used.
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence

from apex_core.cli.args import build_run_parser
from apex_core.cli.run_command import run_command
from apex_core.cli.signals import interrupted_exit_code, keep_ignoring_if_stopping
from apex_core.cli.subcommands import SUBCOMMANDS
from apex_core.errors import ApexBenchError, printable

# an error of apex-bench itself, not of the user's input or a cell: its own code, not 1
EXIT_INTERNAL = 3


def _internal_error(exc: BaseException) -> int:
    """One line on stderr naming the error and where its traceback went; exit code 3."""
    handle, path = tempfile.mkstemp(prefix="apex-bench-internal-", suffix=".log")
    with os.fdopen(handle, "w", encoding="utf-8") as log:
        log.write("".join(traceback.format_exception(exc)))
    print(f"apex-bench: internal error: {type(exc).__name__}: {printable(str(exc))[:200]} "
          f"(traceback in {path})", file=sys.stderr)
    return EXIT_INTERNAL


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns 0, 1 (failed cell or gate), 2 (usage error) or 3 (internal error)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] in SUBCOMMANDS:
            return int(importlib.import_module(SUBCOMMANDS[args[0]]).main(args[1:]))
        return run_command(build_run_parser().parse_args(args))
    except ApexBenchError as exc:  # usage errors and every other deliberate error: one line
        print(f"apex-bench: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        print("apex-bench: interrupted", file=sys.stderr)
        return interrupted_exit_code(stop)
    except Exception as exc:
        return _internal_error(exc)
    finally:
        keep_ignoring_if_stopping()


if __name__ == "__main__":
    sys.exit(main())
