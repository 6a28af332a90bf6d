"""``apex-bench --help`` names every subcommand the dispatcher knows."""

import pytest

from apex_core.cli.main import SUBCOMMANDS, main


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    line = next(line for line in text.splitlines() if line.startswith("subcommands:"))
    listed = line.removeprefix("subcommands:").split("(")[0].replace(",", " ").split()
    assert listed == list(SUBCOMMANDS)
    assert {"history", "leaderboard", "report", "doctor"} <= set(listed)


def test_help_lists_the_interrupt_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    codes = text.split("exit codes:")[1].split("subcommands:")[0]
    assert "130 / 143" in codes and "SIGTERM" in codes
