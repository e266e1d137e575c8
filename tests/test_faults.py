"""Faults: a read-only install, no writable cache anywhere, and NUMBA_DISABLE_JIT.

Each scenario runs in a fresh interpreter with ``-W error`` (a warning fails
it) and must reproduce the numbers of the normal, jitted, in-process run.

How "read-only" is made real: the package is copied to a temporary directory
and ``chmod -R a-w``.  As root, permission bits do not stop writes, so the
subprocess is started through ``setpriv --bounding-set=-all`` (uid 0 without
any capability, for which the kernel enforces file modes like for any owner);
without root it simply runs as the current user.  The "nothing writable"
scenario patches ``os.access`` and ``tempfile.tempdir`` before the import,
because /tmp stays writable for everyone.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from helpers import run_python_json

import softmax_scale as ss
from softmax_scale import _kernels, _rng_kernels
from softmax_scale._util import jit as _jit
from softmax_scale._util.rng import seed_sequence

PKG = Path(ss.__file__).resolve().parent

# The computation each subprocess runs; prints JSON with the numbers and where numba cached.
PROBE = """
import json, os, numba
import numpy as np
import softmax_scale as ss
from softmax_scale import _kernels
from softmax_scale._util import jit as _jit
from softmax_scale._util.rng import seed_sequence
tr = ss.mc_trials([0.5, 1.0, 1.5, 3.0], 70, "normal", trials=6, rng=3, parallel=False)
cos = ss.mc_trials(2.0, 40, "cosine", d=8, trials=4, rng=4, parallel=False)
st = _kernels.block_states(seed_sequence(3), 6)
draws = _kernels.draw_scores(70, 6, 1, st, 0, 0.0, np.zeros(1))
print(json.dumps(dict(
    sum_p2=tr.sum_p2.tolist(), entropy=tr.entropy.tolist(), grad=tr.grad.tolist(), log_z=tr.log_z.tolist(),
    cos=cos.grad.tolist(), draws=draws.tolist(), cache=_jit._OPTIONS["cache"],
    cache_dir=numba.config.CACHE_DIR, disabled=bool(numba.config.DISABLE_JIT), file=ss.__file__,
)))
"""


def _reference() -> dict:
    tr = ss.mc_trials(
        [0.5, 1.0, 1.5, 3.0], 70, "normal", trials=6, rng=3, parallel=False
    )
    cos = ss.mc_trials(2.0, 40, "cosine", d=8, trials=4, rng=4, parallel=False)
    st = _kernels.block_states(seed_sequence(3), 6)
    draws = _kernels.draw_scores(70, 6, 1, st, 0, 0.0, np.zeros(1))
    return {
        "sum_p2": tr.sum_p2,
        "entropy": tr.entropy,
        "grad": tr.grad,
        "log_z": tr.log_z,
        "cos": cos.grad,
        "draws": draws,
    }


def _run(
    code: str,
    env_extra: dict,
    prefix: list[str] | None = None,
    pythonpath: str | None = None,
) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(env_extra)
    flags = []
    if pythonpath:
        # -S: no site processing, so the editable install's finder cannot shadow the copy;
        # the dependencies come from site-packages, put after the copy on the path
        site_packages = str(Path(np.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join([pythonpath, site_packages])
        flags = ["-S"]
    out, stderr = run_python_json(code, env, flags=flags, prefix=prefix or ())
    assert stderr == "", stderr[-3000:]
    return out


def _readonly_copy(tmp: Path) -> Path:
    root = tmp / "site"
    shutil.copytree(
        PKG, root / "softmax_scale", ignore=shutil.ignore_patterns("__pycache__")
    )
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            os.chmod(
                p, os.stat(p).st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
            )
    os.chmod(root, 0o555)
    return root


def _unprivileged_prefix() -> list[str] | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all"]


def _make_writable(path: Path) -> None:
    for dirpath, _, _ in os.walk(path):
        os.chmod(dirpath, 0o755)


@pytest.mark.slow
def test_read_only_install_caches_in_a_private_temp_dir(tmp_path):
    prefix = _unprivileged_prefix()
    if prefix is None:
        pytest.skip(
            "running as root without setpriv: cannot make the copy really read-only"
        )
    site = _readonly_copy(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o555)  # no ~/.cache/numba either
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    try:
        # the copy really is read-only for the subprocess
        probe = f"import tempfile; tempfile.TemporaryFile(dir={str(site / 'softmax_scale')!r})"
        denied = subprocess.run(
            prefix + [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            check=False,
        )
        assert denied.returncode != 0
        assert "Permission" in denied.stderr
        out = _run(PROBE, {"HOME": str(home), "TMPDIR": str(tmpdir)}, prefix, str(site))
    finally:
        _make_writable(tmp_path)
    assert out["file"].startswith(str(site))
    assert out["cache"] is True
    assert out["cache_dir"].startswith(str(tmpdir))
    assert "softmax_scale-numba-cache" in out["cache_dir"]
    cached = list(Path(out["cache_dir"]).rglob("*.nbi"))
    assert cached, "nothing was cached in the fallback directory"
    assert not list((site / "softmax_scale").rglob("*.nbi"))
    ref = _reference()
    for key in ("sum_p2", "entropy", "grad", "log_z", "cos", "draws"):
        assert np.array_equal(np.asarray(out[key]), ref[key]), key


@pytest.mark.slow
def test_nothing_writable_compiles_in_memory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    code = (
        "import os, tempfile\n"
        "os.access = lambda *a, **k: False\n"
        f"tempfile.tempdir = {str(ro)!r}\n" + PROBE
    )
    try:
        out = _run(code, {"HOME": str(ro)})
    finally:
        ro.chmod(0o755)
    assert out["cache"] is False
    ref = _reference()
    for key in ("sum_p2", "grad", "draws"):
        assert np.array_equal(np.asarray(out[key]), ref[key]), key


def test_ensure_cache_dir_paths(tmp_path, monkeypatch):
    """The fallback logic itself, in-process, with the checks patched (works as root too)."""
    saved = _jit.numba.config.CACHE_DIR
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    try:
        # NUMBA_CACHE_DIR set: numba's rule, nothing changed
        monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
        assert _jit._ensure_cache_dir() is True
        monkeypatch.delenv("NUMBA_CACHE_DIR")
        # package not writable: a private per-user directory under the temp dir
        with (
            mock.patch.object(_jit.os, "access", return_value=False),
            mock.patch.object(_jit.tempfile, "gettempdir", return_value=str(tmp_path)),
            mock.patch.object(
                _jit,
                "_writable",
                side_effect=lambda p: str(p).startswith(str(tmp_path)),
            ),
        ):
            assert _jit._ensure_cache_dir() is True
            chosen = Path(_jit.numba.config.CACHE_DIR)
            assert chosen.parent == tmp_path
            assert (chosen.name.startswith(
                "softmax_scale-numba-cache"
            ))
            assert stat.S_IMODE(chosen.stat().st_mode) & 0o077 == 0
        # the fallback directory exists but is writable by others: refused (cache files are code)
        chosen.chmod(0o777)
        with (
            mock.patch.object(_jit.os, "access", return_value=False),
            mock.patch.object(_jit.tempfile, "gettempdir", return_value=str(tmp_path)),
            mock.patch.object(_jit, "_writable", return_value=True),
        ):
            assert _jit._ensure_cache_dir() is False
        # nothing writable at all
        with (
            mock.patch.object(_jit, "_writable", return_value=False),
            mock.patch.object(_jit.os, "access", return_value=False),
        ):
            assert _jit._ensure_cache_dir() is False
    finally:
        _jit.numba.config.CACHE_DIR = saved
    # negative control: the real package directory is writable here, so caching stays in-tree
    assert _jit._ensure_cache_dir() is True


def test_disable_jit_gives_the_same_draws_and_the_same_statistics():
    out = _run(PROBE, {"NUMBA_DISABLE_JIT": "1"})
    assert out["disabled"] is True
    ref = _reference()
    # the draws are integer arithmetic and one multiplication: bit for bit
    assert np.array_equal(np.asarray(out["draws"]), ref["draws"])
    # the statistics: same to rounding (reassociated vectorised sums in the jitted code)
    for key in ("sum_p2", "entropy", "grad", "log_z", "cos"):
        np.testing.assert_allclose(
            np.asarray(out[key]), ref[key], rtol=1e-13, atol=1e-15, err_msg=key
        )


def test_xoshiro_matches_the_reference_arithmetic_on_python_ints():
    """The uint64 wrap of the jitted generator is the reference's ``mod 2**64`` (the pure-Python
    path is checked bit for bit against it, silently, by the NUMBA_DISABLE_JIT test above)."""
    start = [2**64 - 1, 2**63 + 12345, 2**62 + 7, 99]
    st = np.array(start, dtype=np.uint64)
    jitted = [int(_rng_kernels._next_u64(st)) for _ in range(50)]
    s, mask = list(start), 2**64 - 1

    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & mask

    want = []
    for _ in range(50):
        want.append((rotl((s[1] * 5) & mask, 7) * 9) & mask)
        t = (s[1] << 17) & mask
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
    assert jitted == want
    assert [int(x) for x in st] == s


# A module jitted through the package's jit, called with two signatures (two cache entries).
TWO_SIGNATURES = """
from softmax_scale._util.jit import jit


@jit()
def first_twice(x):
    return x[0] * 2
"""
CALL_BOTH = """
import json, numpy as np, twosig
print(json.dumps(dict(ints=float(twosig.first_twice(np.array([3], dtype=np.int64))),
                      floats=float(twosig.first_twice(np.array([1.5]))),
                      hits=len(twosig.first_twice.stats.cache_hits))))
"""


@pytest.mark.slow
def test_a_cache_index_naming_another_signatures_file_is_a_miss(tmp_path):
    """Two processes compiling one function's signatures at once can leave its index naming the other
    signature's data file (numba's numbering races); numba alone then runs that code on these arguments
    (here 3e-323 for 3 * 2). Through the package's jit the file holds its key: a miss, recompiled."""
    import pickle

    from numba.core.serialize import dumps

    (tmp_path / "twosig.py").write_text(TWO_SIGNATURES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(PKG.parent)])
    first, _ = run_python_json(CALL_BOTH, env)
    assert (first["ints"], first["floats"], first["hits"]) == (6.0, 3.0, 0)
    again, _ = run_python_json(CALL_BOTH, env)
    assert again["hits"] == 2  # both signatures came from the disk cache
    (index,) = (tmp_path / "__pycache__").glob("twosig.first_twice-*.nbi")
    with open(index, "rb") as fh:
        version = pickle.load(fh)
        stamp, overloads = pickle.loads(fh.read())
    assert len(overloads) == 2
    (ka, a), (kb, b) = overloads.items()
    with open(index, "wb") as fh:
        pickle.dump(version, fh, protocol=-1)
        fh.write(dumps((stamp, {ka: b, kb: a})))
    swapped, _ = run_python_json(CALL_BOTH, env)
    assert (swapped["ints"], swapped["floats"], swapped["hits"]) == (6.0, 3.0, 0)
