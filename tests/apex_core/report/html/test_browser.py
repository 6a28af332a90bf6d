"""The HTML report in a real headless browser: no script error, every plot drawn, fast, offline, printable.

Needs Chromium (Debian's ``chromium``, which ``.ci/run`` installs when missing) or Chrome; set
``APEX_BROWSER`` to name another binary. Without one the tests skip, saying so, unless
``APEX_REQUIRE_BROWSER=1`` (CI sets it), where a missing browser fails them. The screenshots
go to the test's folder and, when ``APEX_TEST_ARTIFACTS`` names a folder, there too.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from apex_core.cli.main import main as cli_main
from tests.apex_core.report.html.browser import Chromium, find_browser
from tests.apex_core.report.html.sources import collect

# a ceiling that says the page did not hang, not the speed bar: the report's 2 s bar is measured on
# its own (docs/report.md: 115-290 ms); a shared 2-core CI machine may be many times slower than that
OPEN_LIMIT_S = 10.0
SIZE_LIMIT = 5 * 2**20

PAGE_STATE = """(async () => {
  await new Promise((done) => setTimeout(done, 0));  // after the load event's handlers
  const plots = Array.from(document.querySelectorAll("svg.plot"));
  const undrawn = plots.filter((svg) => {
    const box = svg.getBoundingClientRect();
    const drawn = Array.from(svg.querySelectorAll("[data-mark]")).filter((mark) => {
      const b = mark.getBBox();
      return b.width > 0 || b.height > 0;
    });
    return box.width <= 0 || box.height <= 0 || drawn.length === 0;
  }).map((svg) => svg.getAttribute("data-plot"));
  const nav = performance.getEntriesByType("navigation")[0];
  return {plots: plots.length, undrawn: undrawn, load_ms: nav.loadEventEnd - nav.startTime,
          errors: document.documentElement.getAttribute("data-script-errors"),
          ready: document.documentElement.getAttribute("data-script-ready"),
          marks: document.querySelectorAll("svg.plot [data-mark]").length};
})()"""

SORT_FIRST_TABLE = """(() => {
  const table = document.querySelector("#cases table.sortable");
  const names = () => Array.from(table.tBodies[0].rows).map((row) => row.cells[2].textContent);
  const before = names();
  table.querySelectorAll("th[data-sort]")[2].click();
  const ascending = names();
  table.querySelectorAll("th[data-sort]")[2].click();
  return {before: before, ascending: ascending, descending: names()};
})()"""


@pytest.fixture(scope="module")
def browser_binary() -> str:
    found = find_browser()
    if found is None:
        reason = (
            "no headless browser: install Debian's chromium (apt-get install chromium) or set APEX_BROWSER "
            "to a Chromium or Chrome binary"
        )
        if os.environ.get("APEX_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + " (APEX_REQUIRE_BROWSER=1)")
        pytest.skip(reason)
    return found


def keep_artifact(path: Path) -> None:
    folder = os.environ.get("APEX_TEST_ARTIFACTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(folder) / path.name)


def test_full_report_opens_without_a_script_error_and_draws_every_plot(
    browser_binary: str, full_report: dict[str, Any], tmp_path: Path
) -> None:
    expected_plots = collect(full_report["html"]).plots
    with Chromium(browser_binary) as browser:
        browser.open(full_report["path"])
        state = browser.evaluate(PAGE_STATE)
        shot = browser.screenshot(tmp_path / "report-full.png")
        sorted_rows = browser.evaluate(SORT_FIRST_TABLE)
        pdf = browser.pdf(tmp_path / "report-full.pdf")
        problems = browser.problems()
        requests = browser.requests()
    keep_artifact(shot)
    assert problems == []
    assert state["errors"] is None and state["ready"] == "true"
    assert state["plots"] == expected_plots >= 40
    assert state["undrawn"] == []
    # the file itself is the only thing the page asked for: it opens offline
    assert requests == [full_report["path"].resolve().as_uri()]
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 50_000
    # the script sorts a table by a number column (p50) both ways
    numbers = [float(v) for v in sorted_rows["ascending"]]
    assert numbers == sorted(numbers) and [float(v) for v in sorted_rows["descending"]] == sorted(numbers)[::-1]
    # and it prints: a PDF of several pages
    pages = re.findall(rb"/Type\s*/Page(?!s)", pdf.read_bytes())
    assert pdf.read_bytes().startswith(b"%PDF") and len(pages) >= 3


def test_thirty_cell_gpu_run_is_small_and_opens_without_hanging(
    browser_binary: str, report_files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "h100-fixed.html"
    assert cli_main(["report", str(report_files["events"]), "--html", str(out)]) == 0
    assert out.stat().st_size < SIZE_LIMIT
    with Chromium(browser_binary) as browser:
        wall_s = browser.open(out)
        state = browser.evaluate(PAGE_STATE)
        shot = browser.screenshot(tmp_path / "report-h100-fixed.png")
        problems = browser.problems()
    keep_artifact(shot)
    assert problems == [] and state["undrawn"] == []
    assert state["load_ms"] < OPEN_LIMIT_S * 1e3, state
    assert wall_s < OPEN_LIMIT_S, f"navigation to load event took {wall_s:.2f} s"


def test_a_script_error_is_caught(browser_binary: str, tmp_path: Path) -> None:
    """The check above would see a broken script: the same page with one bad line fails it."""
    from apex_core.report.html import assets

    page = tmp_path / "broken.html"
    page.write_text(
        f"<!DOCTYPE html><html><head><script>{assets.ERROR_TRAP}</script></head><body>"
        "<script>undefinedFunction();</script></body></html>",
        encoding="utf-8",
    )
    with Chromium(browser_binary) as browser:
        browser.open(page)
        state = browser.evaluate(PAGE_STATE)
        problems = browser.problems()
    assert any("undefinedFunction" in p for p in problems)
    assert "undefinedFunction" in (state["errors"] or "")
