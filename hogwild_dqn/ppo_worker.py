"""PPO's loop body, asynchronous: each worker plays a rollout of --t-max steps in each of its games with the
weights it synced, computes GAE advantages from the values it recorded, then makes --ppo-epochs passes of
--ppo-minibatches minibatches over it. Before each minibatch the local copy syncs from the shared weights;
each minibatch's gradient goes through the shared optimizer (the Hogwild contract of shared.py), so the
workers' updates interleave lock-free, with no central learner. The ratio is taken against the
log-probabilities recorded when acting, so the clip also bounds what the other workers' updates moved the
policy; with --ppo-decoupled it is taken against the weights synced as the epochs start (algorithms/ppo.py).
The lag (updates by all workers since the acting weights) is logged."""

from __future__ import annotations

import time

import numpy as np
import torch

from hogwild_dqn import metrics
from hogwild_dqn.actor_learner import ActorLearner
from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.algorithms.ppo import Minibatch
from hogwild_dqn.algorithms.returns import gae
from hogwild_dqn.distributions import log_prob_entropy, sample
from hogwild_dqn.normalizers import value_norm
from hogwild_dqn.precision import learner_bf16
from hogwild_dqn.rundir import Run
from hogwild_dqn.shared import STOP, SharedState


class PPO:
    """One worker's rollout buffers (one row per game, one column per step) and its loop body."""

    def __init__(self, worker: ActorLearner):
        self.w, cfg, spec = worker, worker.cfg, worker.run.spec
        self.loss_fn = ALGORITHMS[cfg.algo].loss
        self.local, self.sync = worker.local_copy()
        self.params = list(self.local.parameters())
        self.value_norm = value_norm(self.local)  # --value-normalize: as synced when acting
        self.shared_value_norm = value_norm(worker.shared.model)  # all workers' returns feed it
        E, T = cfg.envs_per_worker, cfg.t_max
        obs_dtype = torch.uint8 if spec.is_atari else torch.float32
        self.obs = torch.zeros((E, T, *spec.obs_shape), dtype=obs_dtype)
        self.actions = torch.zeros((E, T, spec.n_actions)) if spec.continuous else torch.zeros((E, T), dtype=torch.long)
        self.log_probs, self.values, self.next_values, self.rewards = (torch.zeros(E, T) for _ in range(4))
        self.terminated, self.truncated = torch.zeros(E, T, dtype=torch.bool), torch.zeros(E, T, dtype=torch.bool)
        self.current = torch.zeros((E, *spec.obs_shape), dtype=obs_dtype)  # each game's observation now
        for k, obs in enumerate(worker.first_observations()):
            self.current[k] = torch.as_tensor(obs)
        self.seconds = {"env": 0.0, "act": 0.0, "learn": 0.0}
        self.bf16 = learner_bf16(cfg.learner_precision, spec.is_atari)
        self.inputs = self.batch = None  # the rollout's inputs as the first layer reads them, a minibatch's
        self.proximal = None  # --ppo-decoupled: the rollout's log-probabilities under the epochs' first weights

    def step(self) -> None:
        """One rollout, its advantages, its epochs; then the frames are counted and metrics logged."""
        w = self.w
        self.sync()
        version = int(w.shared.worker_updates.sum())  # the acting weights' place among all workers' updates
        self.play()
        w.observed(self.obs.flatten(0, 1))  # acted with the statistics as synced; the next rollout has these
        t0 = time.perf_counter()
        values, next_values = self.values, self.next_values
        if self.value_norm is not None:  # the head's outputs are standardized returns: back to returns
            values, next_values = self.value_norm.denormalize(values), self.value_norm.denormalize(next_values)
        advantages = gae(self.rewards, values, next_values, self.terminated, self.truncated,
                         w.cfg.gamma, w.cfg.gae_lambda)
        returns = advantages + values
        if self.shared_value_norm is not None:  # the targets on the statistics with this rollout's returns in
            self.shared_value_norm.update(returns.flatten())
            returns = self.shared_value_norm(returns)
        self.learn(advantages, returns, version)
        self.seconds["learn"] = time.perf_counter() - t0
        w.count(self.rewards.numel() * w.run.spec.frames_per_step)

    @torch.no_grad()
    def play(self) -> None:
        """--t-max steps in every game, with the synced weights: each step's observation, action, its
        log-probability and value, reward, ends, and V of the state it led to. A game that ends is reset and
        goes on within the rollout; at a truncation V of its last observation is the bootstrap."""
        w, T = self.w, self.rewards.shape[1]
        act_s = env_s = 0.0
        cuts = []  # (step, game, last observation) of each game a time limit cut
        for t in range(T):
            t0 = time.perf_counter()
            self.obs[:, t] = self.current
            policy, self.values[:, t] = self.local(self.current)
            chosen = sample(policy, w.rng)
            self.actions[:, t] = torch.as_tensor(chosen, dtype=self.actions.dtype)
            self.log_probs[:, t] = log_prob_entropy(policy, self.actions[:, t])[0]
            t1 = time.perf_counter()
            for k, env in enumerate(w.envs):
                obs, r, term, trunc, _ = w.step_game(k, chosen[k])
                self.rewards[k, t], self.terminated[k, t], self.truncated[k, t] = float(r), term, trunc
                if trunc and not term:
                    cuts.append((t, k, torch.as_tensor(obs)))
                if term or trunc:
                    obs, _ = env.reset()  # a lost life (training): the same game goes on
                self.current[k] = torch.as_tensor(obs)
            act_s, env_s = act_s + t1 - t0, env_s + time.perf_counter() - t1
        t0 = time.perf_counter()
        self.next_values[:, :-1] = self.values[:, 1:]  # after a terminal it is the next game's, and unused
        self.next_values[:, -1] = self.local(self.current)[1]
        if cuts:
            steps, games, last = zip(*cuts, strict=True)
            self.next_values[list(games), list(steps)] = self.local(torch.stack(last))[1]
        self.seconds["act"], self.seconds["env"] = act_s + time.perf_counter() - t0, env_s

    def prepare(self) -> torch.Tensor:
        """The rollout's observations as the torso's first layer reads them (normalized, channels-last; bf16 and
        in blocks with --learner-precision's bf16: networks.AtariTorso.inputs), computed once for all epochs
        rather than in every minibatch's forward, in chunks that stay in the cache, into a buffer kept from one
        rollout to the next. The local copy is synced first: its statistics have this rollout's frames in, as
        every minibatch's sync had them."""
        self.sync()
        obs = self.obs.flatten(0, 1)
        with torch.no_grad():
            for start in range(0, len(obs), 64):
                x = self.local.inputs(obs[start:start + 64], blocks=self.bf16)
                if self.inputs is None:
                    layout = torch.channels_last if x.dim() == 4 else torch.contiguous_format
                    dtype = torch.bfloat16 if self.bf16 else torch.float32
                    self.inputs = torch.empty((len(obs), *x.shape[1:]), dtype=dtype, memory_format=layout)
                    self.batch = torch.empty_like(_in_memory_order(self.inputs))
                self.inputs[start:start + len(x)] = x
            if self.w.cfg.ppo_decoupled:  # the weights just synced are the proximal ones
                actions = self.actions.flatten(0, 1)
                self.proximal = torch.cat([log_prob_entropy(self.local(self.inputs[s:s + 64], prepared=True,
                                                                       bf16=self.bf16)[0], actions[s:s + 64])[0]
                                           for s in range(0, len(obs), 64)])
        return self.inputs

    def minibatch_inputs(self, rows: torch.Tensor) -> torch.Tensor:
        """The prepared inputs of `rows`, gathered row by row in memory order into a buffer kept for every
        minibatch (indexing the channels-last tensor itself took torch's strided path, ~10x slower)."""
        out = self.batch[:len(rows)]
        torch.index_select(_in_memory_order(self.inputs), 0, rows, out=out)
        return out.permute(0, 3, 1, 2) if self.inputs.dim() == 4 else out

    def learn(self, advantages: torch.Tensor, returns: torch.Tensor, version: int) -> None:
        """--ppo-epochs passes over the rollout in --ppo-minibatches shuffled minibatches, each: sync, its loss
        on the local copy, its gradient into the shared model. `returns` are the value's targets, on the head's
        scale (standardized with --value-normalize), as are the behaviour values the value clip starts from."""
        w, cfg = self.w, self.w.cfg
        n = self.rewards.numel()
        self.prepare()
        flat = Minibatch(self.actions.flatten(0, 1), self.log_probs.flatten(), self.values.flatten(),
                         advantages.flatten(), returns.flatten(), self.proximal)
        for _ in range(cfg.ppo_epochs):
            for rows in np.array_split(w.rng.permutation(n), cfg.ppo_minibatches):
                if w.shared.is_set(STOP):  # the rest of the epochs would delay the run's end by seconds
                    return
                rows = torch.from_numpy(rows)
                batch = flat.rows(rows)
                inputs = self.minibatch_inputs(rows)
                self.sync()
                out = self.local(inputs, prepared=True, bf16=self.bf16)
                loss, info = self.loss_fn(out, batch, clip=cfg.ppo_clip, value_coef=cfg.value_coef,
                                          entropy_beta=cfg.entropy_beta, clip_value=cfg.value_clip)
                info[metrics.POLICY_LAG] = int(w.shared.worker_updates.sum()) - version
                info["losses/grad_norm"] = w.apply(loss, self.params)
                w.logged(info, 0.0, self.phases)

    def phases(self) -> dict:
        """The last rollout's seconds in each phase (perf/)."""
        return {metrics.PHASE_SECONDS.format(phase=k): v for k, v in self.seconds.items()}


def _in_memory_order(x: torch.Tensor) -> torch.Tensor:
    """A channels-last batch as the (rows, H, W, C) view its memory holds; other tensors as they are."""
    return x.permute(0, 2, 3, 1) if x.dim() == 4 else x


def run_ppo_worker(rank: int, restart: int, run: Run, shared: SharedState) -> None:
    """The PPO worker; runs inline too (tests, debuggers)."""
    worker = ActorLearner(rank, restart, run, shared, run.cfg.envs_per_worker)
    worker.loop(PPO(worker).step)
