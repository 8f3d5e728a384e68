"""Markdown tables of a ``scripts/device_check.sh`` result folder (the docs' GPU section is written from them).

    python scripts/gpu_report.py OUT_DIR

For each ``validate_cuda_*.json``: per config and phase the prediction, the measurement, the error, the two parts
of the prediction (roofline, launch = kernels × seconds per kernel) and how the model combined them (``max`` for a
host-launching engine on a GPU, else ``sum``), then three diagnostics computed from the same figures -- no factor
fitted to the measurements: **sum** (roofline + launch), **max** (max(roofline, launch)) and **+syncs** (the
prediction plus the host syncs torch counted times one sync round trip measured by ``calibrate --cuda``, from
``calibrate_cuda.toml``'s notes).
Only the standard library.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    tomllib = None  # type: ignore[assignment]


def sync_seconds(folder: Path) -> float | None:
    """One host sync round trip (s) from ``calibrate_cuda.toml``'s notes, None when absent."""
    f = folder / "calibrate_cuda.toml"
    if not f.is_file():
        return None
    text = f.read_text(encoding="utf-8")
    notes = tomllib.loads(text).get("notes", "") if tomllib else text
    m = re.search(r"host sync round trip ([0-9.]+) us", notes)
    return float(m.group(1)) * 1e-6 if m else None


def mape(errors: list[float]) -> float:
    return sum(abs(e) for e in errors) / len(errors) if errors else float("nan")


def report(path: Path, sync_s: float | None) -> str:
    rep = json.loads(path.read_text(encoding="utf-8"))
    wl = rep["workload"]
    lines = [
        f"### {path.name}: predicted on `{rep['device']}` ({rep.get('device_name', '')}), measured on {rep['gpu']}",
        "",
        f"{rep.get('versions', '')}; batch {wl['batch']}, {wl['input_tokens']} prompt tokens, "
        f"{wl['output_tokens']} decode steps; {rep['statistic']}; median spread {rep['median_spread']:.1%}.",
        "",
        "| config | phase | predicted ms | measured ms | error | roofline ms | launch ms | model | sum err | max err | "
        "syncs (counted) | +syncs err |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    diag: dict[str, list[float]] = {}
    for c in rep["configs"]:
        meas, roof, launch = c["measured_s"], c["roofline_s"], c["launch_s"]
        over = max(roof, launch) / meas - 1
        summed = (roof + launch) / meas - 1
        counted = c.get("host_syncs_counted")
        with_syncs = (c["predicted_s"] + counted * sync_s) / meas - 1 if sync_s and counted is not None else None
        for key, err in (
            (c["phase"], c["error"]),
            (f"{c['phase']} sum", summed),
            (f"{c['phase']} max", over),
            (f"{c['phase']} +syncs", with_syncs),
        ):
            if err is not None:
                diag.setdefault(key, []).append(err)
        ws = f"{with_syncs:+.1%}" if with_syncs is not None else "—"
        lines.append(
            f"| {c['name']} | {c['phase']} | {c['predicted_s'] * 1e3:.3f} | {meas * 1e3:.3f} | {c['error']:+.1%} | "
            f"{roof * 1e3:.3f} | {launch * 1e3:.3f} | {c.get('combine', 'sum')} | {summed:+.1%} | {over:+.1%} | "
            f"{c['host_syncs']:.3g} ({counted}) | {ws} |"
        )
    lines += ["", "MAPE " + ", ".join(f"{k} {mape(v):.1%}" for k, v in sorted(diag.items()))]
    lines += [f"skipped {name}: {why}" for name, why in rep.get("skipped", {}).items()]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python scripts/gpu_report.py OUT_DIR", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    sync_s = sync_seconds(folder)
    print(f"host sync round trip: {sync_s * 1e6:.1f} us" if sync_s else "host sync round trip: not measured")
    for f in sorted(folder.glob("validate_cuda_*.json")):
        if f.stat().st_size:
            print()
            print(report(f, sync_s))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
