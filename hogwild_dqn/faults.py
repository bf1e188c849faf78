"""What ends a process for good, and the exit status that tells the runner so (no restart: a restart would meet
it again), and the check by which a child sees its runner gone. A process's other failures are restarted within
--max-restarts."""

from __future__ import annotations

import os
from collections.abc import Callable

NONFINITE_EXIT = 3  # exit status of a process that met NaN/Inf
WRITE_EXIT = 5  # exit status of a process that could not write a file of the run (a full disk)


class NonFinite(RuntimeError):
    """NaN or Inf in a loss, a gradient or the shared parameters; the message names where and when."""


def runner_alive() -> Callable[[], bool]:
    """A check, for a child process, that the runner which started it still lives: a runner killed outright
    (SIGKILL) cannot stop its children, which are then re-parented and must stop by themselves."""
    runner = os.getppid()
    return lambda: os.getppid() == runner
