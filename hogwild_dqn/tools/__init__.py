"""Tools around the trainer, not part of it: throughput (bench), sweep reports (report), the benchmark suite
(benchmark), DQN's ablation (ablation), the memory soak (soak) and a trained network's internals (probe). Each
is a command of its own (`python -m hogwild_dqn.tools.NAME`, or its make target / console command); none is
imported by the trainer."""

import sys

# How a tool starts a training run: the trainer's own command, from the current directory (so relative --logdir
# and --run-dir mean what the user meant), a checkout or an installed package alike.
TRAIN = (sys.executable, "-m", "hogwild_dqn.train")
