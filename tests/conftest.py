"""Shared test settings: a non-interactive matplotlib backend, ``helpers`` importable from every test folder.

``--cpu-durations=N`` lists the N tests that took the most CPU time (this process and the
subprocesses it waited for, setup and teardown included): on a shared machine wall times say how
loaded it was, CPU times what a test costs.

JAX's persistent compilation cache is on for the session, in a temporary folder that the worker
processes of the experiments inherit through the environment: the quick forms, their reruns and
the command-line runs compile the same small models, and each program is compiled once.  A cache
folder set outside (``JAX_COMPILATION_CACHE_DIR``) is used as it is.
"""

import atexit
import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="softmax-scale-jax-cache-")
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
    os.environ.update(JAX_COMPILATION_CACHE_DIR=_cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                      JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

_CPU: dict[str, float] = {}


def pytest_addoption(parser):
    parser.addoption("--cpu-durations", type=int, default=None, metavar="N",
                     help="list the N tests that took the most CPU time (0: all)")


def _cpu_seconds() -> float:
    own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


_START: dict[str, float] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _START[item.nodeid] = _cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # the teardown report carries the test's CPU seconds, so that they reach the controller under pytest-xdist
    outcome = yield
    if call.when == "teardown" and item.nodeid in _START:
        outcome.get_result().user_properties.append(("cpu_seconds", _cpu_seconds() - _START.pop(item.nodeid)))


def pytest_runtest_logreport(report):
    for key, value in report.user_properties:
        if key == "cpu_seconds":
            _CPU[report.nodeid] = value


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    n = config.getoption("cpu_durations")
    if n is None:
        return
    rows = sorted(_CPU.items(), key=lambda kv: -kv[1])
    terminalreporter.write_sep("=", f"CPU seconds: {sum(_CPU.values()):.1f} in all, {len(rows)} tests")
    for nodeid, seconds in rows[:n or None]:
        terminalreporter.write_line(f"{seconds:8.2f}s cpu  {nodeid}")
