"""Reading a Markdown report as a reader would: a numbered note and the cells that cite it."""

from __future__ import annotations

import re


def note_number(markdown: str, text: str) -> int | None:
    """The number the report's notes give ``text``, or None where no note says it.

    Tests look the number up instead of assuming it: a timing note a noisy host adds (a
    bimodal sample, say) takes a number first and shifts the rest.
    """
    found = re.search(rf"^(\d+)\. {re.escape(text)}$", markdown, re.MULTILINE)
    return int(found.group(1)) if found else None
