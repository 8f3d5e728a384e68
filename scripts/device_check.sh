#!/usr/bin/env bash
# The GPU check of issue #10: calibrate the CUDA GPU from micro-benchmarks, validate rooflaw's latencies of real
# eager decoders against it and against the catalog device (published-fitted figures), run the GPU tests.
#
#   OUT=/empty/dir bash scripts/device_check.sh      # from the repository root; rooflaw need not be installed
#   DEVICE_CHECK_DRY=1 OUT=/tmp/dc bash scripts/device_check.sh   # the same steps with CUDA hidden (< 60 s, CPU)
#
# Writes to $OUT (flat, 4 files): log.txt (everything), calibrate_cuda.toml (the measured device),
# validate_cuda_calibrated.json (predicted on it), validate_cuda_catalog.json (predicted on $CATALOG_DEVICE,
# default h200-sxm). Each step has its own timeout and a failed step does not stop the next; the whole run stays
# under $BUDGET_S seconds (default 420). Needs python3 with torch, numpy, scipy, sympy, pandas, typer, rich,
# pytest (no cvxpy, optuna, moocore, distributed: rooflaw's calibrate and validate do not import them).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-420}
CATALOG_DEVICE=${CATALOG_DEVICE:-h200-sxm}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export ROOFLAW_CACHE_DIR=${ROOFLAW_CACHE_DIR:-${TMPDIR:-/tmp}/rooflaw-device-check-cache}
if [ "${DEVICE_CHECK_DRY:-0}" = "1" ]; then
  export CUDA_VISIBLE_DEVICES=""  # torch sees no GPU: every CUDA step must skip cleanly
fi
exec > >(tee -a "$OUT/log.txt") 2>&1

# seconds a step may run: its cap, or what is left of the budget (less 15 s for the summary)
left() { local cap=$1 rest=$((BUDGET_S - SECONDS - 15)); [ "$rest" -lt "$cap" ] && cap=$rest; [ "$cap" -lt 1 ] && cap=1; echo "$cap"; }
step() { echo; echo "===== [$(date -u +%H:%M:%S), ${SECONDS}s] $*"; }

step "device_check.sh: host and versions"
date -u
git rev-parse HEAD 2>/dev/null || echo "(no git)"
uname -a
nproc
nvidia-smi || echo "(no nvidia-smi)"
"$PY" - <<'EOF' || echo "step versions failed rc=$?"
import os, sys
print("python", sys.version.split()[0], "| DEVICE_CHECK_DRY =", os.environ.get("DEVICE_CHECK_DRY", "0"))
import numpy, torch
print("numpy", numpy.__version__, "| torch", torch.__version__, "| CUDA", torch.version.cuda,
      "| available", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("GPU", p.name, "| sm", f"{p.major}.{p.minor}", "| SMs", p.multi_processor_count,
          "| memory", round(p.total_memory / 1e9, 1), "GB | L2", getattr(p, "L2_cache_size", "?"))
from importlib.util import find_spec
print(", ".join(f"{m} {'present' if find_spec(m) else 'absent'}" for m in
                ("cvxpy", "optuna", "moocore", "distributed", "scipy", "sympy", "pandas", "numba")))
EOF

step "calibrate the GPU: rooflaw devices calibrate --cuda (timeout $(left 90) s)"
timeout "$(left 90)" "$PY" -m rooflaw devices calibrate --cuda --out "$OUT/calibrate_cuda.toml" \
  || echo "step calibrate failed rc=$?"
if [ -s "$OUT/calibrate_cuda.toml" ]; then
  CAL="$OUT/calibrate_cuda.toml"
else
  CAL=local  # validate calibrates the GPU itself
fi

step "validate on the calibrated GPU: rooflaw validate --cuda --device $CAL (timeout $(left 200) s)"
timeout "$(left 200)" "$PY" -m rooflaw validate --cuda --device "$CAL" --json > "$OUT/validate_cuda_calibrated.json" \
  || echo "step validate-calibrated failed rc=$?"

step "GPU tests: pytest tests/test_truth_cuda*.py (timeout $(left 120) s)"
timeout "$(left 120)" "$PY" -m pytest -q -p no:cacheprovider -rs tests/test_truth_cuda*.py \
  || echo "step pytest failed rc=$?"

step "validate on the catalog device: rooflaw validate --cuda --device $CATALOG_DEVICE (timeout $(left 200) s)"
timeout "$(left 200)" "$PY" -m rooflaw validate --cuda --device "$CATALOG_DEVICE" --json \
  > "$OUT/validate_cuda_catalog.json" || echo "step validate-catalog failed rc=$?"

step "summary"
for f in "$OUT"/validate_cuda_calibrated.json "$OUT"/validate_cuda_catalog.json; do
  [ -s "$f" ] || { rm -f "$f"; echo "$(basename "$f"): no result"; continue; }
  "$PY" - "$f" <<'EOF' || echo "summary of $f failed rc=$?"
import json, sys
rep = json.load(open(sys.argv[1]))
print(f"{sys.argv[1].rsplit('/', 1)[-1]}: device {rep['device']} on {rep['gpu']}, workload {rep['workload']}")
print(f"{'config':20} {'phase':8} {'pred ms':>9} {'meas ms':>9} {'error':>7} {'roof ms':>8} {'launch ms':>9} syncs")
for c in rep["configs"]:
    print(f"{c['name']:20} {c['phase']:8} {c['predicted_s'] * 1e3:9.3f} {c['measured_s'] * 1e3:9.3f} "
          f"{c['error']:+7.1%} {c['roofline_s'] * 1e3:8.3f} {c['launch_s'] * 1e3:9.3f} "
          f"{c["host_syncs"]:.3g}/{c["host_syncs_counted"]}")
print(f"MAPE prefill {rep['mape_prefill']:.1%}, decode {rep['mape_decode']:.1%}; spread {rep['median_spread']:.1%}")
EOF
done
echo "total ${SECONDS}s"
ls -la "$OUT"
