"""Style: ruff (pyflakes, pycodestyle, bugbear, numpy-convention docstrings) is clean."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


#: ruff on the PATH, else beside the interpreter running the tests (a virtual environment's bin/).
RUFF = shutil.which("ruff") or shutil.which("ruff", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(RUFF is None, reason="ruff not installed")
def test_ruff_is_clean():
    ruff = RUFF
    res = subprocess.run([ruff, "check", "softmax_scale", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
