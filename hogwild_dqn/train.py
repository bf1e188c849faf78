"""The trainer's command (hogwild-train, train.py): parse the config, then run on this machine (runner) or on a
Ray cluster (cluster). Bad input is one line on stderr and exit code 2; a file of the run that cannot be written (a
full disk) is one line and exit code 1."""

import signal
import sys
from pathlib import Path

from hogwild_dqn import __version__, exits
from hogwild_dqn.config import ConfigError, load, start_line
from hogwild_dqn.console import Abandoned
from hogwild_dqn.files import WriteFailed


def main(argv: list[str] | None = None) -> int:
    prog = Path(sys.argv[0]).name or "train.py"  # train.py, or hogwild-train when installed
    try:
        cfg, resume, source = load(argv, prog, __version__)
        # heavy imports only once the command line is good; Ray only for a cluster run
        from hogwild_dqn.envs import protocol

        print(f"{start_line(cfg, source)}; {protocol(cfg)}", flush=True)
        if cfg.cluster:
            from hogwild_dqn.cluster import run_cluster as run
        else:
            from hogwild_dqn.runner import run
        return run(cfg, resume)
    except ConfigError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return exits.BAD_INPUT
    except WriteFailed as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return exits.FAILED
    except Abandoned as e:  # a second Ctrl-C (or SIGTERM) while the run saved itself: it ended at once
        status, name = exits.SIGNALLED[e.args[0]]
        unsaved = e.args[1] if len(e.args) > 1 else "what it had not written yet is lost"
        print(f"{prog}: {name} again: stopped at once, its processes killed; {unsaved}", file=sys.stderr)
        return status
    except KeyboardInterrupt:  # Ctrl-C before the runner takes signals over (during its imports): no child started
        print(f"{prog}: stopped (Ctrl-C) before the run's processes started", file=sys.stderr)
        return exits.SIGNALLED[signal.SIGINT][0]
    except BrokenPipeError:  # stdout's reader gone (`| head -1`): at the start line, or at the last (all saved)
        return exits.pipe_closed()


if __name__ == "__main__":
    sys.exit(main())
