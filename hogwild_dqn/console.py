"""What the user sees and does at the console during a run, the same on one machine and on a cluster: the
progress line, and Ctrl-C / SIGTERM turned into the run's final status."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

from tqdm import tqdm

from hogwild_dqn.config import Config
from hogwild_dqn.exits import PIPE_CLOSED, SIGNALLED, quiet, terminal_gone


class Stopped(BaseException):
    """Raised in the main process by SIGTERM or SIGHUP (its args: the signal), like KeyboardInterrupt for SIGINT,
    and like it no Exception: a library's `except Exception` (imageio wraps what its ffmpeg write raises into an
    IOError) must not turn a stop into a failure."""


def _on_stop(signum, frame):
    if signum == signal.SIGHUP:  # as the run saves itself, nothing more reaches a closed terminal
        terminal_gone()
    raise Stopped(signum)


def catch_stop_signals() -> None:
    """Ctrl-C raises KeyboardInterrupt, SIGTERM and a hang-up Stopped, even if the process started with SIGINT
    ignored (as a background job of a script does), so Ctrl-C, `kill -INT`, `kill` and a closed terminal always
    stop a command cleanly; a SIGHUP that nohup ignores stays ignored."""
    signal.signal(signal.SIGTERM, _on_stop)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _on_stop)


def stopped_by(e: Stopped) -> tuple[int, str, str]:
    """The exit status of a command that Stopped, what stopped it ("terminated", "hung up") and the signal's name."""
    signum = e.args[0] if e.args else signal.SIGTERM
    status, name = SIGNALLED[signum]
    return status, "hung up" if signum == signal.SIGHUP else "terminated", name


class Abandoned(BaseException):
    """A second stop signal while the run stops and saves itself: it ends at once, without what it had not saved yet
    (args: the signal, then what was not written, said by whoever caught it: train.py prints one line)."""


class OutputClosed(Exception):
    """stderr (the progress line, or a line say() wrote) could not be written: its reader went away
    (`hogwild-train ... 2>&1 | head -1`)."""


_stderr = SimpleNamespace(closed=False)  # once a write met a broken pipe, stderr is /dev/null: no later write fails


def say(text: str, stop: bool = True) -> None:
    """A line for the user on stderr while a run trains (a restart, a child's traceback). Its reader gone (with
    --no-progress no progress line finds out first), stderr goes to /dev/null and, with `stop`, OutputClosed
    stops the run as the progress line's failed write does: saved, exit 141, not a traceback. A line without
    `stop` (a traceback, said before its restart line) leaves the stop to the next line that may stop."""
    _to_stderr(lambda: tqdm.write(text, file=sys.stderr))
    if stop and _stderr.closed:
        raise OutputClosed


def _to_stderr(write):
    """`write()` to stderr; its reader gone, stderr goes to /dev/null from then on (every later line of the run
    would fail too), `_stderr.closed` says so, and the write is made again there."""
    try:
        return write()
    except BrokenPipeError:
        quiet(sys.stderr)
        _stderr.closed = True
        return write()


class Console:
    """`with Console(...) as console:` shows a progress line and catches a stop signal; `console.status` is then
    (130, "interrupted (SIGINT)"), (143, "terminated (SIGTERM)"), (129, "hung up (SIGHUP)") or, the progress
    line's reader gone, (141, ...), else what the loop inside set."""

    def __init__(self, cfg: Config, frames0: int, desc: str):
        self.cfg, self.frames0, self.desc = cfg, frames0, desc
        self.status: tuple[int, str] = (0, "finished")
        _stderr.closed = False

    def __enter__(self) -> Console:
        catch_stop_signals()
        self.bar = _to_stderr(lambda: tqdm(total=self.cfg.frames, initial=self.frames0, unit="frame",
                                          unit_scale=True, dynamic_ncols=True, desc=self.desc,
                                          disable=not self.cfg.progress,
                                          mininterval=0.5 if sys.stderr.isatty() else 30))  # a log: every 30 s
        return self

    def show(self, frames: int, last_eval: dict | None) -> None:
        _to_stderr(lambda: self.bar.update(min(frames, self.cfg.frames) - self.bar.n))
        if last_eval:
            self.bar.set_postfix_str(f"eval {last_eval['mean_return']:.1f}", refresh=False)
        if _stderr.closed:
            raise OutputClosed

    def __exit__(self, kind, exc, tb) -> bool:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # finishing() takes the signals over
        if signal.getsignal(signal.SIGHUP) is _on_stop:  # as SIGTERM; one that nohup ignores stays ignored
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
        self.bar.close()
        if kind is KeyboardInterrupt:
            self.status = (SIGNALLED[signal.SIGINT][0], "interrupted (SIGINT)")
        elif kind is Stopped:
            status, what, name = stopped_by(exc)
            self.status = (status, f"{what} ({name})")
        elif kind is OutputClosed:
            self.status = (PIPE_CLOSED, "stopped: its output's reader went away (a broken pipe)")
        return kind in (KeyboardInterrupt, Stopped, OutputClosed)


@contextmanager
def finishing(signalled: bool = False, at_once: Callable[[int], None] | None = None):
    """While a run stops and writes its checkpoint and summary: Ctrl-C, SIGTERM and a hang-up (unless ignored:
    nohup) are noted (`.signum`), not raised, so what was trained is always saved; the caller cuts short what
    waits (the final evaluation). A second signal (the first, where `signalled`: the run is stopping because of
    one) raises Abandoned: the user asked twice, and the run ends at once; or, given `at_once`, calls it with the
    signal, to end the process itself (where an exception raised in a signal handler cannot travel: Ray's calls)."""
    note = SimpleNamespace(signum=None)

    def noted(signum, frame):
        if signum == signal.SIGHUP:
            terminal_gone()
        if signalled or note.signum is not None:
            if at_once is not None:
                at_once(signum)
            raise Abandoned(signum)
        note.signum = signum

    # only a process's main thread takes signals (a cluster machine's pool runs in a Ray actor's thread: none reach it)
    main = threading.current_thread() is threading.main_thread()
    old = {sig: signal.signal(sig, noted) for sig in SIGNALLED if main and signal.getsignal(sig) != signal.SIG_IGN}
    try:
        yield note
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def unsaved(run_dir: Path, saved: list[str]) -> str:
    """What a run ended at once did not write, and what it keeps."""
    missing = [x for x in ("the final checkpoint", "summary.json") if x not in saved]
    if not missing:
        return "its checkpoint and summary were written"
    kept = ("its last checkpoint.pt stays: --resume continues from it" if (run_dir / "checkpoint.pt").exists()
            else "it has no checkpoint")
    return f"not written: {' and '.join(missing)}; {kept}"
