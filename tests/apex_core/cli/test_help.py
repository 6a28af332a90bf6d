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
