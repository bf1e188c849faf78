"""The benchmark's suites: their games, frames, seeds and protocol. Apart from tools/benchmark.py so that what reads
a suite's records (frontpage) knows its games without importing the trainer's env code."""

from hogwild_dqn.tools import atari5

SIX = ("Pong", "Breakout", "SpaceInvaders", "BeamRider", "Qbert", "Seaquest")
SEEDS = (1, 2, 3)  # the seeds of each game of a suite, unless --seeds says otherwise
STICKY = ("--sticky-actions", "0.25")  # Machado et al. 2018's protocol, ALE v5's default: the field's 10M figures'
SUITES = {  # name -> (games, frames of each run, SB3 A2C beside it, train.py flags of every run, the kind of game)
    "atari": (SIX, 10_000_000, False, (), "atari"),
    "atari-sticky": (SIX, 10_000_000, False, STICKY, "atari"),
    # Atari-5 (Aitchison et al. 2023): five games whose scores estimate the 57-game median (tools/atari5.py)
    "atari5": (atari5.GAMES, 10_000_000, False, STICKY, "atari"),
    "mujoco": (("Hopper-v5", "Walker2d-v5", "HalfCheetah-v5", "Ant-v5"), 1_000_000, True, (), "mujoco"),
}


if __name__ == "__main__":
    import sys

    from hogwild_dqn.commands import not_a_command

    sys.exit(not_a_command(__spec__.name, "`python -m hogwild_dqn.tools.benchmark --suite NAME`"))
