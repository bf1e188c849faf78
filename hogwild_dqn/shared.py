"""The Hogwild contract, in one place.

What is shared between processes (all in shared memory, handed to children at spawn):
- `model`: the one network every worker learns into. Updated lock-free (Hogwild): workers write their
  optimizer steps concurrently without any lock; torn reads/writes are part of the algorithm's design. Its
  buffers, the running statistics of --obs-normalize and --value-normalize (normalizers.RunningNorm), are
  written the same way: each worker folds its rollout in.
- `target`: the value-based methods' target network (None for A3C). Copied from `model` by worker 0 alone
  when global frames enter a new `target_update` interval (`target_epoch`: the interval last copied); intervals
  the others crossed between worker 0's steps (a late start, a restart) are one copy, and worker 0 catches up
  once more as it stops, so a checkpoint's target is that of its frames. A single writer needs no lock, so no
  interval is copied twice, and a worker killed mid-copy blocks no one.
- `optimizer`: one optimizer whose statistics (RMSProp's g, Adam's moments and step count) live in shared
  memory, allocated eagerly before spawning so every process sees the same tensors. Its step is lock-free;
  Adam's step count is one counter per worker (their sum is t), so no increment is lost.
- `worker_frames`: one frame counter per worker, each written by its worker alone; global frames are their
  sum. They drive the schedules, the target sync, the evaluator and the stopping rule.
- `worker_updates`: one counter per worker of the updates it pushed, written by `push_gradients` for that
  worker alone (read by `make bench`).
- `flags`: STOP (the runner asks every worker to finish its segment and exit) and WORKERS_DONE (every worker
  has exited: the evaluator runs its last evaluation and exits). Polled, never waited on.
- `worker_eps`, `worker_seed`: the final epsilon each game of each worker drew, and each worker's current
  seed (its exploration state), written by the worker, read by checkpoints; a restarted or resumed worker
  keeps its games' epsilons.
- `heartbeats`, `activity`: one slot per child (the workers, then the evaluator), written by that child alone
  (`Heartbeat`) at every step of its work, and by the runner as it starts the child: the time of its last
  progress (time.monotonic, one clock for every process of the machine) and what it was doing. The runner
  kills a child whose mark is older than --hang-seconds: a frozen process answers no signal but SIGKILL.

Nothing here takes a lock: multiprocessing's locks, events and queues deadlock every other process when a
process is killed while holding one, and a killed worker must never hang the run.

How gradients reach the shared parameters: each worker computes gradients on its *local* copy and passes
them explicitly to `optimizer.step(grads, lr)`. Nothing aliases `.grad` between the local and the shared
model, so PyTorch 2.x's `zero_grad()` (which sets grads to None) cannot leave a stale gradient behind.
A non-finite gradient is never applied: `push_gradients` raises NonFinite first, and the process exits with
exits.NONFINITE, which the runner treats as fatal (no restart, no checkpoint over the last good one).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.config import Config
from hogwild_dqn.faults import NonFinite
from hogwild_dqn.networks import network_for


class SharedRMSprop:
    """The paper's shared RMSProp: g = a*g + (1-a)*d^2;  theta -= lr * d / sqrt(g + eps)."""

    def __init__(self, params, alpha: float, eps: float):
        self.params = list(params)
        self.alpha, self.eps = alpha, eps
        self.square_avg = [torch.zeros_like(p).share_memory_() for p in self.params]

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor], lr: float, rank: int = 0) -> None:
        """`rank`: the pushing worker (unused: RMSProp has no step count)."""
        # one fused call per operation over all tensors: the step runs every 5 agent steps, on the hot path
        torch._foreach_mul_(self.square_avg, self.alpha)
        torch._foreach_addcmul_(self.square_avg, grads, grads, value=1 - self.alpha)
        step = torch._foreach_add(self.square_avg, self.eps)
        torch._foreach_rsqrt_(step)  # one pass cheaper than sqrt then divide
        torch._foreach_mul_(step, grads)
        torch._foreach_add_(self.params, step, alpha=-lr)

    def state_dict(self) -> dict:
        return {"square_avg": [t.clone() for t in self.square_avg]}

    @torch.no_grad()
    def load_state_dict(self, state: dict) -> None:
        for t, saved in zip(self.square_avg, state["square_avg"], strict=True):
            t.copy_(saved)


class SharedAdam:
    """torch.optim.Adam (no weight decay, no amsgrad) with shared first and second moments, step for step: the
    bias corrections divide the second moment's root before eps is added, as torch does.

    The step count t is one counter per worker, each written by its worker alone (as worker_frames), and t is
    their sum: no increment is lost to a race. A worker's t counts every update pushed before it, by any
    worker; an update pushed at the same instant by another may be counted or not (Hogwild's one race).
    """

    def __init__(self, params, betas: tuple[float, float], eps: float, workers: int = 1):
        self.params = list(params)
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.exp_avg = [torch.zeros_like(p).share_memory_() for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p).share_memory_() for p in self.params]
        self.steps = torch.zeros(workers, dtype=torch.int64).share_memory_()  # updates pushed by each worker

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor], lr: float, rank: int = 0) -> None:
        self.steps[rank] += 1
        t = int(self.steps.sum())
        correction2 = math.sqrt(1 - self.beta2 ** t)
        # fused calls over all tensors, as in SharedRMSprop: fewer Python-level calls than a per-tensor loop
        torch._foreach_lerp_(self.exp_avg, grads, 1 - self.beta1)
        torch._foreach_mul_(self.exp_avg_sq, self.beta2)
        torch._foreach_addcmul_(self.exp_avg_sq, grads, grads, value=1 - self.beta2)
        denom = torch._foreach_sqrt(self.exp_avg_sq)
        torch._foreach_div_(denom, correction2)
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(self.params, self.exp_avg, denom, value=-lr / (1 - self.beta1 ** t))

    def state_dict(self) -> dict:
        """The moments and the total step count (one number: a resume may have another number of workers)."""
        return {"exp_avg": [t.clone() for t in self.exp_avg], "exp_avg_sq": [t.clone() for t in self.exp_avg_sq],
                "steps": self.steps.sum().reshape(1).to(torch.float64)}

    @torch.no_grad()
    def load_state_dict(self, state: dict) -> None:
        for mine, saved in ((self.exp_avg, state["exp_avg"]), (self.exp_avg_sq, state["exp_avg_sq"])):
            for t, s in zip(mine, saved, strict=True):
                t.copy_(s)
        self.steps.zero_()
        self.steps[0] = int(round(float(torch.as_tensor(state["steps"]).sum())))


class SharedRAdam(SharedAdam):
    """torch.optim.RAdam (Liu et al. 2020; no weight decay) on SharedAdam's shared moments and step count: while
    the second moment rests on few updates (its variance's rectifier rho_t <= 5) the step is momentum alone,
    then Adam's step scaled by the rectification r_t, which grows towards 1: a warm-up without a schedule."""

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor], lr: float, rank: int = 0) -> None:
        self.steps[rank] += 1
        t = int(self.steps.sum())
        beta2_t = self.beta2 ** t
        rho_inf = 2 / (1 - self.beta2) - 1
        rho_t = rho_inf - 2 * t * beta2_t / (1 - beta2_t)
        torch._foreach_lerp_(self.exp_avg, grads, 1 - self.beta1)
        torch._foreach_mul_(self.exp_avg_sq, self.beta2)
        torch._foreach_addcmul_(self.exp_avg_sq, grads, grads, value=1 - self.beta2)
        step_size = lr / (1 - self.beta1 ** t)
        if rho_t <= 5:
            torch._foreach_add_(self.params, self.exp_avg, alpha=-step_size)
            return
        rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
        denom = torch._foreach_sqrt(self.exp_avg_sq)
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(self.params, self.exp_avg, denom, value=-step_size * rect * math.sqrt(1 - beta2_t))


STOP, WORKERS_DONE = 0, 1  # indices into SharedState.flags
# what a child marks itself as doing (SharedState.activity), said when it is found hung
ACTIVITIES = ("starting", "playing", "learning", "evaluating", "waiting for the next evaluation point",
              "writing a checkpoint", "recording a video", "stopping")
STARTING, PLAYING, LEARNING, EVALUATING, WAITING, WRITING, RECORDING, STOPPING = range(len(ACTIVITIES))


@dataclass
class SharedState:
    """Everything the processes share; built once in the parent before spawning (see the module doc)."""
    model: nn.Module
    target: nn.Module | None
    optimizer: SharedRMSprop | SharedAdam | SharedRAdam
    worker_frames: torch.Tensor  # [threads (+1)] int64, each worker's frame count (global frames = sum); on a
                                 # machine of a cluster run the extra last slot holds the other machines' frames
    target_epoch: torch.Tensor   # [1] int64, the target_update interval last copied into the target
    flags: torch.Tensor          # [2] uint8, STOP and WORKERS_DONE
    worker_eps: torch.Tensor     # [threads, games per worker] float64, NaN until the game has drawn its final
                                 # epsilon
    worker_seed: torch.Tensor    # [threads] int64, the seed each worker (re)started with
    worker_updates: torch.Tensor  # [threads] int64, the updates each worker pushed into the shared model
    heartbeats: torch.Tensor     # [threads + 1] float64, time.monotonic() of each child's last progress (the
                                 # workers', then the evaluator's)
    activity: torch.Tensor       # [threads + 1] uint8, what each child was doing then (an index of ACTIVITIES)

    def frames(self) -> int:
        """Global frames, all workers together."""
        return int(self.worker_frames.sum())

    def set(self, flag: int) -> None:
        self.flags[flag] = 1

    def is_set(self, flag: int) -> bool:
        return bool(self.flags[flag])


class Heartbeat:
    """A child's mark of progress in its slot of the shared heartbeats: `beat(activity)` at every step of its
    work. Two numpy stores, a fraction of a microsecond: cheap enough for every step of a game."""

    def __init__(self, shared: SharedState, slot: int):
        self.times, self.doing, self.slot = shared.heartbeats.numpy(), shared.activity.numpy(), slot

    def __call__(self, activity: int) -> None:
        self.times[self.slot] = time.monotonic()
        self.doing[self.slot] = activity


def silence(shared: SharedState, slot: int) -> tuple[float, str]:
    """Seconds since the child in `slot` last marked progress, and what it was doing then."""
    return time.monotonic() - float(shared.heartbeats[slot]), ACTIVITIES[int(shared.activity[slot])]


def mark_start(shared: SharedState, slot: int) -> None:
    """The runner's mark for a child it starts: its start-up counts against --hang-seconds as its work does."""
    shared.heartbeats[slot] = time.monotonic()
    shared.activity[slot] = STARTING


def build_shared(model: nn.Module, target: nn.Module | None, cfg: Config, threads: int,
                 extra_frame_slots: int = 0) -> SharedState:
    """Move the networks into shared memory and allocate the optimizer's statistics (cfg.optimizer and its
    settings) and the counters."""
    model.share_memory()
    if target is not None:
        target.load_state_dict(model.state_dict())
        target.share_memory()
        target.requires_grad_(False)
    if cfg.optimizer in ("adam", "radam"):
        kind = SharedAdam if cfg.optimizer == "adam" else SharedRAdam
        opt = kind(model.parameters(), tuple(cfg.adam_betas), cfg.adam_eps, threads)
    else:
        opt = SharedRMSprop(model.parameters(), cfg.rms_alpha, cfg.rms_eps)
    zeros = lambda n, dtype: torch.zeros(n, dtype=dtype).share_memory_()  # noqa: E731
    return SharedState(model, target, opt, zeros(threads + extra_frame_slots, torch.int64), zeros(1, torch.int64),
                       zeros(2, torch.uint8),
                       torch.full((threads, cfg.envs_per_worker), math.nan, dtype=torch.float64).share_memory_(),
                       zeros(threads, torch.int64), zeros(threads, torch.int64),
                       zeros(threads + 1, torch.float64), zeros(threads + 1, torch.uint8))


@torch.no_grad()
def sync_local(local_params: list[torch.Tensor], shared_params: list[torch.Tensor]) -> None:
    """Copy tensors into tensors in place (a worker's local copy from the shared model, the target from the
    model, a cluster machine's weights from the holder's): never rebind .data, the targets may live in shared
    memory. A worker builds both lists once, not per segment."""
    torch._foreach_copy_(local_params, shared_params)


def push_gradients(params: list[torch.Tensor], shared: SharedState, rank: int, lr: float, grad_clip: float) -> float:
    """Clip the gradients of worker `rank`'s local `params`, apply them to the shared parameters and count the
    update; return the pre-clip norm.

    Raises NonFinite, before touching the shared parameters, if the gradient holds NaN or Inf.
    """
    norm = float(torch.nn.utils.clip_grad_norm_(params, grad_clip if grad_clip > 0 else math.inf))
    if not math.isfinite(norm):
        raise NonFinite(f"non-finite gradient (norm {norm})")
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    shared.optimizer.step(grads, lr, rank)
    shared.worker_updates[rank] += 1
    return norm


def all_finite(tensors) -> bool:
    """True if no tensor holds NaN or Inf."""
    return all(bool(torch.isfinite(t).all()) for t in tensors)


def add_frames(shared: SharedState, rank: int, n: int) -> int:
    """Count `n` new frames of worker `rank` (its own slot: no lock); return the global frames."""
    shared.worker_frames[rank] += n
    return shared.frames()


def target_epoch_due(frames: int, target_update: int, copied: int) -> int | None:
    """The target rule, on one machine and on a cluster's holder: the target network is copied when the global
    `frames` enter a `target_update` interval later than the one `copied` last; return that interval, or None."""
    epoch = frames // target_update
    return epoch if epoch > copied else None


@torch.no_grad()
def maybe_sync_target(shared: SharedState, frames: int, target_update: int) -> bool:
    """Worker 0 only: copy the target network if `frames` is in an interval not yet copied."""
    epoch = None if shared.target is None else target_epoch_due(frames, target_update, int(shared.target_epoch[0]))
    if epoch is None:
        return False
    sync_local([*shared.target.parameters(), *shared.target.buffers()],
               [*shared.model.parameters(), *shared.model.buffers()])  # buffers too: the running statistics
    shared.target_epoch[0] = epoch
    return True


def claim_exploration(shared: SharedState, rank: int, seed: int, draw) -> np.ndarray:
    """The final epsilons of worker `rank`'s games: drawn once with `draw()` (one per game), kept by a restarted
    or resumed worker; its current seed is recorded beside them for checkpoints."""
    if torch.isnan(shared.worker_eps[rank]).any():
        shared.worker_eps[rank] = torch.as_tensor(draw(), dtype=torch.float64)
    shared.worker_seed[rank] = seed
    return shared.worker_eps[rank].numpy().copy()


def new_shared_state(cfg: Config, spec, threads: int, extra_frame_slots: int = 0) -> SharedState:
    """The network (and target network for the Q methods) and the optimizer of cfg, in shared memory."""
    net = lambda: network_for(cfg, spec)  # noqa: E731
    target = net() if ALGORITHMS[cfg.algo].target_network else None
    return build_shared(net(), target, cfg, threads, extra_frame_slots)
