"""The command line's value parsers, and the parser whose errors are one line (exit 2)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

from apex_core.errors import did_you_mean, printable

Number = TypeVar("Number", int, float)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are a single line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        # control characters from the command line are escaped, never echoed raw
        sys.stderr.write(f"{self.prog}: error: {printable(message)}{self._flag_hint(message)}\n")
        sys.exit(2)

    def _flag_hint(self, message: str) -> str:
        """A "did you mean" for the first unrecognized flag, among this parser's own."""
        if not message.startswith("unrecognized arguments: "):
            return ""
        flags = [f for action in self._actions for f in action.option_strings if f.startswith("--")]
        first = message.removeprefix("unrecognized arguments: ").split()[0].partition("=")[0]
        return did_you_mean(first, flags) if first.startswith("--") else ""


def number(text: str, kind: Callable[[str], Number], expected: str) -> Number:
    """``text`` as an int or float; anything else is the flag's one-line error ``expected ..., got 'text'``."""
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def positive_int(text: str) -> int:
    value = number(text, int, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = number(text, int, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def positive_float(text: str) -> float:
    value = number(text, float, "a positive number")
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


# no duration a person means is longer than a week; beyond it timers and queues overflow
MAX_SECONDS = 7 * 24 * 3600.0
SEED_MAX = 2**63 - 1


def seconds(text: str, allow_zero: bool = True) -> float:
    """A finite duration in seconds, >= 0 (or > 0), at most a week."""
    value = number(text, float, "a number of seconds")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds, got {text!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise argparse.ArgumentTypeError(f"must be {'>=' if allow_zero else '>'} 0, got {value}")
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SECONDS:.0f} s (a week), got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    return seconds(text, allow_zero=False)


def seed(text: str) -> int:
    value = non_negative_int(text)
    if value > SEED_MAX:
        raise argparse.ArgumentTypeError(f"must be below 2**63, got a {len(str(value))}-digit number")
    return value


def fraction(text: str) -> float:
    """A number strictly between 0 and 1 (the noise target)."""
    value = positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be below 1, got {value}")
    return value
