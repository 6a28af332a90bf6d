"""``apex-bench attest``: hash and judge a release's reports, gate summaries and other artifacts.

Every artifact is listed with its path, sha256, size and PASS / FAIL / N/A; every
compare summary becomes a gate row. The attestation is written as JSON and Markdown
(atomically, after everything was read), so a reviewer can check that the files
they hold are the ones that passed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import attrs

from apex_core.baseline.errors import InputFileError
from apex_core.baseline.io import open_regular_file, parse_json, read_regular_file
from apex_core.cli.values import OneLineParser
from apex_core.errors import UsageError
from apex_core.files import atomic_write_text, check_writable
from apex_core.results import FAILING_STATUSES
from apex_core.running.runner import utc_now

SCHEMA_VERSION = 1
PASS, FAIL, NOT_APPLICABLE = "PASS", "FAIL", "N/A"
# cell statuses that make a report FAIL (skipped cells carry a reason and are fine)
FAILING_CELL_STATUSES = frozenset(str(status) for status in FAILING_STATUSES)
_CHUNK_BYTES = 2**20

EXIT_CODES = """\
an artifact PASSES when it is a complete report with no incorrect, suspect, error, crashed or
timed-out cell, or a compare summary whose status is pass; other files are N/A;
a missing artifact FAILS unless given with --optional-artifact.

exit codes:
  0  the attestation was written (with --strict: and nothing failed)
  1  --strict, and an artifact failed (a required one missing included) or a gate failed
  2  usage error: an unreadable or malformed file (named), an unwritable output
"""


@attrs.frozen
class Artifact:
    """One attested file: where it is, what it hashes to, and whether it passed."""

    path: str
    kind: str  # "report", "summary" or "artifact"
    required: bool
    exists: bool
    sha256: str | None
    size_bytes: int | None
    status: str  # PASS, FAIL or N/A
    reason: str = ""
    manifest_sha256: str | None = None  # a report's replay manifest


@attrs.frozen
class Gate:
    """One regression gate, as its compare summary reports it."""

    suite: str
    status: str  # "pass" or "fail"
    source: str
    checks: int
    failing_metrics: tuple[str, ...]


@attrs.frozen
class Attestation:
    timestamp_utc: str
    strict: bool
    artifacts: tuple[Artifact, ...]
    gates: tuple[Gate, ...]

    @property
    def failed(self) -> bool:
        return any(a.status == FAIL for a in self.artifacts) or any(g.status != "pass"
                                                                    for g in self.gates)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="apex-bench attest",
        description="List each artifact with path, sha256, size and PASS/FAIL/N/A, and each gate.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", action="append", default=[], type=Path, metavar="REPORT",
                        help="an apex-bench JSON report (repeatable; required artifact)")
    parser.add_argument("--summary", action="append", default=[], type=Path, metavar="SUMMARY",
                        help="a compare summary JSON (repeatable; required; one gate each)")
    parser.add_argument("--artifact", action="append", default=[], type=Path, metavar="PATH",
                        help="any other file to hash (repeatable; required, N/A when present)")
    parser.add_argument("--optional-artifact", action="append", default=[], type=Path, metavar="PATH",
                        help="like --artifact, but N/A rather than FAIL when it is missing")
    parser.add_argument("--output-json", required=True, type=Path, help="the attestation JSON")
    parser.add_argument("--output-md", required=True, type=Path, help="the attestation Markdown")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when an artifact failed or is missing, or a gate failed")
    return parser


def _load(path: Path, flag: str) -> tuple[bytes, dict[str, Any]] | None:
    """The file's bytes (a regular file of at most ``MAX_JSON_BYTES``) and its JSON object, or None when
    there is no file; a FIFO, a device, a folder or a larger file is a usage error, never a blocked or
    endless read."""
    if not os.path.lexists(path):
        return None
    try:
        data = read_regular_file(path)
        record = parse_json(data, path)
    except InputFileError as exc:
        raise UsageError(f"{flag} {exc}") from None
    if not isinstance(record, dict):
        raise UsageError(f"{flag} {path}: expected a JSON object, got {type(record).__name__}")
    return data, record


def _digest(path: Path, flag: str) -> tuple[str, int] | None:
    """An artifact's sha256 and size, hashed as it is read (any size); None when there is none.

    Only a regular file is hashed: a FIFO would block, /dev/zero never ends.
    """
    if not os.path.lexists(path):
        return None
    digest, size = hashlib.sha256(), 0
    try:
        with open_regular_file(path) as handle:
            while chunk := handle.read(_CHUNK_BYTES):
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read ({exc.strerror or exc})") from None
    except ValueError:
        raise UsageError(f"{flag} {path}: not a regular file") from None
    return digest.hexdigest(), size


def _field(record: dict[str, Any], name: str, kind: type | tuple[type, ...], path: Path,
           flag: str) -> Any:
    value = record.get(name)
    if not isinstance(value, kind):
        raise UsageError(f"{flag} {path}: field {name!r} is missing or not a "
                         f"{getattr(kind, '__name__', 'valid value')}")
    return value


def judge_report(record: dict[str, Any], path: Path) -> tuple[str, str]:
    """PASS when the run completed and no cell failed; else FAIL with the reason."""
    status = _field(record, "status", str, path, "--report")
    cells = _field(record, "benchmarks", list, path, "--report")
    failing = [c for c in cells if isinstance(c, dict) and c.get("status") in FAILING_CELL_STATUSES]
    reasons = []
    if status != "complete":
        reasons.append(f"report status is {status!r}, not 'complete'")
    if failing:
        named = ", ".join(f"{c.get('name', '?')} ({c['status']})" for c in failing[:3])
        more = f" and {len(failing) - 3} more" if len(failing) > 3 else ""
        reasons.append(f"{len(failing)} cell(s) failed: {named}{more}")
    return (FAIL, "; ".join(reasons)) if reasons else (PASS, f"{len(cells)} cells, none failed")


def gate_of(record: dict[str, Any], path: Path) -> Gate:
    """The gate a compare summary describes: {suite, status pass|fail, checks[...]}."""
    suite = _field(record, "suite", str, path, "--summary")
    status = _field(record, "status", str, path, "--summary")
    if status not in ("pass", "fail"):
        raise UsageError(f"--summary {path}: field 'status' is {status!r}; expected 'pass' or 'fail'")
    checks = _field(record, "checks", list, path, "--summary")
    failing = record.get("failing_metrics")
    if not isinstance(failing, list):
        failing = [c.get("metric", "?") for c in checks
                   if isinstance(c, dict) and c.get("status") in ("fail", "missing")]
    return Gate(suite, status, str(path), len(checks), tuple(str(m) for m in failing))


def _artifact(path: Path, kind: str, required: bool, data: bytes | tuple[str, int] | None,
              status: str = NOT_APPLICABLE, reason: str = "", manifest: str | None = None) -> Artifact:
    """One row; ``data`` is the file's bytes, or its (sha256, size) when hashed as it was read."""
    if data is None:
        return Artifact(str(path), kind, required, False, None, None,
                        FAIL if required else NOT_APPLICABLE,
                        "missing" if required else "missing (optional)")
    sha, size = data if isinstance(data, tuple) else (hashlib.sha256(data).hexdigest(), len(data))
    return Artifact(str(path), kind, required, True, sha, size, status, reason, manifest)


def attest(reports: list[Path], summaries: list[Path], artifacts: list[Path],
           optional: list[Path], strict: bool = False) -> Attestation:
    """Read, hash and judge every file; raises UsageError for a file that cannot be judged."""
    rows: list[Artifact] = []
    gates: list[Gate] = []
    for path in reports:
        loaded = _load(path, "--report")
        if loaded is None:
            rows.append(_artifact(path, "report", True, None))
            continue
        data, record = loaded
        status, reason = judge_report(record, path)
        replay = record.get("replay")
        manifest = replay.get("manifest_sha256") if isinstance(replay, dict) else None
        rows.append(_artifact(path, "report", True, data, status, reason, manifest))
    for path in summaries:
        loaded = _load(path, "--summary")
        if loaded is None:
            rows.append(_artifact(path, "summary", True, None))
            continue
        gate = gate_of(loaded[1], path)
        gates.append(gate)
        rows.append(_artifact(path, "summary", True, loaded[0], PASS if gate.status == "pass" else FAIL,
                              f"gate {gate.suite}: {gate.status}"))
    for paths, required, flag in ((artifacts, True, "--artifact"), (optional, False, "--optional-artifact")):
        for path in paths:
            rows.append(_artifact(path, "artifact", required, _digest(path, flag)))
    return Attestation(utc_now(), strict, tuple(rows), tuple(gates))


def attestation_record(att: Attestation) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "apex-bench-attestation",
        "timestamp_utc": att.timestamp_utc,
        "status": "fail" if att.failed else "pass",
        "strict": att.strict,
        "artifacts": [attrs.asdict(a) for a in att.artifacts],
        "gates": [{**attrs.asdict(g), "failing_metrics": list(g.failing_metrics)} for g in att.gates],
    }


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(att: Attestation) -> str:
    """A table a reviewer reads: every artifact with its hash, then every gate."""
    failed = sum(a.status == FAIL for a in att.artifacts)
    failed_gates = sum(g.status != "pass" for g in att.gates)
    lines = [
        "# apex-bench release attestation",
        "",
        f"**{'FAIL' if att.failed else 'PASS'}**: {failed} of {len(att.artifacts)} artifacts failed, "
        f"{failed_gates} of {len(att.gates)} gates failed{' (strict)' if att.strict else ''}; "
        f"made {att.timestamp_utc}.",
        "",
        "| status | kind | path | bytes | sha256 | note |",
        "| --- | --- | --- | ---: | --- | --- |",
    ]
    for a in att.artifacts:
        note = a.reason + (f"; replay manifest `{a.manifest_sha256}`" if a.manifest_sha256 else "")
        lines.append(f"| {a.status} | {a.kind} | `{_cell(a.path)}` | "
                     f"{a.size_bytes if a.size_bytes is not None else '-'} | "
                     f"{f'`{a.sha256}`' if a.sha256 else '-'} | {_cell(note)} |")
    lines += ["", "## Gates", ""]
    if not att.gates:
        lines.append("No compare summary was given.")
    else:
        lines += ["| status | suite | checks | failing metrics | summary |",
                  "| --- | --- | ---: | --- | --- |"]
        for g in att.gates:
            failing = ", ".join(f"`{m}`" for m in g.failing_metrics) or "-"
            lines.append(f"| {g.status.upper()} | {_cell(g.suite)} | {g.checks} | {_cell(failing)} | "
                         f"`{_cell(g.source)}` |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    """Run ``apex-bench attest``; returns 0, 1 (strict and something failed) or 2."""
    args = build_parser().parse_args(argv)
    if not (args.report or args.summary or args.artifact or args.optional_artifact):
        raise UsageError("attest: nothing to attest; give --report, --summary or --artifact")
    check_writable(args.output_json, "--output-json")
    check_writable(args.output_md, "--output-md")
    att = attest(args.report, args.summary, args.artifact, args.optional_artifact, strict=args.strict)
    # both texts exist before either file is written: no half-written attestation
    json_text = json.dumps(attestation_record(att), indent=2) + "\n"
    markdown = render_markdown(att)
    atomic_write_text(args.output_json, json_text)
    atomic_write_text(args.output_md, markdown)
    verdict = "FAIL" if att.failed else "PASS"
    print(f"apex-bench attest: {verdict}, {len(att.artifacts)} artifacts, {len(att.gates)} gates; "
          f"{args.output_json}, {args.output_md}")
    return 1 if args.strict and att.failed else 0
