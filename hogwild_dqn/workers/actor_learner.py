"""What every actor-learner process has, whatever its algorithm, written once: its random streams and
exploration, its games, its learning-rate schedule, the one gradient step into the shared model, the checks that
end its loop, and its logging; and what the loops share in collecting experience: their games' first
observations, one step of a game (its score logged when it ends), the shared observation statistics fed.
segments.py, rollouts.py and replay.py each add their family's loop body
(`step`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from hogwild_dqn import metrics
from hogwild_dqn.envs import make_env
from hogwild_dqn.faults import NonFinite, runner_alive
from hogwild_dqn.networks import network_for
from hogwild_dqn.normalizers import obs_norm
from hogwild_dqn.rundir import Run
from hogwild_dqn.schedules import draw_final_epsilon, epsilon, learning_rate
from hogwild_dqn.seeding import worker_streams
from hogwild_dqn.shared import (
    LEARNING,
    PLAYING,
    STOP,
    STOPPING,
    Heartbeat,
    SharedState,
    add_frames,
    claim_exploration,
    maybe_sync_target,
    push_gradients,
    sync_local,
)


class ActorLearner:
    """One worker process's set-up and the duties around its algorithm's loop body."""

    def __init__(self, rank: int, restart: int, run: Run, shared: SharedState, games: int):
        cfg = self.cfg = run.cfg
        self.rank, self.run, self.shared = rank, run, shared
        self.beat = Heartbeat(shared, rank)  # every step of a game and every update marks progress
        # every worker, restart, resumed session and game has a random stream of its own (seeding.py)
        self.rng, seed, env_seeds = worker_streams(cfg.seed, rank, restart, run.prior["frames"], games)
        torch.manual_seed(seed)
        self.final_eps = claim_exploration(  # a game's final epsilon outlives restarts and resumes
            shared, rank, seed, lambda: draw_final_epsilon(self.rng, cfg.eps_finals, cfg.eps_probs, games))
        self.lr_frames, self.lr0 = run.prior.get("lr_start") or (0, cfg.lr)
        self.envs = [make_env(cfg, s, for_eval=False) for s in env_seeds]
        self.writer = metrics.make_writer(run.run_dir, f"worker{rank}")
        self.frames, self.updates, self.sums = shared.frames(), 0, {}
        self.runner_alive = runner_alive()
        self.shared_norm = obs_norm(shared.model)  # --obs-normalize: all workers' observations feed it

    def first_observations(self) -> list[np.ndarray]:
        """Each game's first observation (make_env seeded it: the first game, without a second ROM load)."""
        return [env.reset()[0] for env in self.envs]

    def step_game(self, k: int, action) -> tuple:
        """Game k's step on `action` (an index, or a continuous action's components); a game that ends logs its
        score. Returns gymnasium's (obs, reward, terminated, truncated, info)."""
        self.beat(PLAYING)
        out = self.envs[k].step(action.copy() if self.run.spec.continuous else int(action))
        self.episode(out[4])
        return out

    def observed(self, obs: torch.Tensor) -> None:
        """--obs-normalize: a rollout's observations into the shared statistics, once it has been acted on and
        before it is learnt from (each loop acts and learns with the statistics as synced)."""
        if self.shared_norm is not None:
            self.shared_norm.update(obs)

    def local_copy(self) -> tuple[torch.nn.Module, Callable[[], None]]:
        """A local network of the run, and the sync that refreshes it from the shared model: the weights, and the
        running statistics (buffers: --obs-normalize, --value-normalize) where there are such. Both lists are
        built once here, not at every sync."""
        net = network_for(self.cfg, self.run.spec)
        mine = list(net.parameters()) + list(net.buffers())
        shared = list(self.shared.model.parameters()) + list(self.shared.model.buffers())
        return net, lambda: sync_local(mine, shared)

    def epsilon(self) -> np.ndarray:
        """Each game's exploration epsilon now (annealed over global frames)."""
        return epsilon(self.frames, self.cfg.eps_start, self.final_eps, self.cfg.eps_anneal_frames)

    def learning_rate(self) -> float:
        cfg = self.cfg
        return learning_rate(self.frames, self.lr0, cfg.frames, cfg.lr_anneal, self.lr_frames)

    def apply(self, loss: torch.Tensor, params: list[torch.Tensor]) -> float:
        """The loss's gradient on the local `params` into the shared model (the Hogwild step); its norm."""
        if not math.isfinite(loss.item()):
            raise NonFinite(f"non-finite loss {loss.item()}")
        self.beat(LEARNING)
        for p in params:
            p.grad = None
        loss.backward()
        return push_gradients(params, self.shared, self.rank, self.learning_rate(), self.cfg.grad_clip)

    def count(self, frames: int) -> None:
        """`frames` more frames played; worker 0 also copies the target network when an interval is passed."""
        self.frames = add_frames(self.shared, self.rank, frames)
        self.sync_target(self.frames)

    def sync_target(self, frames: int) -> None:
        """Worker 0 alone copies the target network when `frames` is in an interval not yet copied."""
        if self.rank == 0:
            maybe_sync_target(self.shared, frames, self.cfg.target_update)

    def episode(self, info: dict) -> None:
        """An env step's info: a game that ended logs its score."""
        if "episode" in info:
            metrics.log_episode(self.writer, self.rank, info["episode"], self.frames, self.run.spec.frames_per_step)

    def logged(self, info: dict, eps, extra: Callable[[], dict] | None = None) -> None:
        """One update's metrics (tensors are read only when written): their mean every --log-every updates,
        with the exploration epsilon, worker 0's learning rate and the scalars `extra()` gives then (computed only
        when written)."""
        self.updates += 1
        for key, v in info.items():
            self.sums[key] = self.sums.get(key, 0.0) + v
        if self.updates % self.cfg.log_every:
            return
        rank, frames, w = self.rank, self.frames, self.writer
        for key, v in self.sums.items():
            w.add_scalar(f"{key}/w{rank}", float(v) / self.cfg.log_every, frames)
        w.add_scalar(metrics.EPSILON.format(rank=rank), float(np.mean(eps)), frames)
        for key, v in (extra() if extra else {}).items():
            w.add_scalar(f"{key}/w{rank}", v, frames)
        if rank == 0:
            w.add_scalar(metrics.LEARNING_RATE, self.learning_rate(), frames)
        self.sums = {}

    def running(self) -> bool:
        return not self.shared.is_set(STOP) and self.frames < self.cfg.frames and self.runner_alive()

    def loop(self, step: Callable[[], None]) -> None:
        """Call `step` until the run stops (its frames, the stop flag, the runner gone); then close up. A
        non-finite loss or policy says where it happened: that message is the one line the user reads."""
        try:
            while self.running():
                step()
        except NonFinite as e:
            raise NonFinite(f"{e} at update {self.updates + 1} (global frame {self.frames})") from None
        self.beat(STOPPING)
        self.sync_target(self.shared.frames())  # the others may have crossed an interval since worker 0's last step
        self.writer.close()
        for env in self.envs:
            env.close()
