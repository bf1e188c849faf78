"""The bench's points: the config one point is measured with (the algorithm's preset, the label's values, --with's
train.py flags, checked) and the folder its tables go to. tools/bench.py measures them; a baseline tree's bench
runs its own point_config."""

from __future__ import annotations

import shlex
from datetime import datetime
from pathlib import Path

from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.config import Config, ConfigError, build_parser, default_preset, first_line, read_yaml

FINAL_EPS = "@final-eps"  # a replay method's second point: epsilon at its final value from the first step


def point_config(base: Config, algo: str, envs: int) -> Config:
    """The config of one point: the base values, or the preset of an algorithm with its own (dqn learning from
    the start, ppo)."""
    values = {**base.to_dict(), "algo": algo, "envs_per_worker": envs}
    if ALGORITHMS[algo].presets:
        preset = read_yaml(default_preset(base.game, algo))
        values.update({**preset, "game": base.game, "algo": algo, "envs_per_worker": envs, "frames": base.frames,
                       "eval_every": base.eval_every, "learning_starts": 0})
    return Config(**values)


def point_overrides(label: str) -> dict:
    """Config values a point's label adds to point_config's (the same on the baseline's side)."""
    return {"eps_anneal_frames": 0} if label.endswith(FINAL_EPS) else {}


def flag_overrides(flags: str, game: str, algos: list[str], envs: list[int]) -> dict:
    """The config values of --with's train.py flags, checked against every point's config: a flag that is not
    train.py's, one the benchmark sets or ignores, or a value the config refuses, is a ConfigError of one line."""
    try:
        values = vars(build_parser("--with").parse_args(shlex.split(flags)))
    except (ConfigError, ValueError) as e:  # the parser's errors, and shlex's (an unclosed quote): one line
        raise ConfigError(f"--with {flags!r}: {first_line(e)}") from None
    fixed = {"config", "resume", "game", "algo", "envs_per_worker", "threads", "frames", "max_restarts", "eval_every",
             "logdir", "run_dir"}
    if taken := fixed & set(values):
        raise ConfigError(f"--with {flags!r}: the benchmark sets {', '.join(sorted(taken))} itself")
    for algo in algos:
        for e in envs:
            try:
                Config(**{**bench_config(game, algo, e, {}).to_dict(), **values}).validate()
            except (ConfigError, TypeError) as err:
                raise ConfigError(f"--with {flags!r} on {algo} x{e} games: {first_line(err)}") from None
    return values


def bench_config(game: str, algo: str, envs: int, overrides: dict) -> Config:
    """The config of one point measured in this tree (bench.py's DRIVER builds the same from a baseline tree's own
    point_config, which is why it does not call this)."""
    base = Config(game=game, frames=10**12, progress=False, video_steps=0)
    return Config(**{**point_config(base, algo, envs).to_dict(), **overrides})


def out_folder(args) -> Path:
    """--out, made if missing (default runs/bench-<time>): where the table, bench.json or profile.txt go."""
    out = Path(args.out or f"runs/bench-{datetime.now():%Y%m%d-%H%M%S}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--out {out} cannot be a folder here ({e.strerror or first_line(e)})") from None
    return out


if __name__ == "__main__":
    import sys

    from hogwild_dqn.commands import not_a_command

    sys.exit(not_a_command(__spec__.name, "`python -m hogwild_dqn.tools.bench`"))
