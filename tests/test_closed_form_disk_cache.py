"""A warm `rooflaw solve` in a new process reads the closed form's derivation (and its compiled regimes) from the
disk cache instead of re-deriving it; the answer is the same to the last bit; a tampered entry is ignored."""

from __future__ import annotations

import pytest

import rooflaw as rl
from rooflaw.solver.relaxation import closed_form as CF


def test_derivation_round_trips_through_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLAW_CACHE_DIR", str(tmp_path / "cache"))
    prob = rl.Problem(device="jetson-agx-orin-64gb", latency_budget="20ms", phase="decode")
    first = CF.closed_form(prob)  # derived in this process (or earlier in it)
    der = next(d for d in CF._DERIVATIONS.values() if d.phase == "decode" and d.compiled)
    CF.save_derivation(der, prob.law, CF.K.law_kwargs(prob))
    (path,) = (tmp_path / "cache").glob("closed-form-*.pkl")

    monkeypatch.setattr(CF, "_DERIVATIONS", {})  # a new process: nothing in memory
    monkeypatch.setattr(CF.K, "law_in_paper_variables", lambda *a, **k: pytest.fail("re-derived"))
    again = CF.closed_form(prob)
    assert again.x == first.x and again.loss == first.loss and again.regime == first.regime

    blob = bytearray(path.read_bytes())
    blob[-5] ^= 0xFF  # tampered: its HMAC no longer matches, so it is never unpickled
    path.write_bytes(bytes(blob))
    monkeypatch.setattr(CF, "_DERIVATIONS", {})
    with pytest.raises(pytest.fail.Exception, match="re-derived"):
        CF.closed_form(prob)
