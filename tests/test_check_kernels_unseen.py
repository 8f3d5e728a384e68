"""check-kernels on tables it has never seen (other engines' versions, spellings and shapes): it reads what it can,
writes every row, prices only what a family models (never a size no kernel runs), and says what it left out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_helpers import run_cli

from rooflaw.constraints.kernels import curves_for, pricing
from rooflaw.constraints.kernels import fit as KF
from rooflaw.constraints.kernels.tables import read_tables
from rooflaw.devices.catalog import get_device
from rooflaw.errors import RooflawError

GEMM = pd.DataFrame({"framework": "TRTLLM", "gemm_dtype": ["bfloat16", "fp8", "bfloat16", "bfloat16"],
                     "m": [1, 64, 4096, 16], "n": [4096, 4096, 4096, 8192], "k": [4096, 4096, 4096, 1024],
                     "latency": [0.0123, 0.02, 0.31, 0.01]})  # fmt: skip
NCCL = pd.DataFrame({"op_name": ["all_reduce", "all_gather", "all_reduce", "all_reduce"], "nccl_dtype": "half",
                     "num_gpus": [2, 4, 1, 8], "message_size": [128, 1024, 4096, -4],
                     "latency": [0.005, 0.007, 0.004, 0.006]})  # fmt: skip


def _folder(root: Path, tables: dict[tuple[str, str], str | pd.DataFrame]) -> Path:
    """A GPU folder ``root/gpu_x`` with ``tables[(framework-version, file name)]`` (CSV text or a frame)."""
    for (fw, name), t in tables.items():
        d = root / "gpu_x" / fw
        d.mkdir(parents=True, exist_ok=True)
        if isinstance(t, str):
            (d / name).write_text(t)
        else:
            t.to_csv(d / name, index=False)
    return root / "gpu_x"


def _check(capsys, folder: Path, out: Path, *extra: str) -> tuple[pd.DataFrame, dict, str]:
    code, stdout, stderr = run_cli(capsys, "devices", "check-kernels", folder, "--device", "h100-sxm", "--out", out,
                                   "--json", *extra)  # fmt: skip
    assert code == 0 and "Traceback" not in stderr, stderr
    rep = json.loads(stdout, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    return pd.read_csv(out), rep, stderr


def _priced(df: pd.DataFrame, framework: str) -> np.ndarray:
    """The clean table's prices, read and priced strictly (as the fit does)."""
    import tempfile

    dev = get_device("h100-sxm")
    with tempfile.TemporaryDirectory() as d:
        t = read_tables(_folder(Path(d), {(framework, "gemm_perf.csv"): df}))[0]
        return KF.predict_tables([t], dev, curves_for(dev))[0]


def test_txt_tables_and_text_quirks_price_as_the_clean_csv(tmp_path, capsys):
    """``<table>.txt`` (aiconfigurator's naming), blank lines, a repeated header, spaces after commas, CRLF, an
    upper-case framework folder: the same rows and prices as the clean CSV."""
    text = GEMM.to_csv(index=False)
    lines = text.splitlines()
    messy = "\r\n".join([lines[0], lines[1], "", lines[0], *(", ".join(x.split(",")) for x in lines[2:])]) + "\r\n"
    clean = _folder(tmp_path / "a", {("trtllm-0.20.0", "gemm_perf.csv"): GEMM})
    quirky = _folder(tmp_path / "b", {("TRTLLM-0.20.0", "gemm_perf.txt"): messy})
    want, _, _ = _check(capsys, clean, tmp_path / "a.csv")
    got, rep, err = _check(capsys, quirky, tmp_path / "b.csv")
    assert got["row"].tolist() == [0, 1, 2, 3] and got["version"].tolist() == ["0.20.0"] * 4
    assert (got["framework"] == "trtllm").all()
    assert np.allclose(got["predicted_ms"], want["predicted_ms"], rtol=1e-12) and got["predicted_ms"].notna().all()
    assert "1 repeated header lines: dropped" in rep["notes"][0] and err.count("warning:") == 1


def test_negative_sizes_and_one_gpu_collectives_are_not_priced(tmp_path, capsys):
    """A negative ``k`` or ``message_size`` and a one-GPU all-reduce (0 s in the model) are left empty, the other rows
    priced as before; message size 0 (a launch) is priced."""
    g = GEMM.assign(k=[4096, -1, 4096, 1024])
    n = NCCL.assign(message_size=[128, 0, 4096, -4])
    folder = _folder(tmp_path, {("trtllm-1.3.0rc20", "gemm_perf.csv"): g, ("nccl-2.23.4", "nccl_perf.csv"): n})
    got, rep, _ = _check(capsys, folder, tmp_path / "o.csv")
    gp = got[got["table"] == "gemm_perf"]["predicted_ms"].to_numpy()
    assert np.isnan(gp[1]) and np.isfinite(gp[[0, 2, 3]]).all() and (gp[[0, 2, 3]] > 0).all()
    assert np.allclose(gp[[0, 2, 3]], _priced(GEMM, "trtllm-1.3.0rc20")[[0, 2, 3]], rtol=1e-12)
    np_ = got[got["table"] == "nccl_perf"]["predicted_ms"].to_numpy()
    assert np.isfinite(np_[:2]).all() and np.isnan(np_[2:]).all()  # 1 GPU, negative size: empty
    assert rep["tables"]["nccl_perf"] == {"rows": 4, "modelled": 2, "median_abs_error": pytest.approx(
        float(np.median(np.abs(np_[:2] / n["latency"].to_numpy()[:2] - 1))))}  # fmt: skip


def test_custom_allreduce_kernels_it_does_not_model_are_empty(tmp_path, capsys):
    """Only TensorRT-LLM's own (``implementation`` trtllm) and vLLM's CUDA-graph custom all-reduce are priced: an NCCL
    or MNNVL strategy, vLLM's eager or pynccl path are other kernels."""
    base = {"kernel_source": "x", "allreduce_dtype": "bfloat16", "num_gpus": 4, "message_size": 4096, "latency": 0.01}
    trt = pd.DataFrame({**base, "implementation": ["trtllm", "nccl_symmetric", "mnnvl"]})
    vll = pd.DataFrame({**base, "backend": ["vllm_graph", "vllm_eager", "pynccl"]})
    got, _, _ = _check(capsys, _folder(tmp_path, {("trtllm-0.20.0", "custom_allreduce_perf.csv"): trt,
                                                  ("vllm-0.10.1", "custom_allreduce_perf.csv"): vll}),
                       tmp_path / "o.csv")  # fmt: skip
    for fw in ("trtllm", "vllm"):
        p = got[got["framework"] == fw]["predicted_ms"].to_numpy()
        assert p[0] > 0 and np.isnan(p[1:]).all(), fw


def test_missing_column_text_in_a_size_and_unknown_tables_leave_rows_empty(tmp_path, capsys):
    """A table without a column its family reads, text in a size column, a table no family models: every row is
    written, those it cannot price empty, each case a note; the fit (strict) refuses the same input, naming it."""
    text = GEMM.astype({"n": object}).copy()
    text.loc[2, "n"] = "abc"
    folder = _folder(tmp_path, {("sglang-0.5.0", "gemm_perf.csv"): text,
                                ("trtllm-0.20.0", "gemm_perf.csv"): GEMM.drop(columns=["gemm_dtype"]),
                                ("trtllm-0.20.0", "deepep_perf.csv"): GEMM,
                                ("trtllm-0.20.0", "moe_perf.csv"): pd.DataFrame({"num_tokens": [1, 2],
                                                                                 "latency": [0.1, 0.2]})})  # fmt: skip
    got, rep, err = _check(capsys, folder, tmp_path / "o.csv", "--engine", "tensorrt-llm")
    assert len(got) == 4 + 4 + 4 + 2
    sg = got[got["version"] == "0.5.0"]["predicted_ms"].to_numpy()
    assert np.isnan(sg[2]) and np.allclose(sg[[0, 1, 3]], _priced(GEMM, "trtllm-0.5.0")[[0, 1, 3]], rtol=1e-12)
    trt = got[got["version"] == "0.20.0"]
    assert trt["predicted_ms"].isna().all()
    notes = " | ".join(rep["notes"])
    assert "row 2: n='abc' is not a number" in notes and "column 'gemm_dtype' missing" in notes
    assert "moe_perf (trtllm-0.20.0): column" in notes and err.count("warning:") == len(rep["notes"]) == 3
    with pytest.raises(RooflawError, match="n='abc'"):
        read_tables(folder / "sglang-0.5.0")
    t = read_tables(folder / "trtllm-0.20.0", only=["gemm_perf"])
    with pytest.raises(RooflawError, match="gemm_dtype"):
        KF.predict_tables(t, get_device("h100-sxm"), curves_for(get_device("h100-sxm")))


def test_rows_a_family_fails_on_are_found_by_halving(tmp_path):
    """A predictor that raises on some rows (here: on a NaN ``m``) leaves only those rows empty."""
    from rooflaw.constraints.kernels import FAMILIES

    def picky(rows, device, curves):
        m = rows["m"].to_numpy(dtype=float)
        if np.isnan(m).any():
            raise ValueError("cannot convert float NaN to integer")
        return m * 1e-3

    fam = FAMILIES["gemm"].__class__(name="t", tables=("t_perf",), params=(), predict=picky)
    rows = pd.DataFrame({"m": [1.0, np.nan, 3.0, 4.0, np.nan, 6.0, 7.0]})
    got = pricing._predict_rows(fam, rows, get_device("h100-sxm"), curves_for(get_device("h100-sxm")))
    assert np.array_equal(np.isnan(got), np.isnan(rows["m"].to_numpy()))
    assert np.allclose(got[~np.isnan(got)], [1e-3, 3e-3, 4e-3, 6e-3, 7e-3])


def test_ragged_lines_are_skipped_and_a_folder_of_unreadable_tables_names_one(tmp_path, capsys):
    """A line with more fields than the header is skipped (told), a short one kept; if no table is readable at all,
    exit 2 with one line naming a file and why."""
    lines = GEMM.to_csv(index=False).splitlines()
    lines[2] += ",7,8"
    lines[3] = ",".join(lines[3].split(",")[:3])
    got, rep, _ = _check(capsys, _folder(tmp_path / "a", {("trtllm-0.20.0", "gemm_perf.txt"): "\n".join(lines)}),
                         tmp_path / "a.csv")  # fmt: skip
    assert len(got) == 3 and np.isfinite(got["predicted_ms"].to_numpy()[[0, 2]]).all()
    assert np.isnan(got["predicted_ms"].iloc[1]) and "1 lines with more fields than the header" in rep["notes"][0]
    with pytest.raises(RooflawError, match="gemm_perf.txt"):
        read_tables(tmp_path / "a")
    empty = _folder(tmp_path / "b", {("trtllm-0.20.0", "gemm_perf.txt"): "", ("nccl-2.23.4", "nccl_perf.csv"): ""})
    code, _, err = run_cli(
        capsys, "devices", "check-kernels", empty, "--device", "h100-sxm", "--out", tmp_path / "o.csv"
    )
    assert code == 2 and "no readable table (2 skipped" in err and "nccl_perf.csv" in err
    assert len(err.strip().splitlines()) == 1


def test_fit_kernels_names_a_table_its_family_cannot_read(tmp_path, capsys):
    """The fit reads strictly: a missing column exits 2 with one line naming the family, the GPU folder and the column
    (it was an internal error); a blank ``kernel_source`` is no library named (the engine's figure), in both."""
    cases = [(("nccl-2.23.4", "nccl_perf.csv"), NCCL.drop(columns=["op_name"]), "nccl tables of h100_sxm='op_name'"),
             (("trtllm-0.20.0", "gemm_perf.csv"), GEMM.drop(columns=["k"]), "gemm tables of h100_sxm='k'")]  # fmt: skip
    for i, (where, frame, want) in enumerate(cases):
        root = tmp_path / str(i)
        _folder(root, {where: frame}).rename(root / "h100_sxm")
        code, _, err = run_cli(capsys, "devices", "fit-kernels", root, "--sample", "100", "--no-held-out", "--json")
        assert code == 2 and want in err and len(err.strip().splitlines()) == 1, err
    root = tmp_path / "blank"
    gemm = GEMM.assign(kernel_source=["torch_flow", "", "torch_flow", "torch_flow"])
    _folder(root, {("trtllm-0.20.0", "gemm_perf.csv"): gemm}).rename(root / "h100_sxm")
    code, _, err = run_cli(capsys, "devices", "fit-kernels", root, "--sample", "100", "--no-held-out", "--json")
    assert code == 0, err
    got, _, _ = _check(capsys, root / "h100_sxm", tmp_path / "o.csv")
    assert np.allclose(got["predicted_ms"], _priced(GEMM.assign(kernel_source="torch_flow"), "trtllm-0.20.0"))


def test_a_latency_that_is_no_positive_finite_time_stops_the_fit_and_is_not_scored(tmp_path, capsys):
    """A measured latency of 0, a negative one or inf is no kernel time: the fit (strict) exits 2 naming the row, and
    check-kernels copies the row and prices it but leaves it out of the medians (the JSON stays finite)."""
    bad = GEMM.assign(latency=[0.0123, 0.0, float("inf"), 0.01])
    root = tmp_path / "fit"
    _folder(root, {("trtllm-0.20.0", "gemm_perf.csv"): bad}).rename(root / "h100_sxm")
    code, _, err = run_cli(capsys, "devices", "fit-kernels", root, "--sample", "100", "--no-held-out", "--json")
    assert code == 2 and "row 1: latency=0.0 is not a positive, finite time" in err, err
    assert len(err.strip().splitlines()) == 1
    got, rep, _ = _check(capsys, root / "h100_sxm", tmp_path / "o.csv")
    assert len(got) == 4 and got["predicted_ms"].notna().all()
    good = np.array([0, 3])
    want = np.median(np.abs(got["predicted_ms"].to_numpy()[good] / bad["latency"].to_numpy()[good] - 1.0))
    assert rep["tables"]["gemm_perf"]["median_abs_error"] == pytest.approx(want, rel=1e-12)
    assert any("2 such rows copied, not scored" in n for n in rep["notes"])
