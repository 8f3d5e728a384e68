"""Held-out checks of the efficiency fit (:mod:`.fit_efficiency`): fit without a source (or a board, a device), predict
it; and the nested runs an error band of a source is checked on (:func:`rooflaw.constraints.bands.coverage`)."""

from __future__ import annotations

from collections.abc import Sequence

from . import fit_efficiency as fe
from .fit_efficiency import CaseFeatures
from .published import Case


def _group(case: Case, key: str) -> str:
    return case.device.split("@")[0] if key == "board" else str(getattr(case, key))


def held_out(cases: Sequence[Case], key: str, feats: Sequence[CaseFeatures] | None = None) -> list[dict[str, object]]:
    """Fit without each group of ``key``, predict that group: ``source``, ``board`` (a device with all its power
    modes) or ``device`` (one power mode). Each row says whether its engine and its device family still had
    rows in the fit (``engine_in_training``, ``family_in_training``). ``feats``: the cases' :func:`_features`,
    where already computed."""
    rows: list[dict[str, object]] = []
    if feats is None:
        feats = [fe._features(c, fe.case_device(c)) for c in cases]
    for g in sorted({_group(c, key) for c in cases}):
        train = [c for c in cases if _group(c, key) != g]
        test = [c for c in cases if _group(c, key) == g]
        res = fe.fit(train, feats=[f for c, f in zip(cases, feats, strict=True) if _group(c, key) != g])
        engines, families = {c.engine for c in train}, {c.family for c in train}
        for r in fe.errors(test, res):
            rows.append({**r, "held_out": g, "engine_in_training": r["engine"] in engines,
                         "family_in_training": r["family"] in families})  # fmt: skip
    return rows


def nested_held_out(cases: Sequence[Case], key: str = "source") -> dict[str, list[dict[str, object]]]:
    """Per group ``g`` of ``key``: :func:`held_out` of the cases without ``g`` -- the held-out residuals of the other
    groups from fits that never saw ``g``, from which ``g``'s error band is built when checking it
    (:func:`rooflaw.constraints.bands.coverage` ``nested``)."""
    feats = [fe._features(c, fe.case_device(c)) for c in cases]
    out = {}
    for g in sorted({_group(c, key) for c in cases}):
        keep = [i for i, c in enumerate(cases) if _group(c, key) != g]
        out[g] = held_out([cases[i] for i in keep], key, [feats[i] for i in keep])
    return out


def coverage(row: dict[str, object]) -> str:
    """What a held-out row's fit still knew: ``engine and family fitted``, ``engine out``, ``family out`` or
    ``engine and family out``."""
    e, f = bool(row.get("engine_in_training", True)), bool(row.get("family_in_training", True))
    return {(True, True): "engine and family fitted", (False, True): "engine out", (True, False): "family out",
            (False, False): "engine and family out"}[(e, f)]  # fmt: skip


# names under which the public API (``rooflaw``) exports this module's entry points
held_out_errors = held_out
nested_held_out_errors = nested_held_out
