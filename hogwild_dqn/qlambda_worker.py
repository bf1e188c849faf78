"""Asynchronous Q(lambda)'s loop body (--algo pqn): each worker plays a rollout of --t-max steps in each of its
games, epsilon-greedy on the Q-values of the weights it synced (each game with its own annealed epsilon); computes
the rollout's Q(lambda) targets backwards from the weights synced after it (max Q where the rollout is cut or a
time limit truncates a game; nothing after a terminal); then makes --epochs passes of --minibatches shuffled
minibatches over it, each minibatch's gradient into the shared model through the shared optimizer (shared.py), as
PPO's do. No replay memory and no target network: PQN (Gallici et al. 2024) with its parallel games spread over
lock-free workers."""

from __future__ import annotations

import time

import torch

from hogwild_dqn import metrics
from hogwild_dqn.acting import act_many
from hogwild_dqn.actor_learner import ActorLearner
from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.algorithms.returns import q_lambda_targets
from hogwild_dqn.rollout import Rollout
from hogwild_dqn.rundir import Run
from hogwild_dqn.shared import SharedState

CHUNK = 256  # rows a forward of the targets takes at once


class QLambda:
    """One worker's rollout (rollout.py) and its loop body."""

    def __init__(self, worker: ActorLearner):
        self.w = worker
        self.loss_fn = ALGORITHMS[worker.cfg.algo].loss
        self.local, self.sync = worker.local_copy()
        self.params = list(self.local.parameters())
        self.rollout = Rollout(worker)
        self.learn_seconds = 0.0

    def step(self) -> None:
        """One rollout, its targets, its epochs; then the frames are counted."""
        w, ro = self.w, self.rollout
        self.sync()
        eps = w.epsilon()
        ro.play(lambda t, obs: act_many(self.local, obs, eps, False, w.rng))
        w.observed(ro.obs.flatten(0, 1))  # --obs-normalize: acted with the statistics as synced
        t0 = time.perf_counter()
        self.learn(self.targets(), eps)
        self.learn_seconds = time.perf_counter() - t0
        w.count(ro.frames())

    @torch.no_grad()
    def targets(self) -> torch.Tensor:
        """The rollout's Q(lambda) targets from the weights synced now; the rollout's inputs are prepared on the
        way (Rollout.prepare), once for the targets and every minibatch."""
        ro, cfg = self.rollout, self.w.cfg
        self.sync()
        inputs = ro.prepare(self.local)
        games, steps = ro.rewards.shape
        best = torch.cat([self.local(inputs[s:s + CHUNK], prepared=True).max(-1).values
                          for s in range(0, len(inputs), CHUNK)]).view(games, steps)
        next_values = torch.empty(games, steps)
        next_values[:, :-1] = best[:, 1:]  # after a terminal it is the next game's, and unused
        next_values[:, -1] = self.local(ro.current).max(-1).values
        if ro.cuts:  # a time limit cut the game: its last observation is the bootstrap, not the next game's first
            cut_steps, cut_games, last = zip(*ro.cuts, strict=True)
            next_values[list(cut_games), list(cut_steps)] = self.local(torch.stack(last)).max(-1).values
        return q_lambda_targets(ro.rewards, next_values, ro.terminated, ro.truncated, cfg.gamma, cfg.q_lambda)

    def learn(self, targets: torch.Tensor, eps) -> None:
        """--epochs passes over the rollout in --minibatches shuffled minibatches, each: sync, its loss on the
        local copy, its gradient into the shared model."""
        w, cfg, ro = self.w, self.w.cfg, self.rollout
        actions, targets = ro.actions.flatten(0, 1), targets.flatten()
        for rows in ro.minibatches(cfg.epochs, cfg.minibatches):
            inputs = ro.minibatch_inputs(rows)
            self.sync()
            loss, info = self.loss_fn(self.local(inputs, prepared=True), actions[rows], targets[rows])
            info["losses/grad_norm"] = w.apply(loss, self.params)
            w.logged(info, eps, self.phases)

    def phases(self) -> dict:
        """The last rollout's seconds in each phase (perf/)."""
        seconds = {**self.rollout.seconds, "learn": self.learn_seconds}
        return {metrics.PHASE_SECONDS.format(phase=k): v for k, v in seconds.items()}


def run_qlambda_worker(rank: int, restart: int, run: Run, shared: SharedState) -> None:
    """The Q(lambda) worker; runs inline too (tests, debuggers)."""
    worker = ActorLearner(rank, restart, run, shared, run.cfg.envs_per_worker)
    worker.loop(QLambda(worker).step)
