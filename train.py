"""Entry point: parse the config, run the trainer. Bad input is one line on stderr and exit code 2."""

import sys

from hogwild_dqn.config import ConfigError, load, start_line


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, resume, source = load(argv)
        print(start_line(cfg, source), flush=True)
        from hogwild_dqn.runner import run  # heavy imports only once the command line is good

        return run(cfg, resume)
    except ConfigError as e:
        print(f"train.py: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
