"""Set-up: `rooflaw --version`, paper_repro inside the distribution, a demo install without torch or test tools."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rooflaw.cli import main

ROOT = Path(__file__).resolve().parents[1]

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib


def test_version_matches_the_package_metadata(capsys):
    assert main(["--version"]) == 0
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert capsys.readouterr().out.strip() == f"rooflaw {version}"


def test_wheel_ships_paper_repro(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for pkg in ("rooflaw", "paper_repro"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    cmd = [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q", "-w",
           str(tmp_path / "dist")]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and "No module named" in r.stderr:
        pytest.skip(f"cannot build a wheel here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr
    names = zipfile.ZipFile(next((tmp_path / "dist").glob("rooflaw-*.whl"))).namelist()
    for mod in sorted(p.name for p in (ROOT / "paper_repro").glob("*.py")):
        assert f"paper_repro/{mod}" in names
    assert "rooflaw/cli/repro.py" in names
    for name in ("report.html", "report.js", "report.css"):  # the report's template is package data
        assert f"rooflaw/report/template/{name}" in names


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_installs_no_torch_and_no_test_extras(tmp_path):
    venv = tmp_path / "venv"

    def dry(target: str) -> str:
        r = subprocess.run(["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout

    demo = dry("demo")
    assert "pip install -q -e ." in demo and "torch" not in demo and "[dev" not in demo
    test = dry("test")
    torch_at, extras_at = test.index("torch==2.13.0"), test.index('".[dev,torch]"')
    assert torch_at < extras_at  # the CPU build first, so the extras do not pull a CUDA one
    assert "pytest" in test
