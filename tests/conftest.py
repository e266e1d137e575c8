"""Shared test settings: a non-interactive matplotlib backend, and ``helpers`` importable from every test folder."""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parent))
