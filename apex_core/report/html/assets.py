"""The report's inline style sheet and its one small script (table sorting; nothing draws with it)."""

STYLE = """
:root { --fg: #1b1b1b; --muted: #666; --rule: #ddd; --bad: #b3261e; --good: #1b6e3a; --warn: #8a5a00; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       margin: 0 auto; max-width: 1240px; padding: 0 20px 40px; }
h1 { font-size: 24px; margin: 18px 0 4px; } h2 { font-size: 19px; margin: 28px 0 8px;
  border-bottom: 1px solid var(--rule); padding-bottom: 4px; } h3 { font-size: 15px; margin: 18px 0 6px; }
nav { position: sticky; top: 0; background: #fff; border-bottom: 1px solid var(--rule); padding: 6px 0;
      z-index: 1; font-size: 13px; } nav a { margin-right: 14px; }
.subtitle, .caption, .note { color: var(--muted); } .caption { max-width: 900px; }
.none { color: var(--muted); } .bad { color: var(--bad); } .good { color: var(--good); }
.chips { margin: 10px 0; } .chip { display: inline-block; border: 1px solid var(--rule); border-radius: 12px;
  padding: 1px 10px; margin: 0 6px 4px 0; } .chip.status-ok { border-color: var(--good); }
.chip.status-incorrect, .chip.status-suspect, .chip.status-error, .chip.status-crashed, .chip.status-timeout {
  border-color: var(--bad);
  color: var(--bad); } .chip.status-skipped { border-color: var(--warn); }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; }
th, td { text-align: left; padding: 3px 10px 3px 0; border-bottom: 1px solid #eee; vertical-align: top; }
table.env th { color: var(--muted); font-weight: normal; padding-right: 18px; }
th[data-sort] { cursor: pointer; } th[data-sort]::after { content: " \\2195"; color: #bbb; }
td.reason { max-width: 620px; } code { font-size: 12px; }
.figure { overflow-x: auto; } svg.plot { max-width: 100%; height: auto; display: block; margin: 4px 0; }
.hists { display: flex; flex-wrap: wrap; gap: 4px 14px; } .hist svg.plot { max-width: 280px; }
svg text { font: 11px system-ui, sans-serif; fill: #333; } svg .tick { fill: #666; font-size: 10px; }
svg .axis { stroke: #444; } svg .grid { stroke: #eee; } svg .axis-label { fill: #555; }
svg .label { font-size: 12px; } svg .value { font-size: 12px; font-variant-numeric: tabular-nums; }
svg .speedup { font-size: 12px; font-weight: 600; fill: #1b6e3a; } svg .flag { fill: #8a5a00; font-size: 11px; }
svg .flag.severe { fill: #b3261e; font-weight: 600; } svg .status-text { fill: #8a5a00; }
svg .whisker { stroke: #222; stroke-width: 1.3; } svg .host { fill: #fff; stroke: #222; }
svg .floor, svg .roof { stroke: #D55E00; stroke-dasharray: 5 3; stroke-width: 1.5; fill: none; }
svg .roof-label { fill: #D55E00; font-size: 11px; } svg .line { stroke-width: 1.6; }
svg .band { opacity: 0.14; } svg .band-line { stroke-dasharray: 2 3; }
svg .change { stroke-dasharray: 6 3; stroke-width: 1.5; }
svg .verdict-slower { fill: #b3261e; } svg .verdict-faster { fill: #1b6e3a; } svg .verdict-same { fill: #777; }
svg .verdict-inconclusive { fill: #fff; stroke: #777; } svg .plot-title { font-size: 13px; font-weight: 600; }
.verdict.bad { color: var(--bad); font-weight: 600; } .verdict.good { color: var(--good); font-weight: 600; }
tr.status-fail td, tr.status-missing td { color: var(--bad); }
@media print {
  nav { display: none; } body { max-width: none; padding: 0; font-size: 11px; }
  section.case, .figure, table { break-inside: avoid; } h2 { break-after: avoid; }
  details { display: block; } details > * { display: block; }
  a { color: inherit; text-decoration: none; }
}
"""

# Progressive: the report reads and prints the same without it. Errors are kept on the page
# (``data-script-errors`` on <html>) as well as in the console, so a test can see them.
SCRIPT = """
(function () {
  "use strict";
  function cellKey(row, column) {
    var cell = row.children[column];
    if (!cell) { return ""; }
    var num = cell.querySelector("[data-value]");
    return num ? parseFloat(num.getAttribute("data-value")) : cell.textContent.trim().toLowerCase();
  }
  function sortBy(header) {
    var table = header.closest("table");
    var body = table.tBodies[0];
    var column = parseInt(header.getAttribute("data-sort"), 10);
    var ascending = header.getAttribute("data-order") !== "asc";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellKey(a, column), y = cellKey(b, column);
      if (typeof x === "number" && typeof y === "number") { return ascending ? x - y : y - x; }
      if (typeof x === "number") { return -1; }
      if (typeof y === "number") { return 1; }
      return ascending ? String(x).localeCompare(String(y)) : String(y).localeCompare(String(x));
    });
    rows.forEach(function (row) { body.appendChild(row); });
    header.setAttribute("data-order", ascending ? "asc" : "desc");
  }
  document.querySelectorAll("table.sortable th[data-sort]").forEach(function (header) {
    header.addEventListener("click", function () { sortBy(header); });
  });
  document.documentElement.setAttribute("data-script-ready", "true");
})();
"""

ERROR_TRAP = """
window.addEventListener("error", function (event) {
  var root = document.documentElement;
  var seen = root.getAttribute("data-script-errors");
  root.setAttribute("data-script-errors", (seen ? seen + " | " : "") + String(event.message));
});
"""
