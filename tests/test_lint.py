"""Style: ruff (pyflakes, pycodestyle, bugbear, numpy-convention docstrings) is clean."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


@pytest.mark.skipif(shutil.which("ruff") is None and not (ROOT / ".venv/bin/ruff").exists(), reason="ruff not installed")
def test_ruff_is_clean():
    ruff = shutil.which("ruff") or str(ROOT / ".venv/bin/ruff")
    res = subprocess.run([ruff, "check", "softmax_scale", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
