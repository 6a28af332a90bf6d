"""Helpers shared by the command-line tests."""


def one_line_error(capsys):
    """The single stderr line of a usage error (no traceback), checked and returned."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("apex-bench") and "Traceback" not in err[0]
    return err[0]
