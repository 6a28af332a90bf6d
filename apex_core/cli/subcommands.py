"""The subcommands of ``apex-bench``: each a module with ``main(argv) -> int``, imported only when used."""

from __future__ import annotations

# name -> module with ``main(argv: list[str]) -> int``
SUBCOMMANDS: dict[str, str] = {
    "compare": "apex_core.cli.compare_command",
    "baseline": "apex_core.cli.baseline_command",
    "attest": "apex_core.cli.attest_command",
    "export-onnx": "apex_core.cli.export_onnx_command",
    "sweep": "apex_core.cli.sweep_command",
    "doctor": "apex_core.cli.doctor_command",
    "history": "apex_core.cli.history_command",
    "leaderboard": "apex_core.cli.leaderboard_command",
    "report": "apex_core.cli.report_command",
}
