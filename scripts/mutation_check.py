"""Plant known bugs one at a time in a scratch copy of the repository and show which tests catch each.

    python scripts/mutation_check.py                 # every mutation
    python scripts/mutation_check.py --only a b      # some of them
    python scripts/mutation_check.py --list

Each mutation is a literal text replacement in one source file (it must match exactly once, so a
rewrite of that code makes the script say "stale" instead of silently testing nothing), followed by
pytest on the test files that should catch it. A mutation counts as caught when at least one test
fails. The scratch copy gets its own cache directory, so no derived artefact leaks between runs.
Exit status 1 if any mutation survives or is stale.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    key: str
    what: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


REF = ("tests/test_ref_bytes_torch.py", "tests/test_ref_hand_table.py", "tests/test_ref_energy.py")
PINS = ("tests/test_reliability_pins.py",)
INPUTS = ("tests/test_reliability_inputs.py",)
MUTATIONS = (
    Mutation("a", "decode QKᵀ reads the K cache once per query head, not per KV head",
             "rooflaw/constraints/operators.py",
             "bytes=T * q_out * b_a + B * C * kv_out * b_kv + unfused",
             "bytes=T * q_out * b_a + B * C * (kv_out + (q_out - kv_out) / Sq) * b_kv + unfused", REF),
    Mutation("b", "prefill computes LM-head logits for every prompt token",
             "rooflaw/constraints/operators.py",
             "flops=2 * B * d * V,\n        bytes=V * d * b_h + B * d * b_a + 4 * B * V,",
             "flops=2 * T * d * V,\n        bytes=V * d * b_h + T * d * b_a + 4 * T * V,", REF),
    Mutation("c", "energy: compute/memory power split 0.5 -> 0.3", "rooflaw/constraints/assembly.py",
             "COMPUTE_POWER_SHARE = 0.5", "COMPUTE_POWER_SHARE = 0.3", ("tests/test_ref_energy.py",)),
    Mutation("d", "no solver keeps to the d_model/ffn alignment", "rooflaw/arch/space.py",
             "return (np.mod(d_model, align) == 0) & (np.mod(ffn, align) == 0)",
             "return np.ones(np.shape(d_model), dtype=bool)",
             ("tests/test_ref_solvers.py::test_alignment_filters_where_an_unaligned_width_would_win",
              "tests/test_ref_solvers.py::test_exhaustive_honours_the_alignment")),
    Mutation("e", "the KKT certificate skips the bound sign check", "rooflaw/solver/relaxation/certificate.py",
             "return {k: float(m) for k, m in zip(names, mu, strict=False)}, resid, at, sign_ok",
             "return {k: float(m) for k, m in zip(names, mu, strict=False)}, resid, at, True",
             ("tests/test_ref_kkt.py",)),
    Mutation("f", "Optuna frontier not Pareto-filtered", "rooflaw/solver/search/study.py",
             'return f[m].sort_values(["latency_s", "loss"])', 'return f.sort_values(["latency_s", "loss"])',
             ("tests/test_ref_solvers.py::test_optuna_frontier_is_non_dominated_and_matches_brute_force_on_a_small_space",)),
    Mutation("g", "KV cache read by QKᵀ in activation bytes (b_kv -> b_a)", "rooflaw/constraints/operators.py",
             "bytes=T * q_out * b_a + B * C * kv_out * b_kv + unfused",
             "bytes=T * q_out * b_a + B * C * kv_out * b_a + unfused", REF),
    Mutation("h", "softmax moves the scores once instead of read + write", "rooflaw/constraints/operators.py",
             "bytes=unfused * 2 * B * nh * Sq * C * b_v,\n        count=\"attn_layers\"",
             "bytes=unfused * B * nh * Sq * C * b_v,\n        count=\"attn_layers\"", REF),
    Mutation("i", "kernel launch overhead counted twice in prefill", "rooflaw/constraints/assembly.py",
             "return pre + OVERHEAD * launches, dec", "return pre + 2 * OVERHEAD * launches, dec",
             ("tests/test_cost_model.py",)),
    Mutation("j", "vector ops in activation bytes (b_v = b_a, INT8/FP8 halves softmax traffic)",
             "rooflaw/constraints/precision.py", "return max(self.activations.bytes, 2.0)",
             "return self.activations.bytes", REF),
    Mutation("k", "cache key forgets the constraints package (compile.py, symbols.py edits served stale)",
             "rooflaw/cache.py", 'DERIVING_PACKAGES = ("arch", "constraints", "objectives", "solver")',
             'DERIVING_PACKAGES = ("arch", "objectives", "solver")', ("tests/test_cache.py",)),
    Mutation("l", "MoE weights: top_k experts instead of the expected coverage", "rooflaw/constraints/operators.py",
             "EXPERTS_TOUCHED = E * (1 - (1 - K / E) ** T)", "EXPERTS_TOUCHED = K + 0 * T",
             ("tests/test_ref_bytes_torch.py",)),
    # issue 28: the serving rates, the EP all-to-all, a study's identity, and the hardening of the inputs
    Mutation("m", "tokens/s per user divided by the pipeline depth", "rooflaw/constraints/parallel/serving.py",
             "tokens_per_s_per_user=S_out / decode_s, tokens_per_s_per_device",
             "tokens_per_s_per_user=S_out / decode_s / lay.pp, tokens_per_s_per_device", PINS),
    Mutation("n", "EP: one all-to-all per MoE layer instead of dispatch + combine",
             "rooflaw/constraints/parallel/serving.py",
             "t = t + 2 * c.all_to_all(own * cols[\"top_k\"] * d * b_a, lay.ep, system)",
             "t = t + c.all_to_all(own * cols[\"top_k\"] * d * b_a, lay.ep, system)", PINS),
    Mutation("o", "EP: every TP peer dispatches every token (not its 1/tp share)",
             "rooflaw/constraints/parallel/serving.py",
             "own = tokens_attn / g.tp_attn", "own = tokens_attn", PINS),
    Mutation("p", "tokens/s per device forgets the data-parallel replicas", "rooflaw/constraints/parallel/serving.py",
             "tokens = lay.dp * wl.batch * S_out", "tokens = wl.batch * S_out", PINS),
    Mutation("q", "batch sweep prices every row at the first batch", "rooflaw/constraints/parallel/sweep.py",
             "w = Workload(int(b), wl.input_tokens", "w = Workload(int(batches[0]), wl.input_tokens", PINS),
    Mutation("r", "a study's identity ignores the device's figures (same id, other bandwidth)",
             "rooflaw/solver/search/safety.py",
             "\"device_figures\": dev.to_dict(),  # the figures, so a resume on a changed device names the field\n"
             "        \"device_hash\": _hash(dev.to_dict()),", "", PINS),
    Mutation("s", "a study's identity ignores the space's values (same name, other dimensions)",
             "rooflaw/solver/search/safety.py",
             "\"space_dims\": problem.space.to_dict(),  # the values, so a resume on an edited space names the "
             "dimension\n        \"space_hash\": _hash(problem.space.to_dict()),", "", PINS),
    Mutation("t", "hypervolume drops NaN points silently", "rooflaw/solver/discrete/pareto.py",
             "    if np.isnan(p).any():\n", "    p = p[~np.isnan(p).any(axis=1)]\n    if False:\n", INPUTS),
    Mutation("u", "input files opened without the regular-file check (a FIFO blocks)", "rooflaw/safe_io.py",
             "    if not stat.S_ISREG(st.st_mode):\n        raise bad(field, str(p), f\"is not a regular file",
             "    if False:\n        raise bad(field, str(p), f\"is not a regular file", INPUTS),
    Mutation("v", "no nesting limit on parsed files and mappings", "rooflaw/safe_io.py",
             "MAX_DEPTH = 32", "MAX_DEPTH = 10**9", INPUTS),
    Mutation("w", "loky workers outlive a killed parent (no watchdog)", "rooflaw/solver/jobs.py",
             "    threading.Thread(target=watch, name=\"rooflaw-parent-watchdog\", daemon=True).start()",
             "    pass", ("tests/test_reliability_processes.py::test_sigkill_of_the_parent_ends_its_loky_workers",)),
    Mutation("x", "spec integers unbounded (ffn=99999999999999999999 accepted)", "rooflaw/arch/load.py",
             "return check_int(key, number, -MAX_INT)", "return number", INPUTS),
)  # fmt: skip


def _copy(dst: Path) -> None:
    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard"], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)


def run(m: Mutation, python: str) -> tuple[str, list[str]]:
    """('caught' | 'SURVIVED' | 'stale', failing test ids)."""
    with tempfile.TemporaryDirectory(prefix=f"rooflaw-mut-{m.key}-") as tmp:
        work = Path(tmp) / "repo"
        _copy(work)
        f = work / m.path
        text = f.read_text()
        if text.count(m.old) != 1:
            return "stale", [f"{m.path}: the text to replace occurs {text.count(m.old)} times"]
        f.write_text(text.replace(m.old, m.new))
        env = dict(os.environ, PYTHONPATH=str(work), ROOFLAW_CACHE_DIR=str(Path(tmp) / "cache"))
        env.pop("ROOFLAW_NO_CACHE", None)
        proc = subprocess.run(
            [python, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", *m.tests],
            cwd=work, env=env, capture_output=True, text=True,
        )  # fmt: skip
        failed = re.findall(r"^FAILED (\S+)", proc.stdout, flags=re.M)
        errors = re.findall(r"^ERROR (\S+)", proc.stdout, flags=re.M)
        if proc.returncode == 0:
            return "SURVIVED", []
        return "caught", failed + errors or [proc.stdout.strip().splitlines()[-1]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", help="mutation keys to run")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("-v", "--verbose", action="store_true", help="list every failing test, not the first three")
    args = ap.parse_args()
    chosen = [m for m in MUTATIONS if not args.only or m.key in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.key}  {m.what}  ({m.path})")
        return 0
    bad = 0
    for m in chosen:
        verdict, tests = run(m, args.python)
        bad += verdict != "caught"
        n = f" by {len(tests)} test(s)" if verdict == "caught" else ""
        print(f"[{m.key}] {verdict}{n}: {m.what}")
        for t in tests if args.verbose else tests[:3]:
            print(f"      {t}")
        sys.stdout.flush()
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
