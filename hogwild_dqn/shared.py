"""The Hogwild contract, in one place.

What is shared between processes (all in shared memory, handed to children at spawn):
- `model`: the one network every worker learns into. Updated lock-free (Hogwild): workers write their
  optimizer steps concurrently without any lock; torn reads/writes are part of the algorithm's design.
- `target`: the value-based methods' target network (None for A3C). Copied from `model` exactly once per
  `target_update` global frames, by whichever worker's frame increment crosses the boundary; the claim is
  made under the frame counter's lock, so no interval is copied twice or skipped.
- `optimizer`: one optimizer whose statistics (RMSProp's g, Adam's moments and step) live in shared
  memory, allocated eagerly before spawning so every process sees the same tensors. Its step is lock-free.
- `frames`: the global frame counter, an integer protected by its own lock (it drives the schedules,
  the target sync, the evaluator and the stopping rule, so it must not lose increments).
- `stop`: set by the runner to ask every worker to finish its segment and exit.
- `workers_done`: set by the runner once every worker has exited; the evaluator then runs its last
  evaluation and exits.

How gradients reach the shared parameters: each worker computes gradients on its *local* copy and passes
them explicitly to `optimizer.step(grads, lr)`. Nothing aliases `.grad` between the local and the shared
model, so PyTorch 2.x's `zero_grad()` (which sets grads to None) cannot leave a stale gradient behind.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


class SharedRMSprop:
    """The paper's shared RMSProp: g = a*g + (1-a)*d^2;  theta -= lr * d / sqrt(g + eps)."""

    def __init__(self, params, alpha: float, eps: float):
        self.params = list(params)
        self.alpha, self.eps = alpha, eps
        self.square_avg = [torch.zeros_like(p).share_memory_() for p in self.params]

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor], lr: float) -> None:
        for p, g, sq in zip(self.params, grads, self.square_avg, strict=True):
            sq.mul_(self.alpha).addcmul_(g, g, value=1 - self.alpha)
            p.addcdiv_(g, sq.add(self.eps).sqrt_(), value=-lr)

    def state_dict(self) -> dict:
        return {"square_avg": [t.clone() for t in self.square_avg]}

    @torch.no_grad()
    def load_state_dict(self, state: dict) -> None:
        for t, saved in zip(self.square_avg, state["square_avg"], strict=True):
            t.copy_(saved)


class SharedAdam:
    """Adam with shared first and second moments and a shared step count (bias correction)."""

    def __init__(self, params, betas: tuple[float, float], eps: float):
        self.params = list(params)
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.exp_avg = [torch.zeros_like(p).share_memory_() for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p).share_memory_() for p in self.params]
        self.steps = torch.zeros(1, dtype=torch.float64).share_memory_()

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor], lr: float) -> None:
        self.steps += 1
        t = float(self.steps)
        scale = lr * math.sqrt(1 - self.beta2 ** t) / (1 - self.beta1 ** t)
        for p, g, m, v in zip(self.params, grads, self.exp_avg, self.exp_avg_sq, strict=True):
            m.mul_(self.beta1).add_(g, alpha=1 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
            p.addcdiv_(m, v.sqrt().add_(self.eps), value=-scale)

    def state_dict(self) -> dict:
        return {"exp_avg": [t.clone() for t in self.exp_avg], "exp_avg_sq": [t.clone() for t in self.exp_avg_sq],
                "steps": self.steps.clone()}

    @torch.no_grad()
    def load_state_dict(self, state: dict) -> None:
        for mine, saved in ((self.exp_avg, state["exp_avg"]), (self.exp_avg_sq, state["exp_avg_sq"])):
            for t, s in zip(mine, saved, strict=True):
                t.copy_(s)
        self.steps.copy_(state["steps"])


@dataclass
class SharedState:
    """Everything the processes share; built once in the parent before spawning (see the module doc)."""
    model: nn.Module
    target: nn.Module | None
    optimizer: SharedRMSprop | SharedAdam
    frames: object        # multiprocessing Value('q'), with its lock
    target_epoch: object  # multiprocessing Value('q'): index of the last target_update interval copied
    stop: object          # multiprocessing Event
    workers_done: object  # multiprocessing Event


def build_shared(ctx, model: nn.Module, target: nn.Module | None, optimizer_name: str, *, rms_alpha: float,
                 rms_eps: float, adam_betas, adam_eps: float) -> SharedState:
    """Move the networks into shared memory and allocate the optimizer's shared statistics."""
    model.share_memory()
    if target is not None:
        target.load_state_dict(model.state_dict())
        target.share_memory()
        target.requires_grad_(False)
    if optimizer_name == "adam":
        opt = SharedAdam(model.parameters(), tuple(adam_betas), adam_eps)
    else:
        opt = SharedRMSprop(model.parameters(), rms_alpha, rms_eps)
    return SharedState(model, target, opt, ctx.Value("q", 0), ctx.Value("q", 0), ctx.Event(), ctx.Event())


@torch.no_grad()
def sync_local(local: nn.Module, shared_model: nn.Module) -> None:
    """Refresh a worker's local copy in place (no state-dict building on the hot path)."""
    for lp, sp in zip(local.parameters(), shared_model.parameters(), strict=True):
        lp.copy_(sp)


def push_gradients(local: nn.Module, shared: SharedState, lr: float, grad_clip: float) -> float:
    """Clip the local gradients and apply them to the shared parameters; return the pre-clip norm."""
    params = [p for p in local.parameters()]
    norm = torch.nn.utils.clip_grad_norm_(params, grad_clip) if grad_clip > 0 else torch.tensor(0.0)
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    shared.optimizer.step(grads, lr)
    return float(norm)


def add_frames(shared: SharedState, n: int, target_update: int) -> tuple[int, bool]:
    """Count `n` new frames; copy the target network if this increment crossed an interval boundary.

    Returns (global frames after the increment, whether this call made the copy).
    """
    with shared.frames.get_lock():
        shared.frames.value += n
        frames = shared.frames.value
        copied = False
        if shared.target is not None and frames // target_update > shared.target_epoch.value:
            shared.target_epoch.value += 1  # one copy per interval, even if an increment spans two
            with torch.no_grad():
                for tp, p in zip(shared.target.parameters(), shared.model.parameters(), strict=True):
                    tp.copy_(p)
            copied = True
    return frames, copied
