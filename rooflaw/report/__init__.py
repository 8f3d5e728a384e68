"""The interactive HTML report: one self-contained, offline page of a frontier (single-device, joint or layouts).

:func:`report_data` builds the JSON-ready data (the same dicts ``frontier --json`` and ``evaluate --json`` print,
plus each point's roofline, breakdown, memory and explanation); :func:`write_report` writes it into the page
template with Plotly's JavaScript inlined (the ``report`` extra). Depends on ``solver``, ``constraints`` and
``plots``; nothing depends on it but the public API and the CLI.
"""

from __future__ import annotations

from .data import REPORT_DETAILS, report_data
from .html import plotly_js, write_report

__all__ = ["REPORT_DETAILS", "plotly_js", "report_data", "write_report"]
