"""The self-contained HTML report (docs/report.md): ``gather`` the inputs, ``render_html`` or ``write_html``."""

from apex_core.report.html.inputs import ReportInputs, RunInput, gather
from apex_core.report.html.page import render_html, write_html

__all__ = ["ReportInputs", "RunInput", "gather", "render_html", "write_html"]
