"""Tensorboard writers and the fixed tag names. The x-axis of every scalar is global frames."""

from __future__ import annotations

import io
import os
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from PIL import Image
from tensorboard.compat.proto.summary_pb2 import Summary
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

from hogwild_dqn.files import WriteFailed, write_failed

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
# the signs of the A3C-LSTM's collapse (docs/notebook/a3c-lstm.md), logged by the on-policy workers
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


class RunWriter(SummaryWriter):
    """A process's tensorboard writer whose failures to write (a full disk) are WriteFailed, one line naming its
    event file; the file keeps every record written before (event files are append-only)."""

    def __init__(self, run_dir: Path, name: str):
        self.run_dir, self.name, self.failed = Path(run_dir), name, False
        _quiet_writer_threads()
        with self._failing():
            super().__init__(log_dir=str(run_dir), filename_suffix=f".{name}", flush_secs=10)

    def path(self) -> Path:
        """This process's event file (found by its pid and suffix until the writer exists)."""
        writer = getattr(getattr(self, "file_writer", None), "event_writer", None)
        name = getattr(writer, "_file_name", None)
        if name:
            return Path(name)
        found = sorted(self.run_dir.glob(f"events.out.tfevents.*.{os.getpid()}.*.{self.name}"))
        return found[-1] if found else self.run_dir / f"events.out.tfevents.*.{self.name}"

    @contextmanager
    def _failing(self):
        try:
            yield
        except OSError as e:  # the writer's thread met it; its next call raises it here
            self.failed = True
            raise write_failed(self.path(), e, "the event file keeps what was written before") from None

    def add_scalar(self, tag, value, step=None, *args, **kwargs):
        with self._failing():
            super().add_scalar(tag, value, step, *args, **kwargs)

    def add_summary(self, summary: Summary, step=None) -> None:
        """A summary protocol buffer (hparams, a GIF) into this process's event file."""
        with self._failing():
            self.file_writer.add_summary(summary, step)

    def flush(self):
        with self._failing():
            super().flush()

    def close(self):
        """Flush and close; after a failure already raised, the same failure is not raised again."""
        reported = self.failed
        try:
            with self._failing():
                super().close()
        except WriteFailed:
            if not reported:
                raise


def make_writer(run_dir: Path, name: str) -> RunWriter:
    """One event file per process, all in the run dir, so tensorboard shows one run."""
    return RunWriter(run_dir, name)


def _quiet_writer_threads() -> None:
    """tensorboard's writer thread re-raises what it met, and Python prints that thread's traceback; the writer's
    next call raises the same error in the process's own thread (RunWriter: one line), so the thread stays
    quiet. Installed once per process."""
    if getattr(threading.excepthook, "quiet_writers", False):
        return
    previous = threading.excepthook

    def hook(args) -> None:
        if not (isinstance(args.exc_value, OSError) and type(args.thread).__name__ == "_AsyncWriterThread"):
            previous(args)

    hook.quiet_writers = True
    threading.excepthook = hook


def write_hparams(writer: SummaryWriter, hparam_dict: dict, metric_dict: dict) -> None:
    """Record the run's hparams in its own event file (add_hparams would open a separate run dir)."""
    clean = {k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in hparam_dict.items()}
    exp, ssi, sei = hparams(clean, metric_dict)
    for summary in (exp, ssi, sei):
        writer.add_summary(summary)
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
    writer.add_summary(Summary(value=[Summary.Value(tag=tag, image=image)]), step)
