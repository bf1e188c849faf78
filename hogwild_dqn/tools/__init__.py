"""Tools around the trainer, not part of it: throughput (bench), sweep reports (report), the benchmark suite
(benchmark), DQN's ablation (ablation), the memory soak (soak) and a trained network's internals (probe). Each
is a command of its own (`python -m hogwild_dqn.tools.NAME`, or its make target / console command); none is
imported by the trainer."""

import sys
import time
from pathlib import Path

# How a tool starts a training run: the trainer's own command, from the current directory (so relative --logdir
# and --run-dir mean what the user meant), a checkout or an installed package alike.
TRAIN = (sys.executable, "-m", "hogwild_dqn.train")


def resume_or_start(run: Path, start: list[str]) -> list[str]:
    """The command that brings the run in `run` to its end: resume it from its checkpoint (a run that was cut),
    else `start` it, with a dir cut before its first checkpoint set aside as <run>.cut-<time>."""
    if (run / "checkpoint.pt").is_file():
        return [*TRAIN, "--resume", str(run), "--no-progress"]
    if run.exists():
        run.rename(run.with_name(f"{run.name}.cut-{int(time.time())}"))
    return start
