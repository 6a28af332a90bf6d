"""Read the numbers back out of an HTML report and evaluate their sources against the inputs.

Written apart from ``apex_core.report.html.numbers`` on purpose: the test re-derives every
number from the JSON files and the history with its own reading of the ``data-src`` grammar.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, unquote

from apex_core.baseline.verdict import judge, metric_seed
from apex_core.stats import percentile


class NumberCollector(HTMLParser):
    """Every element with ``data-src``: its tag, attributes and own text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[dict[str, Any]] = []
        self.open: list[tuple[str, dict[str, Any] | None]] = []
        self.plots = 0
        self.marked: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "svg" and "plot" in (named.get("class") or "").split():
            self.plots += 1
        for key in ("data-verdict", "data-change"):
            if key in named:
                self.marked.append(named)
        entry = None
        if "data-src" in named:
            entry = {"tag": tag, "attrs": named, "text": ""}
            self.found.append(entry)
        self.open.append((tag, entry))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.open.pop()

    def handle_endtag(self, tag: str) -> None:
        while self.open:
            name, _ = self.open.pop()
            if name == tag:
                break

    def handle_data(self, data: str) -> None:
        # text belongs to the innermost element that carries a number, if it is the open one
        if self.open and self.open[-1][1] is not None:
            self.open[-1][1]["text"] += data


def collect(html_text: str) -> NumberCollector:
    collector = NumberCollector()
    collector.feed(html_text)
    return collector


def _split_args(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        current += char
    return [*parts, current]


def _resolve(doc: Any, pointer: str) -> Any:
    value = doc
    for raw in pointer.lstrip("/").split("/") if pointer.strip("/") else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


class Evaluator:
    """Evaluates ``data-src`` expressions against the documents, the history and the arguments."""

    def __init__(self, docs: dict[str, Any], history: Any = None, args: dict[str, float] | None = None) -> None:
        self.docs = docs
        self.history = history
        self.args = args or {}
        self._history_cells: dict[int, dict[str, Any]] = {}

    def __call__(self, expr: str) -> Any:
        for name in ("div", "scale", "pct", "allowed"):
            if expr.startswith(name + "(") and expr.endswith(")"):
                args = _split_args(expr[len(name) + 1 : -1])
                return getattr(self, "_" + name)(*args)
        if expr.startswith("judge("):
            inner, _, field = expr[len("judge(") :].rpartition(").")
            baseline, current, metric = _split_args(inner)
            verdict = judge(self(baseline), self(current), 50.0, seed=metric_seed(metric))
            return getattr(verdict, field)
        if expr.startswith("hist#"):
            return self._history(expr[len("hist#") :])
        if expr.startswith("arg#"):
            return self.args[expr[len("arg#") :]]
        doc, _, pointer = expr.partition("#")
        return _resolve(self.docs[doc], pointer)

    def _div(self, a: str, b: str) -> float:
        return self(a) / self(b)

    def _scale(self, a: str, factor: str) -> float:
        return self(a) * float(factor)

    def _pct(self, a: str, q: str) -> float:
        return percentile(sorted(self(a)), float(q))

    def _allowed(self, a: str) -> float:
        limit = self(a)
        return limit["value_ms"] * (1 + limit["max_regression_ratio"]) + limit["max_regression_abs_ms"]

    def _history(self, query: str) -> float:
        fields = {k: unquote(v[0]) for k, v in parse_qs(query).items()}
        run_id = int(fields["run"])
        if run_id not in self._history_cells:
            self._history_cells[run_id] = {c.key: c for c in self.history.run(run_id).cells}
        return getattr(self._history_cells[run_id][fields["cell"]], fields["metric"])


def shown_text(value: float) -> str:
    return "0" if value == 0 else f"{value:.4g}"


def check_numbers(html_text: str, evaluate: Evaluator) -> NumberCollector:
    """Assert every number's value equals its source and its text shows that value; returns the numbers."""
    numbers = collect(html_text)
    for entry in numbers.found:
        src, value = entry["attrs"]["data-src"], float(entry["attrs"]["data-value"])
        assert evaluate(src) == value, f"{src}: the HTML says {value!r}, the inputs {evaluate(src)!r}"
        text = entry["text"].strip()
        if text:
            assert text.split()[0] == shown_text(value), f"{src}: shows {text!r} for {value!r}"
    for marked in numbers.marked:
        if marked.get("data-judge"):
            assert evaluate(marked["data-judge"]) == marked["data-verdict"], marked
    return numbers


def change_markers(numbers: NumberCollector) -> list[dict[str, Any]]:
    return [
        {"cell": m["data-cell"], **json.loads(m["data-change"] or "{}")}
        for m in numbers.marked
        if m.get("data-change")
    ]
