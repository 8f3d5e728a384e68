#!/usr/bin/env bash
# The GPU check of issue #10: calibrate the CUDA GPU from micro-benchmarks, validate rooflaw's latencies of real
# eager decoders against it and against the catalog device (published-fitted figures), run the GPU tests.
#
#   OUT=/empty/dir bash scripts/device_check.sh      # from the repository root; rooflaw need not be installed
#   DEVICE_CHECK_DRY=1 OUT=/tmp/dc bash scripts/device_check.sh   # the same steps with CUDA hidden (< 60 s, CPU)
#
# Writes to $OUT (flat, at most 7 files): log.txt (everything), calibrate_cuda.toml (the measured device),
# validate_cuda_calibrated.json (eager decoders measured, predicted on it), validate_cuda_catalog.json (the same
# measurements predicted on $CATALOG_DEVICE, default h200-sxm), validate_cuda_graphs_{calibrated,catalog}.json (the
# dense decoders replayed as CUDA graphs), validate_cuda_calibrated_repeat.json (the eager pass again, when time is
# left). STEPS=calibrate,graphs,pytest (say) runs only those. Each step has its own timeout and a failed step does not stop the next; the whole run stays under $BUDGET_S
# seconds (default 420). Needs python3 with torch, numpy, scipy, sympy, pandas, typer, rich,
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

# STEPS: a comma-separated subset of calibrate,eager,graphs,pytest,repeat (default: all of them)
STEPS=${STEPS:-calibrate,eager,graphs,pytest,repeat}
want() { case ",$STEPS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

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

if want calibrate; then
  step "calibrate the GPU: rooflaw devices calibrate --cuda (timeout $(left 90) s)"
  timeout "$(left 90)" "$PY" -m rooflaw devices calibrate --cuda --out "$OUT/calibrate_cuda.toml" \
    || echo "step calibrate failed rc=$?"
fi
if [ -s "$OUT/calibrate_cuda.toml" ]; then
  CAL="$OUT/calibrate_cuda.toml"
else
  CAL=local  # validate calibrates the GPU itself
fi

# validate: measure once per mode on the GPU (predicted on the calibrated device), then predict the SAME measurements
# on the catalog device (--measured: no GPU work)
validate() {  # validate NAME TIMEOUT ARGS...: rooflaw validate --cuda --json ARGS > $OUT/NAME.json
  local name=$1 cap=$2; shift 2
  step "$name: rooflaw validate --cuda $* (timeout $(left "$cap") s)"
  timeout "$(left "$cap")" "$PY" -m rooflaw validate --cuda --json "$@" > "$OUT/$name.json" \
    || echo "step $name failed rc=$?"
  [ -s "$OUT/$name.json" ] || rm -f "$OUT/$name.json"
}
again() {  # again NAME FROM TIMEOUT ARGS...: predict the measurements of $OUT/FROM.json on other devices
  local name=$1 from=$2; shift 2
  if [ -s "$OUT/$from.json" ]; then
    validate "$name" "$@" --measured "$OUT/$from.json"
  else
    step "$name: skipped (no $from.json to reuse)"
  fi
}

if want eager; then
  validate validate_cuda_calibrated 200 --device "$CAL"
  again validate_cuda_catalog validate_cuda_calibrated 60 --device "$CATALOG_DEVICE"
fi
if want graphs; then
  validate validate_cuda_graphs_calibrated 150 --graphs --device "$CAL"
  again validate_cuda_graphs_catalog validate_cuda_graphs_calibrated 60 --graphs --device "$CATALOG_DEVICE"
fi

if want pytest; then
  step "GPU tests: pytest tests/test_truth_cuda*.py (timeout $(left 120) s)"
  timeout "$(left 120)" "$PY" -m pytest -q -p no:cacheprovider -rs tests/test_truth_cuda*.py \
    || echo "step pytest failed rc=$?"
fi

if want repeat && [ "$(left 200)" -ge 100 ]; then  # run-to-run reproducibility: the eager pass once more
  validate validate_cuda_calibrated_repeat 200 --device "$CAL"
elif want repeat; then
  step "validate_cuda_calibrated_repeat: skipped ($(left 200) s left)"
fi

step "summary: python3 scripts/gpu_report.py \$OUT"
"$PY" scripts/gpu_report.py "$OUT" || echo "step summary failed rc=$?"
echo "total ${SECONDS}s"
ls -la "$OUT"
