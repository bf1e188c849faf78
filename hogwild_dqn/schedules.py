"""The schedules over global frames: the value-based methods' exploration epsilon (Mnih et al. 2016, section
5.1: each game's final epsilon drawn once, a linear anneal to it) and the learning-rate line (and where a
resumed run's line starts)."""

from __future__ import annotations

import numpy as np


def draw_final_epsilon(rng: np.random.Generator, finals: list, probs: list, games: int = 1) -> np.ndarray:
    """Each game draws its own final epsilon once (paper: {0.1, 0.01, 0.5} w.p. {0.4, 0.3, 0.3}): the paper's
    diversity of exploration came from 16 threads; a worker playing several games draws one per game."""
    return rng.choice(np.asarray(finals, dtype=float), size=games, p=np.asarray(probs, dtype=float))


def epsilon(global_frames: int, start: float, final, anneal_frames: int):
    """Linear anneal from `start` to `final` (a number, or an array: one per game) over the first
    `anneal_frames` global frames, then flat."""
    if anneal_frames <= 0:
        return final
    frac = min(1.0, global_frames / anneal_frames)
    return start + frac * (final - start)


def learning_rate(global_frames: int, lr: float, total_frames: int, anneal: bool, start_frames: int = 0) -> float:
    """The paper anneals the shared learning rate linearly to 0 over the run: from `lr` at `start_frames` to 0
    at `total_frames`. A resumed run starts its line at the checkpoint's frames and rate (resumed_lr), so that
    a larger --frames lengthens the schedule without a jump."""
    if not anneal:
        return lr
    if total_frames <= start_frames:
        return 0.0
    return lr * max(0.0, (total_frames - global_frames) / (total_frames - start_frames))


def resumed_lr(saved: dict, frames: int, lr: float) -> tuple[int, float]:
    """(start_frames, lr) of a resumed session's schedule: where the checkpoint's own schedule (`saved`: its
    lr_start and config) stood at its `frames`. A new --lr on the command line starts the line from that rate."""
    config = saved.get("config") or {}
    if not config.get("lr_anneal", True) or config.get("lr") != lr:
        return frames, lr
    start_frames, start_lr = saved.get("lr_start") or (0, lr)
    total = int(config.get("frames", frames))
    return frames, learning_rate(frames, float(start_lr), total, True, int(start_frames))
