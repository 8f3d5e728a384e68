"""The README's "Use it from Python" example runs as written, and prints what it claims."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_block() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Use it from Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the section holds exactly one python example"
    return blocks[0]


def test_readme_python_example_runs():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_python_block(), str(README), "exec"), {"__name__": "readme"})  # noqa: S102 - our own README
    text = out.getvalue()
    import rooflaw as rl

    # the first print is the evaluate() numbers, recomputed here independently of the example
    rep = rl.evaluate(rl.from_hf_config("qwen2.5-0.5b"), rl.get_device("jetson-agx-orin-64gb"))
    assert f"decode {rep.decode_s * 1e3:.1f} ms, memory {rep.memory_bytes / 1e9:.2f} GB" in text
    # the closed-form answer meets its 20 ms decode budget; the infeasible one names latency
    assert "binding latency" in text
    assert re.search(r"^latency \S+ decode latency ≥ ", text, flags=re.M), text
