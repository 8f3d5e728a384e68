"""What the CLI tests share: the ``rooflaw`` command run in-process, small space files to run it on, and a
terminal's Ctrl-C for the child processes the interrupt tests start."""

from __future__ import annotations

from pathlib import Path

from rooflaw.cli import main

#: Two depths of one width, inside the paper law's domain (l 4-32, d 768-3072): frontier/search run on it at once.
TINY_SPACE = "layers = [4, 8]\nd_model = [768]\nhead_dim = [64]\nkv_heads = [1]\nmoe = [[1, 1]]\nr_single = [2]\n"
#: 32 points for the joint space: two depths and widths, MQA or MHA, dense or 8 experts (top 2), two FFN ratios.
TINY_JOINT_SPACE = ('layers = [4, 8]\nd_model = [512, 1024]\nhead_dim = [128]\nkv_heads = [1, "heads"]\n'
                    'moe = [[1, 1], [8, 2]]\nr_single = [1.0, 3.0]\nvocab = [32000]\ntied = [false]\n')  # fmt: skip


def run_cli(capsys, *args: object) -> tuple[int, str, str]:
    """Run ``rooflaw ARGS`` in this process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def space_file(directory: Path, text: str = TINY_JOINT_SPACE, name: str = "tiny.toml") -> Path:
    """Write a space TOML (the tiny joint space unless told) into ``directory``; its path."""
    path = Path(directory) / name
    path.write_text(text)
    return path


def default_sigint() -> None:
    """In the child before exec: Ctrl-C as a terminal's foreground job has it. A test run started in the background
    of a non-interactive shell (``cmd &``, ``nohup``) inherits SIGINT ignored, and so would every child, which then
    runs to the end whatever the test sends it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
