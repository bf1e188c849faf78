"""One DQN actor-learner with its own replay memory (asynchronous DQN; standard DQN with one worker).

Each step: act epsilon-greedily with the shared weights themselves (a forward reads them lock-free; no copy),
store the transition in this process's memory; every --train-every steps once this worker's own memory holds
its share of --learning-starts (so a resumed or restarted worker, whose memory starts empty, refills it
first): copy the shared weights, compute the loss of one minibatch on the local copy and push its gradient
through the shared optimizer (the Hogwild contract of shared.py, as the other algorithms). The memory never
leaves this process.
"""

from __future__ import annotations

import math
import os

import numpy as np
import torch

from hogwild_dqn import metrics
from hogwild_dqn.acting import act_many
from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.algorithms.dqn import Batch
from hogwild_dqn.envs import make_env
from hogwild_dqn.exploration import draw_final_epsilon, epsilon, learning_rate, worker_streams
from hogwild_dqn.networks import network_for
from hogwild_dqn.replay import NStep, ReplayMemory
from hogwild_dqn.rundir import Run
from hogwild_dqn.shared import (
    STOP,
    NonFinite,
    SharedState,
    add_frames,
    claim_exploration,
    maybe_sync_target,
    push_gradients,
    sync_local,
)


class Learner:
    """The local network and what one minibatch update needs."""

    def __init__(self, run: Run, shared: SharedState, rank: int):
        self.cfg, self.shared, self.rank = run.cfg, shared, rank
        self.local = network_for(run.cfg, run.spec)
        self.params, self.shared_params = list(self.local.parameters()), list(shared.model.parameters())
        self.loss_fn = ALGORITHMS[run.cfg.algo].loss
        self.lr_frames, self.lr0 = run.prior.get("lr_start") or (0, run.cfg.lr)

    def act(self, obs, eps: float, rng: np.random.Generator) -> int:
        """Epsilon-greedy on the shared network's Q-values: the freshest weights, read in place."""
        return int(act_many(self.shared.model, torch.as_tensor(np.asarray(obs)).unsqueeze(0), eps, False, rng)[0])

    def update(self, memory: ReplayMemory, rng: np.random.Generator, frames: int) -> dict:
        """One minibatch: its loss on the freshly synced local copy, its gradient into the shared model."""
        cfg = self.cfg
        sync_local(self.params, self.shared_params)
        obs, actions, returns, next_obs, terminated, discounts = (
            memory.sample(cfg.batch_size, rng) if cfg.replay else memory.latest(cfg.batch_size))
        q = self.local(obs)
        with torch.no_grad():
            bootstrap_net = self.shared.target if cfg.target else self.local
            next_q = bootstrap_net(next_obs)
            next_q_online = self.local(next_obs) if cfg.double else None
        loss, info = self.loss_fn(q, next_q, next_q_online, Batch(actions, returns, terminated, discounts))
        if not math.isfinite(loss.item()):
            raise NonFinite(f"non-finite loss {loss.item()}")
        for p in self.params:
            p.grad = None
        loss.backward()
        lr = learning_rate(frames, self.lr0, cfg.frames, cfg.lr_anneal, self.lr_frames)
        info["losses/grad_norm"] = push_gradients(self.params, self.shared, self.rank, lr, cfg.grad_clip)
        return info


def warm(memory_size: int, cfg, threads: int, frames_per_step: int) -> bool:
    """Whether a worker's own memory holds its share of --learning-starts (frames / threads), so that it may
    learn: counted in its memory, not in global frames, which a resumed or restarted worker passed long ago."""
    return memory_size * frames_per_step * threads >= cfg.learning_starts


def run_replay_worker(rank: int, restart: int, run: Run, shared: SharedState) -> None:
    """The DQN worker loop; runs inline too (tests, debuggers)."""
    cfg, spec = run.cfg, run.spec
    rng, seed, (env_seed,) = worker_streams(cfg.seed, rank, restart, run.prior["frames"], 1)
    torch.manual_seed(seed)
    final_eps = float(claim_exploration(shared, rank, seed,
                                        lambda: draw_final_epsilon(rng, cfg.eps_finals, cfg.eps_probs))[0])
    env = make_env(cfg, env_seed, for_eval=False)
    learner = Learner(run, shared, rank)
    memory = ReplayMemory(cfg.replay_size, spec.obs_shape, spec.is_atari)
    nstep = NStep(cfg.n_step, cfg.gamma)
    writer = metrics.make_writer(run.run_dir, f"worker{rank}")
    obs, _ = env.reset()  # make_env seeded it
    refs = memory.add_first(obs)
    frames, steps, updates, sums = shared.frames(), 0, 0, {}
    parent = os.getppid()  # if the runner is killed outright, this changes and the worker stops by itself
    try:
        while not shared.is_set(STOP) and frames < cfg.frames and os.getppid() == parent:
            # --- act and remember
            eps = epsilon(frames, cfg.eps_start, final_eps, cfg.eps_anneal_frames)
            action = learner.act(obs, eps, rng)
            obs, reward, term, trunc, info = env.step(action)
            next_refs = memory.add_next(refs, obs)
            for transition in nstep.push(refs, action, float(reward), next_refs, bool(term), bool(trunc)):
                memory.add(*transition)
            if "episode" in info:
                metrics.log_episode(writer, rank, info["episode"], frames, spec.frames_per_step)
            if term or trunc:
                obs, _ = env.reset()
                refs = memory.add_first(obs)
            else:
                refs = next_refs
            steps += 1
            frames = add_frames(shared, rank, spec.frames_per_step)
            if rank == 0:
                maybe_sync_target(shared, frames, cfg.target_update)

            # --- learn
            if steps % cfg.train_every or len(memory) < cfg.batch_size or \
                    not warm(len(memory), cfg, run.threads, spec.frames_per_step):
                continue
            for key, v in learner.update(memory, rng, frames).items():
                sums[key] = sums.get(key, 0.0) + v
            updates += 1
            if updates % cfg.log_every == 0:
                for key, v in sums.items():
                    writer.add_scalar(f"{key}/w{rank}", v / cfg.log_every, frames)
                writer.add_scalar(metrics.EPSILON.format(rank=rank), eps, frames)
                writer.add_scalar(f"charts/replay_size/w{rank}", len(memory), frames)
                sums = {}
    except NonFinite as e:  # say where: the message is the one line the user reads
        raise NonFinite(f"{e} at update {updates + 1} (global frame {frames})") from None
    writer.close()
    env.close()
