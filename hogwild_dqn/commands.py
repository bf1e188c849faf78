"""How every command ends (hogwild-train, hogwild-play, the tools): its failures as one line on stderr and the exit
status of each (exits.py), written once and wrapped around each command's main(argv)."""

from __future__ import annotations

import functools
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from hogwild_dqn import exits
from hogwild_dqn.config import ConfigError
from hogwild_dqn.console import Abandoned, Stopped, stopped_by
from hogwild_dqn.files import WriteFailed


def command(name: str | Callable[[], str], interrupted: str = "interrupted"):
    """Decorate a command's main(argv) -> exit status: a bad input (ConfigError) is `<name>: error: ...` and exit 2,
    a file it could not write 1, Ctrl-C `<name>: <interrupted>` and 130, SIGTERM / SIGHUP (console.Stopped) 143 /
    129, a second stop signal while a run saved itself (console.Abandoned) its signal's status with what was not
    written, stdout's reader gone (`| head`) the shell's 141; never a traceback. `name` may be a function (the
    program's name as it was called)."""

    def wrap(main: Callable[[list[str] | None], int]) -> Callable[[list[str] | None], int]:
        @functools.wraps(main)
        def run(argv: list[str] | None = None) -> int:
            prog = name() if callable(name) else name
            try:
                return main(argv)
            except ConfigError as e:
                print(f"{prog}: error: {e}", file=sys.stderr)
                return exits.BAD_INPUT
            except WriteFailed as e:  # an output it could not write (a full disk, a read-only folder): kept as it was
                print(f"{prog}: error: {e}", file=sys.stderr)
                return exits.FAILED
            except Abandoned as e:
                unsaved = e.args[1] if len(e.args) > 1 else "what it had not written yet is lost"
                return abandoned(prog, e.args[0], unsaved)
            except KeyboardInterrupt:
                print(f"{prog}: {interrupted}", file=sys.stderr)
                return exits.SIGNALLED[signal.SIGINT][0]
            except Stopped as e:
                status, what, _ = stopped_by(e)
                print(f"{prog}: {what}", file=sys.stderr)
                return status
            except BrokenPipeError:  # stdout's reader gone (`| head -1`)
                return exits.pipe_closed()

        return run

    return wrap


def invoked_as(default: str) -> str:
    """The program's name as it was called (train.py, or hogwild-train when installed)."""
    return Path(sys.argv[0]).name or default


def abandoned(prog: str, signum: int, unsaved: str, ended: str = "its processes killed") -> int:
    """Say that a second stop signal ended a run at once, what ended its processes and what was not written;
    return the signal's exit status."""
    status, sig = exits.SIGNALLED[signum]
    print(f"{prog}: {sig} again: stopped at once, {ended}; {unsaved}", file=sys.stderr, flush=True)
    return status


def not_a_command(module: str, command: str) -> int:
    """What `python -m` of a helper module (one only other tools import) says: one line naming the command that
    does its work, exit status 2, rather than nothing at all."""
    print(f"{module.rsplit('.', 1)[-1]}: error: {module} is part of another tool, not a command; run {command}",
          file=sys.stderr)
    return exits.BAD_INPUT
