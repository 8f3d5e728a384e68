"""Write the report's data into one self-contained HTML page: the template, its script and style, the data as JSON
and Plotly's JavaScript (from the ``plotly`` package, the ``report`` extra) inlined, so it opens offline."""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import RooflawError

#: Placeholders of ``template/report.html`` (each appears exactly once).
_SLOTS = ("/*__STYLE__*/", "/*__PLOTLY__*/", "/*__SCRIPT__*/", "__DATA__", "__TITLE__")


def _plain(o: Any) -> Any:
    """``o`` with numpy scalars unwrapped and non-finite floats as None (JSON has no NaN)."""
    if hasattr(o, "item") and not isinstance(o, (str, bytes, dict, list, tuple)):
        o = o.item()
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {str(k): _plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_plain(v) for v in o]
    return o


def to_json(data: Any) -> str:
    """``data`` as JSON text, non-finite floats as null (what ``--json`` prints)."""
    return json.dumps(_plain(data), allow_nan=False)


def plotly_js() -> str:
    """Plotly's minified JavaScript from the installed ``plotly`` package; a one-line error naming the extra if
    it is missing."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise RooflawError("report: needs the plotly package: pip install 'rooflaw[report]'") from None
    return get_plotlyjs()


def _template(name: str) -> str:
    return resources.files(__package__).joinpath("template").joinpath(name).read_text(encoding="utf-8")


def _escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render(data: dict[str, Any]) -> str:
    """The page's HTML for ``data`` (a :func:`~rooflaw.report.data.report_data` dict)."""
    page = _template("report.html")
    # inside <script type="application/json">, "</" would end the element: escape it as JSON allows
    payload = to_json(data).replace("</", "<\\/").replace("<!--", "<\\!--")
    parts = {
        "/*__STYLE__*/": _template("report.css"),
        "/*__PLOTLY__*/": plotly_js().replace("</script", "<\\/script"),
        "/*__SCRIPT__*/": _template("report.js"),
        "__DATA__": payload,
        "__TITLE__": _escape_html(str(data.get("title", "rooflaw report"))),
    }
    for slot in _SLOTS:
        if page.count(slot) != 1:
            raise AssertionError(f"report template: {slot} must appear once")
    # one pass, so a slot's replacement text is never searched for another slot
    pieces, rest = [], page
    while True:
        hits = [(rest.find(s), s) for s in _SLOTS if s in rest]
        if not hits:
            pieces.append(rest)
            break
        at, slot = min(hits)
        pieces += [rest[:at], parts[slot]]
        rest = rest[at + len(slot) :]
    return "".join(pieces)


def write_report(data: dict[str, Any], path: str | Path) -> Path:
    """Write the page for ``data`` to ``path`` (UTF-8) and return the path."""
    p = Path(path)
    p.write_text(render(data), encoding="utf-8")
    return p


__all__ = ["plotly_js", "render", "to_json", "write_report"]
