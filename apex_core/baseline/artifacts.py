"""What a comparison leaves behind: the summary JSON, the trend JSON, and the Markdown table."""

from __future__ import annotations

from typing import Any

import attrs

from apex_core.baseline.io import gate_rule_record
from apex_core.baseline.model import Check, CompareSummary
from apex_core.baseline.verdict import CONFIDENCE, SAME_MARGIN

TREND_SCHEMA_VERSION = 1
RULE = ("fail when the metric's gate_rule finds it slower with confidence by more than min_effect (the "
        "bootstrap interval of current/baseline lies above 1 + min_effect), or when current_ms > value_ms * "
        "(1 + max_regression_ratio) + max_regression_abs_ms (the hard cap)")


def _trend_entry(check: Check) -> dict[str, Any]:
    """One entry of the trend's ``metrics``: the fixed rule's numbers."""
    return {
        "metric": check.metric,
        "status": check.status,
        "baseline_ms": check.baseline_ms,
        "allowed_max_ms": check.allowed_max_ms,
        "current_ms": check.current_ms,
        "regression_ratio": check.regression_ratio,
    }


def check_record(check: Check) -> dict[str, Any]:
    """One entry of the summary's ``checks``: the trend's entry, the verdict and why (and, when the
    baseline was scaled to the current card, by what: baseline_ms is then the scaled value)."""
    scaled = {} if check.scaling is None else {"normalization": attrs.asdict(check.scaling)}
    return {
        **_trend_entry(check),
        "verdict": check.verdict.label,
        "verdict_ratio": check.verdict.ratio,
        "ci_low": check.verdict.ci_low,
        "ci_high": check.verdict.ci_high,
        "reason": check.reason or check.verdict.reason,
        "rule": None if check.rule is None else gate_rule_record(check.rule),
        "failed_by": check.failed_by or None,
        "unit": check.unit,
        "better": check.better,
        **scaled,
    }


def summary_record(summary: CompareSummary) -> dict[str, Any]:
    """The compare summary: the gate's status, why, and every check."""
    normalization = {} if summary.normalization is None else {"normalization": summary.normalization.record()}
    return {
        "suite": summary.suite,
        "status": summary.status,
        "forced": summary.forced,
        "allow_missing": summary.allow_missing,
        "baseline": summary.baseline_path,
        "current": list(summary.current_paths),
        "combine": summary.combine,
        "timestamp_utc": summary.timestamp_utc,
        "rule": RULE,
        "environment_differences": list(summary.environment_differences),
        **normalization,
        "failing_metrics": [c.metric for c in summary.failed_checks],
        "checks": [check_record(c) for c in summary.checks],
    }


def trend_record(summary: CompareSummary) -> dict[str, Any]:
    """The normalized trend artifact (docs/baselines.md, Artifacts), one per run, for plotting over time."""
    return {
        "schema_version": TREND_SCHEMA_VERSION,
        "suite": summary.suite,
        "timestamp_utc": summary.timestamp_utc,
        "overall_status": summary.status,
        "total_metrics": len(summary.checks),
        "failed_metrics": len(summary.failed_checks),
        "metrics": [_trend_entry(c) for c in summary.checks],
    }


def _paths(paths: tuple[str, ...], combine: str) -> str:
    text = ", ".join(f"`{p}`" for p in paths)
    return text if len(paths) == 1 else f"{text} ({combine} run per timing metric)"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def change_text(check: Check) -> str:
    return "-" if check.regression_ratio is None else f"{check.regression_ratio:+.1%}"


def rule_text(check: Check) -> str:
    """``> +5.0 % @95 %; cap 0.0132``: the metric's two rules in a few characters."""
    if check.unit != "ms":
        side = ">=" if check.better == "higher" else "<="
        return f"{side} {_ms(check.allowed_max_ms)} {check.unit}".rstrip()
    cap = f"cap {_ms(check.allowed_max_ms)}"
    if check.rule is None:
        return cap
    return f"> +{check.rule.min_effect:.1%} @{check.rule.confidence:.0%}; {cap}"


def verdict_text(check: Check) -> str:
    """``slower 1.31 [1.29, 1.33]``; the reason instead of numbers when there are none."""
    verdict = check.verdict
    if verdict.ci_low is None or verdict.ci_high is None or verdict.ratio is None:
        ratio = f" {verdict.ratio:.3f}" if verdict.ratio is not None else ""
        return f"{verdict.label}{ratio} ({verdict.reason})" if verdict.reason else verdict.label
    return f"{verdict.label} {verdict.ratio:.3f} [{verdict.ci_low:.3f}, {verdict.ci_high:.3f}]"


def render_markdown(summary: CompareSummary) -> str:
    """A table a reviewer reads in a pull request: the fixed rule's result, then the verdict."""
    failed = len(summary.failed_checks)
    lines = [
        f"## apex-bench gate: {summary.status.upper()} ({failed} of {len(summary.checks)} metrics failed)",
        "",
        f"Baseline `{summary.baseline_path}`, current {_paths(summary.current_paths, summary.combine)} "
        f"({summary.timestamp_utc}).",
        f"Rule: {RULE}. Verdict: ratio current/baseline with its bootstrap interval (at the rule's "
        f"confidence, else {CONFIDENCE:.0%}); `same` when the interval lies within 1 ± {SAME_MARGIN:.0%}.",
        "",
    ]
    if summary.forced:
        lines += ["**Forced:** compared across environments that differ.", ""]
    lines += [f"- environment differs: {d}" for d in summary.environment_differences]
    lines += [f"- {line}" for line in normalization_lines(summary)]
    if summary.environment_differences or summary.normalization is not None:
        lines.append("")
    columns = table_columns(summary)
    lines += ["| " + " | ".join(columns) + " |",
              "| " + " | ".join("---:" if right_aligned(c) else "---" for c in columns) + " |"]
    scaled = len(columns) > len(COLUMNS)
    for c in summary.checks:
        status = c.status if c.status == "pass" else f"**{c.status}** ({c.failed_by})" if c.failed_by \
            else f"**{c.status}**"
        lines.append(f"| `{c.metric}` | {status} | {_ms(c.baseline_ms)} | {rule_text(c)} | "
                     f"{_ms(c.current_ms)} | {change_text(c)} | {verdict_text(c).replace('|', '/')} |"
                     + (f" {scaling_text(c)} |" if scaled else ""))
    contended = [f"- `{c.metric}` {c.contention}" for c in summary.checks if c.contention]
    return "\n".join(lines + ([""] + contended if contended else [])) + "\n"


COLUMNS = ("metric", "status", "baseline ms", "rule (min effect; cap ms)", "current ms", "change", "verdict")


def table_columns(summary: CompareSummary) -> tuple[str, ...]:
    """The compare table's columns (terminal and Markdown): ``normalized`` only when the baseline was scaled."""
    return COLUMNS + (("normalized",) if any(c.scaling is not None for c in summary.checks) else ())


def right_aligned(column: str) -> bool:
    """Times and changes are right-aligned."""
    return column.endswith(("ms", "change"))


def render_rows(summary: CompareSummary) -> list[tuple[str, ...]]:
    """Rows of the terminal table (``table_columns``, as the Markdown one)."""
    scaled = len(table_columns(summary)) > len(COLUMNS)
    return [(c.metric, c.status if not c.failed_by else f"{c.status} ({c.failed_by})", _ms(c.baseline_ms),
             rule_text(c), _ms(c.current_ms), change_text(c), verdict_text(c))
            + ((scaling_text(c),) if scaled else ()) for c in summary.checks]


def scaling_text(check: Check) -> str:
    """The normalized column: ``x1.031 bandwidth``, ``no: launch-bound``, ``-`` (not a time, or no cell)."""
    return "-" if check.scaling is None else check.scaling.text()


def normalization_lines(summary: CompareSummary) -> list[str]:
    """What the comparison did about the runs' cards, and the current card's standing in its model."""
    if summary.normalization is None:
        return []
    done = summary.normalization
    return [f"normalized across cards: {done.summary}" if done.applied else done.summary] + (
        [f"card: {done.outlier}"] if done.outlier else [])
