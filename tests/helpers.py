"""Helpers shared by test modules (not tests themselves)."""

import json
import subprocess
import sys
import tempfile


def run_python_json(code: str, env: dict, *, flags=(), prefix=()) -> tuple[dict, str]:
    """Run ``code`` in a fresh ``python -W error`` and return (the JSON its last stdout line holds, stderr).

    The working directory is the temp dir, not the repository, whose ``softmax_scale/`` would
    otherwise shadow what ``PYTHONPATH`` points at (``-c`` puts the cwd first on the path).
    """
    cmd = [*prefix, sys.executable, *flags, "-W", "error", "-c", code]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False, cwd=tempfile.gettempdir())
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr
