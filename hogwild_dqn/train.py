"""The trainer's command (hogwild-train, train.py): parse the config, then run on this machine (runner) or on a
Ray cluster (cluster/driver). How it ends, a failure as one line and its exit status: commands.py."""

import sys

from hogwild_dqn import __version__
from hogwild_dqn.commands import command, invoked_as
from hogwild_dqn.config import load, start_line


def _prog() -> str:
    return invoked_as("train.py")


# Ctrl-C that reaches this main is one during its imports: the runner takes signals over before any child starts
@command(_prog, interrupted="stopped (Ctrl-C) before the run's processes started")
def main(argv: list[str] | None = None) -> int:
    cfg, resume, source = load(argv, _prog(), __version__)
    # heavy imports only once the command line is good; Ray only for a cluster run
    from hogwild_dqn.envs import protocol

    print(f"{start_line(cfg, source)}; {protocol(cfg)}", flush=True)
    if cfg.cluster:
        from hogwild_dqn.cluster.driver import run_cluster as run
    else:
        from hogwild_dqn.runner import run
    return run(cfg, resume)


if __name__ == "__main__":
    sys.exit(main())
