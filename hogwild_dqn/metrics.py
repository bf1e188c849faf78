"""Tensorboard writers and the fixed tag names. The x-axis of every scalar is global frames."""

from __future__ import annotations

from pathlib import Path

from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

# charts/: what the agents experience; losses/: what the learners optimise; eval/: the evaluator;
# perf/: throughput. Per-worker tags end in /w<rank> so tensorboard overlays the workers of one run.
EPISODE_RETURN = "charts/episodic_return/w{rank}"
EPISODE_LENGTH = "charts/episodic_length/w{rank}"
EPSILON = "charts/epsilon/w{rank}"
LEARNING_RATE = "charts/learning_rate"
FPS = "perf/frames_per_second"
EVAL_MEAN = "eval/mean_return"
EVAL_STD = "eval/std_return"
EVAL_DEVICE_SECONDS = "perf/eval_seconds"


def make_writer(run_dir: Path, name: str) -> SummaryWriter:
    """One event file per process, all in the run dir, so tensorboard shows one run."""
    return SummaryWriter(log_dir=str(run_dir), filename_suffix=f".{name}", flush_secs=10)


def write_hparams(writer: SummaryWriter, hparam_dict: dict, metric_dict: dict) -> None:
    """Record the run's hparams in its own event file (add_hparams would open a separate run dir)."""
    clean = {k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in hparam_dict.items()}
    exp, ssi, sei = hparams(clean, metric_dict)
    for summary in (exp, ssi, sei):
        writer.file_writer.add_summary(summary)
    for k, v in metric_dict.items():
        writer.add_scalar(k, v)
