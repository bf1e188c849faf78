"""Tensorboard writers and the fixed tag names. The x-axis of every scalar is global frames."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image
from tensorboard.compat.proto.summary_pb2 import Summary
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
FINAL_MEAN = "eval/final_mean_return"  # the last weights over --final-eval-episodes games: the run's score
FINAL_STD = "eval/final_std_return"
# a periodic evaluation that reached --stop-return, confirmed (or not) by its weights over --final-eval-episodes
CONFIRM_MEAN = "eval/confirmation_mean_return"
CONFIRM_STD = "eval/confirmation_std_return"
EVAL_SECONDS = "perf/eval_seconds"
BEST_EPISODE = "eval/best_episode"
# the signs of the A3C-LSTM's collapse (docs/notebook.md, "A3C-LSTM on Pong"), logged by the on-policy workers
TORSO_VARIATION = "charts/torso_variation_ratio"  # near 0: the torso's features no longer follow the screen
TORSO_SIZE = "charts/torso_size"  # the ratio's denominator: does it fall because a constant grows?
LSTM_CELL = "charts/lstm_cell_abs"  # the cells' mean |c|; tanh(c) saturates from about 3
# PPO: updates pushed by all workers between a rollout's acting weights and a minibatch's push (the ratio's lag)
POLICY_LAG = "charts/policy_lag"
PHASE_SECONDS = "perf/{phase}_seconds"  # PPO: one rollout's seconds in the env, in acting, in its epochs


def feature_spread(features) -> tuple[float, float]:
    """Features (..., time, units): how much they vary over time (each unit's standard deviation over time, the
    mean over units and leading axes) and their size (the mean |mean over time|)."""
    return float(features.std(-2).mean()), float(features.mean(-2).abs().mean())


def log_episode(writer: SummaryWriter, rank: int, episode: dict, frames: int, frames_per_step: int) -> None:
    """A whole game ended in worker `rank`: its raw score and its length in emulator frames."""
    writer.add_scalar(EPISODE_RETURN.format(rank=rank), float(episode["r"]), frames)
    writer.add_scalar(EPISODE_LENGTH.format(rank=rank), int(episode["l"]) * frames_per_step, frames)


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


def encode_gif(frames: list[np.ndarray], fps: int = 30) -> bytes:
    """RGB frames (H, W, 3 uint8) -> an animated GIF."""
    images = [Image.fromarray(f) for f in frames]
    buf = io.BytesIO()
    images[0].save(buf, format="GIF", save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    return buf.getvalue()


def write_gif(writer: SummaryWriter, tag: str, gif: bytes, step: int) -> None:
    """Log an animated GIF; tensorboard's IMAGES tab plays it (add_video would need moviepy for the same)."""
    width, height = Image.open(io.BytesIO(gif)).size
    image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=gif)
    writer.file_writer.add_summary(Summary(value=[Summary.Value(tag=tag, image=image)]), step)
