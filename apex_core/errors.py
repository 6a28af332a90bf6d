"""The exception hierarchy: one root, a few specific children; and the words errors are made of."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ApexBenchError(Exception):
    """Root of every error apex-bench raises on purpose."""


class UsageError(ApexBenchError):
    """The user asked for something invalid (name, flag value, path); exit code 2."""


class ParamError(UsageError):
    """A workload parameter (from a profile or ``--set``) is unknown or out of range."""


class InputValidationError(ApexBenchError):
    """Generated or supplied inputs break a workload's contract (e.g. an index out of range)."""


class PluginError(ApexBenchError):
    """A plugin could not be loaded, constructed, or clashes with another plugin."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message ("" when it has none); tracebacks go to logs."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def one_line(text: str) -> str:
    """``text`` on one line: reasons and error messages never span lines (tools' messages may)."""
    return " ".join(str(text).split())


def describe_exception(exc: BaseException) -> str:
    """``Type: message`` on one line, for reasons recorded in cells and printed on the terminal."""
    text = one_line(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def printable(text: str) -> str:
    """``text`` with control characters escaped, so a message is one line and cannot drive the terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'triton'?)`` when one of ``choices`` is close to a mistyped ``word``, else ""."""
    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def plural(count: int, noun: str) -> str:
    """``1 run``, ``2 runs``: a count with its noun (an English plural in -s)."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
