"""What code a result comes from: the package's version, the git commit of a checkout, and the versions of the
libraries a checkpoint depends on. Imports nothing of the package, so that any module may ask."""

from __future__ import annotations

import functools
import platform
import subprocess
from importlib import metadata
from pathlib import Path

__version__ = "0.5.0"


@functools.cache
def commit(where: Path = Path(__file__).parent) -> str | None:
    """The commit (short) of the checkout holding `where`, marked "+changes" when tracked files other than docs/
    differ from it; None outside a git checkout (an installed package). Asked once per process."""
    def git(*a: str) -> str:
        try:
            out = subprocess.run(["git", *a], cwd=where, capture_output=True, text=True, check=False, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return out.stdout.strip() if out.returncode == 0 else ""
    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return None
    # docs/ is left out because a suite writes its records there: its second run would otherwise name its code
    # "+changes" when only the first run's record changed.
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no", "--", ":(top)",
                                     ":(top,exclude)docs") else "")


def library(name: str) -> str | None:
    """An installed distribution's version, read from its metadata (nothing is imported)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def versions() -> dict:
    """The package, Python and the libraries whose changes can change what a checkpoint means."""
    return {"hogwild_dqn": __version__, "python": platform.python_version(), "torch": library("torch"),
            "gymnasium": library("gymnasium"), "ale_py": library("ale-py"), "numpy": library("numpy")}
