"""One DQN actor-learner with its own replay memory (asynchronous DQN; standard DQN with one worker).

Each step: act epsilon-greedily with the shared weights themselves (a forward reads them lock-free; no copy),
store the transition in this process's memory; every --train-every steps once this worker's own memory holds
its share of --learning-starts (so a resumed or restarted worker, whose memory starts empty, refills it
first): copy the shared weights, compute the loss of one minibatch on the local copy and push its gradient
through the shared optimizer (the Hogwild contract of shared.py, as the other algorithms). The memory never
leaves this process.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from hogwild_dqn.acting import act_many
from hogwild_dqn.algorithms.dqn import Batch
from hogwild_dqn.networks import network_for
from hogwild_dqn.preflight import warm
from hogwild_dqn.replay_memory import NStep, ReplayMemory
from hogwild_dqn.shared import sync_local
from hogwild_dqn.workers.actor_learner import ActorLearner


class Learner:
    """The local network and what one minibatch update needs."""

    def __init__(self, worker: ActorLearner, loss: Callable):
        """`loss`: algorithms.dqn.dqn_loss's signature."""
        self.w, self.cfg = worker, worker.cfg
        self.local = network_for(worker.cfg, worker.run.spec)
        self.params, self.shared_params = list(self.local.parameters()), list(worker.shared.model.parameters())
        self.loss_fn = loss

    def act(self, obs, eps) -> int:
        """Epsilon-greedy on the shared network's Q-values: the freshest weights, read in place."""
        obs = torch.as_tensor(np.asarray(obs)).unsqueeze(0)
        return int(act_many(self.w.shared.model, obs, eps, False, self.w.rng)[0])

    def update(self, memory: ReplayMemory) -> dict:
        """One minibatch: its loss on the freshly synced local copy, its gradient into the shared model."""
        cfg = self.cfg
        sync_local(self.params, self.shared_params)
        obs, actions, returns, next_obs, terminated, discounts = (
            memory.sample(cfg.batch_size, self.w.rng) if cfg.replay else memory.latest(cfg.batch_size))
        q = self.local(obs)
        with torch.no_grad():
            bootstrap_net = self.w.shared.target if cfg.target else self.local
            next_q = bootstrap_net(next_obs)
            next_q_online = self.local(next_obs) if cfg.double else None
        loss, info = self.loss_fn(q, next_q, next_q_online, Batch(actions, returns, terminated, discounts))
        info["losses/grad_norm"] = self.w.apply(loss, self.params)
        return info


class Replay:
    """The DQN loop body: one env step into this worker's memory, then (every --train-every steps, once the
    memory is warm) one minibatch update."""

    def __init__(self, worker: ActorLearner, loss: Callable):
        self.w, cfg, spec = worker, worker.cfg, worker.run.spec
        self.learner = Learner(worker, loss)
        self.memory = ReplayMemory(cfg.replay_size, spec.obs_shape, spec.is_atari)
        self.nstep = NStep(cfg.n_step, cfg.gamma)
        (self.env,) = worker.envs
        (self.obs,) = worker.first_observations()
        self.refs = self.memory.add_first(self.obs)
        self.steps = 0

    def step(self) -> None:
        w, memory, cfg = self.w, self.memory, self.w.cfg
        eps = w.epsilon()
        action = self.learner.act(self.obs, eps)
        self.obs, reward, term, trunc, _ = w.step_game(0, action)
        next_refs = memory.add_next(self.refs, self.obs)
        for transition in self.nstep.push(self.refs, action, float(reward), next_refs, bool(term), bool(trunc)):
            memory.add(*transition)
        if term or trunc:
            self.obs, _ = self.env.reset()
            self.refs = memory.add_first(self.obs)
        else:
            self.refs = next_refs
        self.steps += 1
        w.count(w.run.spec.frames_per_step)
        if self.steps % cfg.train_every or len(memory) < cfg.batch_size or \
                not warm(len(memory), cfg, w.run.threads, w.run.spec.frames_per_step):
            return
        w.logged(self.learner.update(memory), eps, lambda: {"charts/replay_size": len(memory)})
