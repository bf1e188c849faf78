"""What ends a process for good, and the exit status that tells the runner so (no restart: a restart would meet
it again). A process's other failures are restarted within --max-restarts."""

NONFINITE_EXIT = 3  # exit status of a process that met NaN/Inf
WRITE_EXIT = 5  # exit status of a process that could not write a file of the run (a full disk)


class NonFinite(RuntimeError):
    """NaN or Inf in a loss, a gradient or the shared parameters; the message names where and when."""
