"""Shared test settings: a non-interactive matplotlib backend, ``helpers`` importable from every test folder.

``--cpu-durations=N`` lists the N tests that took the most CPU time (this process and the
subprocesses it waited for, setup and teardown included): on a shared machine wall times say how
loaded it was, CPU times what a test costs.
"""

import resource
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parent))

_CPU: dict[str, float] = {}


def pytest_addoption(parser):
    parser.addoption("--cpu-durations", type=int, default=None, metavar="N",
                     help="list the N tests that took the most CPU time (0: all)")


def _cpu_seconds() -> float:
    own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if item.config.getoption("cpu_durations") is None:
        yield
        return
    t0 = _cpu_seconds()
    yield
    _CPU[item.nodeid] = _cpu_seconds() - t0


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    n = config.getoption("cpu_durations")
    if n is None:
        return
    rows = sorted(_CPU.items(), key=lambda kv: -kv[1])
    terminalreporter.write_sep("=", f"CPU seconds: {sum(_CPU.values()):.1f} in all, {len(rows)} tests")
    for nodeid, seconds in rows[:n or None]:
        terminalreporter.write_line(f"{seconds:8.2f}s cpu  {nodeid}")
