"""Numbers in the HTML report: shown rounded, carried exactly, each naming where it comes from.

Every number the report shows as data goes through ``number()`` (or ``data_attrs()`` on an SVG
mark): the visible text is the value to four significant digits, and the element carries
``data-value`` (the exact float, as ``repr`` writes it) and ``data-src``, an expression over the
input documents, so a reader or a test can check every number against the JSON it came from.

Expressions (``DOC`` is ``run0``, ``run1``, ... in the order the runs were given, or ``gate``
for a compare summary):

- ``DOC#POINTER``: the value at the JSON pointer (RFC 6901) in that document;
- ``pct(EXPR,Q)``: the Q-th percentile of a list (``apex_core.stats.percentile``, linear);
- ``div(EXPR,EXPR)``: a ratio; ``scale(EXPR,FACTOR)``: a product with a constant (unit changes);
- ``judge(EXPR,EXPR,METRIC).FIELD``: a field (ratio, ci_low, ci_high) of
  ``apex_core.baseline.verdict.judge(first, second, seed=metric_seed(METRIC))``, as the gate judges;
- ``arg#NAME``: a value given on the command line (``--peak-tflops``);
- ``hist#run=ID&cell=KEY&metric=COLUMN``: a metric column of one cell of a history run
  (``KEY`` is ``workload/case/backend/dtype/device``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import attrs

from apex_core.stats import percentile


def fmt(value: float) -> str:
    """Four significant digits (the exponent form below 1e-4 and from 1e4 up)."""
    return "0" if value == 0 else f"{value:.4g}"


@attrs.frozen
class Q:
    """A number with its source expression; arithmetic on two keeps both in step."""

    value: float
    src: str

    @classmethod
    def at(cls, record: Mapping[str, Any], doc: str, *parts: str | int) -> Q | None:
        """The number at ``parts`` in ``record`` (document ``doc``), None when absent or not a number."""
        value: Any = record
        for part in parts:
            if isinstance(value, Mapping) and isinstance(part, str):
                value = value.get(part)
            elif isinstance(value, list) and isinstance(part, int) and -len(value) <= part < len(value):
                value = value[part]
            else:
                return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        return cls(float(value), pointer(doc, *parts))

    def __truediv__(self, other: Q) -> Q:
        return Q(self.value / other.value, f"div({self.src},{other.src})")

    def scaled(self, factor: float) -> Q:
        return Q(self.value * factor, f"scale({self.src},{factor!r})")


def percentile_of(sorted_values: Sequence[float], src: str, q: float) -> Q:
    """The q-th percentile of a list that ``src`` names (the list must be sorted here)."""
    return Q(percentile(sorted_values, q), f"pct({src},{q:g})")


def pointer(doc: str, *parts: object) -> str:
    """``DOC#/a/b/0``: a JSON pointer into one input document (``~`` and ``/`` escaped as RFC 6901 says)."""
    escaped = (str(p).replace("~", "~0").replace("/", "~1") for p in parts)
    return f"{doc}#/" + "/".join(escaped)


def judged(baseline: str, current: str, metric: str, field: str) -> str:
    return f"judge({baseline},{current},{metric}).{field}"


def history_src(run_id: int, cell_key: str, metric: str) -> str:
    return f"hist#run={run_id}&cell={quote(cell_key, safe='/-_.+')}&metric={metric}"


def data_attrs(q: Q) -> str:
    """The attributes that carry one number exactly and name its source (for SVG marks too)."""
    return f'data-value="{q.value!r}" data-src="{html.escape(q.src)}"'


def number(q: Q | None, unit: str = "", css: str = "num") -> str:
    """A shown number: ``<span>`` with the rounded text, the exact value and its source; '–' for none."""
    if q is None or not math.isfinite(q.value):
        return '<span class="none">–</span>'
    suffix = f" {html.escape(unit)}" if unit else ""
    return f'<span class="{css}" {data_attrs(q)}>{fmt(q.value)}</span>{suffix}'


def svg_number(q: Q, x: float, y: float, css: str = "value", anchor: str = "start", unit: str = "") -> str:
    """A number written inside a plot, carrying its value and source like ``number``."""
    suffix = f" {html.escape(unit)}" if unit else ""
    return (
        f'<text class="{css}" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {data_attrs(q)}>'
        f"{fmt(q.value)}{suffix}</text>"
    )
