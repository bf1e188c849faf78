"""PPO's loop body, asynchronous: each worker plays a rollout of --t-max steps in each of its games with the
weights it synced, computes GAE advantages from the values it recorded, then makes --epochs passes of
--minibatches minibatches over it. Before each minibatch the local copy syncs from the shared weights;
each minibatch's gradient goes through the shared optimizer (the Hogwild contract of shared.py), so the
workers' updates interleave lock-free, with no central learner. The ratio is taken against the
log-probabilities recorded when acting, so the clip also bounds what the other workers' updates moved the
policy; with --ppo-decoupled it is taken against the weights synced as the epochs start (algorithms/ppo.py).
The lag (updates by all workers since the acting weights) is logged."""

from __future__ import annotations

import time

import torch

from hogwild_dqn import metrics
from hogwild_dqn.actor_learner import ActorLearner
from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.algorithms.ppo import Minibatch
from hogwild_dqn.algorithms.returns import gae
from hogwild_dqn.distributions import log_prob_entropy, sample
from hogwild_dqn.normalizers import value_norm
from hogwild_dqn.precision import learner_bf16
from hogwild_dqn.rollout import Rollout
from hogwild_dqn.rundir import Run
from hogwild_dqn.shared import SharedState


class PPO:
    """One worker's rollout (rollout.py), what PPO records of it, and its loop body."""

    def __init__(self, worker: ActorLearner):
        self.w, cfg = worker, worker.cfg
        self.loss_fn = ALGORITHMS[cfg.algo].loss
        self.local, self.sync = worker.local_copy()
        self.params = list(self.local.parameters())
        self.value_norm = value_norm(self.local)  # --value-normalize: as synced when acting
        self.shared_value_norm = value_norm(worker.shared.model)  # all workers' returns feed it
        self.rollout = Rollout(worker, learner_bf16(cfg.learner_precision, worker.run.spec.is_atari))
        E, T = cfg.envs_per_worker, cfg.t_max
        self.log_probs, self.values, self.next_values = (torch.zeros(E, T) for _ in range(3))
        self.learn_seconds = 0.0
        self.proximal = None  # --ppo-decoupled: the rollout's log-probabilities under the epochs' first weights

    def step(self) -> None:
        """One rollout, its advantages, its epochs; then the frames are counted and metrics logged."""
        w, ro = self.w, self.rollout
        self.sync()
        version = int(w.shared.worker_updates.sum())  # the acting weights' place among all workers' updates
        self.play()
        w.observed(ro.obs.flatten(0, 1))  # acted with the statistics as synced; the next rollout has these
        t0 = time.perf_counter()
        values, next_values = self.values, self.next_values
        if self.value_norm is not None:  # the head's outputs are standardized returns: back to returns
            values, next_values = self.value_norm.denormalize(values), self.value_norm.denormalize(next_values)
        advantages = gae(ro.rewards, values, next_values, ro.terminated, ro.truncated, w.cfg.gamma, w.cfg.gae_lambda)
        returns = advantages + values
        if self.shared_value_norm is not None:  # the targets on the statistics with this rollout's returns in
            self.shared_value_norm.update(returns.flatten())
            returns = self.shared_value_norm(returns)
        self.learn(advantages, returns, version)
        self.learn_seconds = time.perf_counter() - t0
        w.count(ro.frames())

    @torch.no_grad()
    def play(self) -> None:
        """The rollout with the synced weights, with each step's log-probability and value and V of the state it
        led to (at a truncation: of the cut trajectory's last observation, the bootstrap)."""
        w, ro = self.w, self.rollout

        def act(t: int, obs: torch.Tensor):
            policy, self.values[:, t] = self.local(obs)
            chosen = sample(policy, w.rng)
            self.log_probs[:, t] = log_prob_entropy(policy, torch.as_tensor(chosen, dtype=ro.actions.dtype))[0]
            return chosen

        ro.play(act)
        t0 = time.perf_counter()
        self.next_values[:, :-1] = self.values[:, 1:]  # after a terminal it is the next game's, and unused
        self.next_values[:, -1] = self.local(ro.current)[1]
        if ro.cuts:
            steps, games, last = zip(*ro.cuts, strict=True)
            self.next_values[list(games), list(steps)] = self.local(torch.stack(last))[1]
        ro.seconds["act"] += time.perf_counter() - t0

    def prepare(self) -> torch.Tensor:
        """The rollout's inputs (Rollout.prepare), from the local copy synced first: its statistics have this
        rollout's frames in, as every minibatch's sync had them; with --ppo-decoupled, the log-probabilities of
        the weights just synced (the proximal ones)."""
        self.sync()
        ro = self.rollout
        inputs = ro.prepare(self.local)
        if self.w.cfg.ppo_decoupled:
            actions = ro.actions.flatten(0, 1)
            with torch.no_grad():
                self.proximal = torch.cat([log_prob_entropy(self.local(inputs[s:s + 64], prepared=True,
                                                                       bf16=ro.bf16)[0], actions[s:s + 64])[0]
                                           for s in range(0, len(inputs), 64)])
        return inputs

    def learn(self, advantages: torch.Tensor, returns: torch.Tensor, version: int) -> None:
        """--epochs passes over the rollout in --minibatches shuffled minibatches, each: sync, its loss on the
        local copy, its gradient into the shared model. `returns` are the value's targets, on the head's scale
        (standardized with --value-normalize), as are the behaviour values the value clip starts from."""
        w, cfg, ro = self.w, self.w.cfg, self.rollout
        self.prepare()
        flat = Minibatch(ro.actions.flatten(0, 1), self.log_probs.flatten(), self.values.flatten(),
                         advantages.flatten(), returns.flatten(), self.proximal)
        for rows in ro.minibatches(cfg.epochs, cfg.minibatches):
            batch = flat.rows(rows)
            inputs = ro.minibatch_inputs(rows)
            self.sync()
            out = self.local(inputs, prepared=True, bf16=ro.bf16)
            loss, info = self.loss_fn(out, batch, clip=cfg.ppo_clip, value_coef=cfg.value_coef,
                                      entropy_beta=cfg.entropy_beta, clip_value=cfg.value_clip)
            info[metrics.POLICY_LAG] = int(w.shared.worker_updates.sum()) - version
            info["losses/grad_norm"] = w.apply(loss, self.params)
            w.logged(info, 0.0, self.phases)

    def phases(self) -> dict:
        """The last rollout's seconds in each phase (perf/)."""
        seconds = {**self.rollout.seconds, "learn": self.learn_seconds}
        return {metrics.PHASE_SECONDS.format(phase=k): v for k, v in seconds.items()}


def run_ppo_worker(rank: int, restart: int, run: Run, shared: SharedState) -> None:
    """The PPO worker; runs inline too (tests, debuggers)."""
    worker = ActorLearner(rank, restart, run, shared, run.cfg.envs_per_worker)
    worker.loop(PPO(worker).step)
