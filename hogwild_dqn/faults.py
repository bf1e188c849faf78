"""What ends a process for good (its exit status: exits.py; no restart: a restart would meet it again), and the
check by which a child sees its runner gone. A process's other failures are restarted within --max-restarts."""

from __future__ import annotations

import os
from collections.abc import Callable


class NonFinite(RuntimeError):
    """NaN or Inf in a loss, a gradient or the shared parameters; the message names where and when."""


def runner_alive() -> Callable[[], bool]:
    """A check, for a child process, that the runner which started it still lives: a runner killed outright
    (SIGKILL) cannot stop its children, which are then re-parented and must stop by themselves."""
    runner = os.getppid()
    return lambda: os.getppid() == runner
