"""Helpers to run train.py for real, in a subprocess, as a user would."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_train(*args, timeout=600, **kwargs) -> subprocess.CompletedProcess:
    """Run `python train.py ARGS` from the repo root; capture its output."""
    return subprocess.run([sys.executable, str(ROOT / "train.py"), "--no-progress", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


def read_summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())


@pytest.fixture
def train():
    return run_train
