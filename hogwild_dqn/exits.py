"""The trainer's exit statuses, each written once: what `train.py` (and `hogwild-play`, the tools) return, and
what a child process's exit code tells the runner (a restart would meet the same fault again: no restart)."""

from __future__ import annotations

import os
import signal
import sys

FINISHED = 0      # every frame trained, or a confirmed --stop-return, and scored
FAILED = 1        # a process failed past its restarts, a file could not be written, NaN/Inf
BAD_INPUT = 2     # a bad flag, preset, run dir or checkpoint: one line, nothing started or written
NONFINITE = 3     # a child met NaN/Inf in a loss, a gradient or the shared weights
UNSCORED = 4      # the run trained, but its final evaluation (its score) was cut: --resume plays it
WRITE_FAILED = 5  # a child could not write a file of the run (a full disk)
# stopped by a signal: (status, name); SIGHUP, the terminal gone, where it is not ignored (nohup)
SIGNALLED = {signal.SIGINT: (130, "SIGINT"), signal.SIGTERM: (143, "SIGTERM"), signal.SIGHUP: (129, "SIGHUP")}
STOPPED = {code for code, _ in SIGNALLED.values()}
PIPE_CLOSED = 128 + signal.SIGPIPE  # what the shell reports for a command whose reader went away (`| head`)


def quiet(stream) -> None:
    """`stream` (stdout, stderr) writes to /dev/null from now on: its reader is gone, and every later line (the
    run's last, Python's flush on the way out) would fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
    os.close(devnull)  # the stream's fd now points where it did: a second call must not leave one more open


def terminal_gone() -> None:
    """A hang-up: stdout and stderr write to /dev/null from now on (a closed terminal fails every write, EIO)."""
    quiet(sys.stdout)
    quiet(sys.stderr)


def pipe_closed() -> int:
    """stdout's reader gone (`hogwild-play ... | head -1`): stop quietly, as a shell command does, rather than with
    a traceback."""
    quiet(sys.stdout)
    return PIPE_CLOSED
