"""Reproduce arXiv:2602.10377's frontiers, closed forms and claims with rooflaw — and say where they do not hold.

    python -m paper_repro [all|SECTION ...] --out DIR [--quick]

SECTION: fig4, fig5, fig7, table2, theorems, closed_forms, search, qwen, seed, beyond, guideline_precision.

Each section writes PNG figures into DIR, its part of ``DIR/REPORT.md`` and its numbers into
``DIR/claims.json``. It uses the public ``rooflaw`` / ``rooflaw.solver`` API, plus ``rooflaw.constraints.theory``
(the `paper` preset's symbolic expressions, for the closed-form checks); nothing is downloaded.
"""

from __future__ import annotations

SECTIONS = (
    "fig5", "fig7", "table2", "fig4", "theorems", "closed_forms", "search", "qwen", "seed", "beyond",
    "guideline_precision", "guidelines_parallel",
)  # fmt: skip

__all__ = ["SECTIONS", "main", "run"]


def run(sections, out, quick: bool = False, log=print) -> dict:
    """Run ``sections`` (names from :data:`SECTIONS`, or ``"all"``) into ``out``; returns the claims per section."""
    from .__main__ import run_sections

    return run_sections(sections, out, quick=quick, log=log)


def main(argv=None) -> int:
    from .__main__ import main as _main

    return _main(argv)
