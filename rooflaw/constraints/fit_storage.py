"""Where the efficiency fit's figures are stored: ``[achieved]`` tables of catalog devices without kernel curves,
and ``engines.toml`` (the engine figures, the rows and device architectures they were fitted on)."""

from __future__ import annotations

from typing import Any

from ..safe_io import write_text_atomic

#: a :class:`.fit_efficiency.FitResult` (not imported: this module sits below the fit)
FitResult = Any


def _toml_value(v: object) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(float(v))  # type: ignore[arg-type]


FIT_COMMAND = "rooflaw devices fit-efficiency published.csv --write-catalog"


def achieved_table(result: FitResult, family: str) -> str:
    """The ``[achieved]`` TOML table of one family (for a catalog device file)."""
    lines = ["[achieved]", f"family = {_toml_value(family)}", 'provenance = "fitted"',
             f"command = {_toml_value(FIT_COMMAND)}"]  # fmt: skip
    lines += [f"{k} = {_toml_value(round(v, 6) if k != 'kernel_s' else float(f'{v:.4g}'))}"
              for k, v in sorted(result.families[family].items())]  # fmt: skip
    lines.append(f"rows = {_toml_value(result.rows.get(family, []))}")
    return "\n".join(lines) + "\n"


def engines_toml(result: FitResult) -> str:
    """``engines.toml``: the fitted engine figures with the rows they came from."""
    out = ["# Fitted engine figures (rooflaw/constraints/engines.py). Written by:", f"# {FIT_COMMAND}", ""]
    for name, vals in sorted(result.engines.items()):
        out.append(f'[engine."{name}"]')
        out.append('provenance = "fitted"')
        out += [f"{k} = {_toml_value(float(f'{v:.4g}'))}" for k, v in sorted(vals.items())]
        if result.fitted_on.get(name):
            out.append(f"fitted_on = {_toml_value(result.fitted_on[name])}")
        out.append(f"rows = {_toml_value(result.rows.get(name, []))}")
        out.append("")
    return "\n".join(out)


def write_catalog(result: FitResult, catalog_dir: str | None = None, engines_file: str | None = None) -> list[str]:
    """Replace the ``[achieved]`` table of every catalog device of a fitted family, and ``engines.toml``."""
    import re
    from pathlib import Path

    from ..devices.catalog import CATALOG_DIR, clear_cache
    from .engines import ENGINES_FILE, fitted_figures
    from .published import FAMILY_OF

    cdir = Path(catalog_dir) if catalog_dir else CATALOG_DIR
    written = []
    from ..devices import get_device
    from .curves_applied import curves_of

    for dev_id, fam in sorted(FAMILY_OF.items()):
        p = cdir / f"{dev_id}.toml"
        if not p.is_file():
            continue
        curved = curves_of(get_device(dev_id)) is not None  # kernel curves price it: no end-to-end family figures
        if fam not in result.families and not curved:
            continue
        text = re.sub(r"\n*\[achieved\]\n(?:[^\[].*\n?)*", "\n", p.read_text(encoding="utf-8")).rstrip("\n")
        write_text_atomic(p, text + "\n" + ("" if curved else "\n" + achieved_table(result, fam)))
        written.append(str(p))
    ef = Path(engines_file) if engines_file else ENGINES_FILE
    write_text_atomic(ef, engines_toml(result))
    written.append(str(ef))
    clear_cache()
    fitted_figures.cache_clear()
    return written
