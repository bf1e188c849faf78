"""Per-worker exploration of the value-based methods (Mnih et al. 2016, section 5.1)."""

from __future__ import annotations

import numpy as np


def draw_final_epsilon(rng: np.random.Generator, finals: list, probs: list) -> float:
    """Each worker draws its own final epsilon once (paper: {0.1, 0.01, 0.5} w.p. {0.4, 0.3, 0.3})."""
    return float(rng.choice(np.asarray(finals, dtype=float), p=np.asarray(probs, dtype=float)))


def epsilon(global_frames: int, start: float, final: float, anneal_frames: int) -> float:
    """Linear anneal from `start` to `final` over the first `anneal_frames` global frames, then flat."""
    if anneal_frames <= 0:
        return final
    frac = min(1.0, global_frames / anneal_frames)
    return start + frac * (final - start)


def learning_rate(global_frames: int, lr: float, total_frames: int, anneal: bool) -> float:
    """The paper anneals the shared learning rate linearly to 0 over the run."""
    if not anneal:
        return lr
    return lr * max(0.0, 1.0 - global_frames / total_frames)
