"""The rollout family's loop bodies, PPO and asynchronous Q(lambda) (pqn): each worker plays a rollout of --t-max
steps in each of its --envs-per-worker games (one row a game, one column a step) with the weights it synced, turns
it into its algorithm's targets, then makes --epochs passes of --minibatches shuffled minibatches over it. Before
each minibatch the local copy syncs from the shared weights; each minibatch's gradient goes through the shared
optimizer (the Hogwild contract of shared.py), so the workers' updates interleave lock-free, with no central
learner.

PPO: GAE advantages from the values recorded when acting; the ratio is taken against the log-probabilities
recorded when acting, so the clip also bounds what the other workers' updates moved the policy. The lag (updates
by all workers since the acting weights) is logged.

Q(lambda) (PQN, Gallici et al. 2024): epsilon-greedy acting, each game with its own annealed epsilon; the targets
computed backwards from the weights synced after the rollout (max Q where the rollout is cut or a time limit
truncates a game; nothing after a terminal). No replay memory and no target network."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np
import torch

from hogwild_dqn import metrics
from hogwild_dqn.acting import act_many
from hogwild_dqn.algorithms.ppo import Minibatch
from hogwild_dqn.algorithms.returns import gae, q_lambda_targets
from hogwild_dqn.distributions import log_prob_entropy, sample
from hogwild_dqn.normalizers import value_norm
from hogwild_dqn.shared import STOP
from hogwild_dqn.workers.actor_learner import ActorLearner


class Rollout:
    """The buffers of one worker's rollouts, kept from one rollout to the next."""

    def __init__(self, worker: ActorLearner):
        self.w, cfg, spec = worker, worker.cfg, worker.run.spec
        E, T = cfg.envs_per_worker, cfg.t_max
        obs_dtype = torch.uint8 if spec.is_atari else torch.float32
        self.obs = torch.zeros((E, T, *spec.obs_shape), dtype=obs_dtype)
        self.actions = torch.zeros((E, T, spec.n_actions)) if spec.continuous else torch.zeros((E, T), dtype=torch.long)
        self.rewards = torch.zeros(E, T)
        self.terminated, self.truncated = torch.zeros(E, T, dtype=torch.bool), torch.zeros(E, T, dtype=torch.bool)
        self.current = torch.zeros((E, *spec.obs_shape), dtype=obs_dtype)  # each game's observation now
        for k, obs in enumerate(worker.first_observations()):
            self.current[k] = torch.as_tensor(obs)
        self.cuts: list[tuple[int, int, torch.Tensor]] = []  # (step, game, last observation) of each time-limit cut
        self.seconds = {"env": 0.0, "act": 0.0}
        self.inputs = self.batch = None  # the rollout's inputs as the first layer reads them, a minibatch's

    def play(self, act: Callable[[int, torch.Tensor], np.ndarray]) -> None:
        """--t-max steps in every game; `act(t, observations)` chooses each game's action at step t (and keeps what
        its algorithm records of it). A game that ends is reset and goes on within the rollout; at a time-limit
        truncation the cut trajectory's last observation, the state to bootstrap from, is kept in `cuts`."""
        w, T = self.w, self.rewards.shape[1]
        act_s = env_s = 0.0
        self.cuts = []
        for t in range(T):
            t0 = time.perf_counter()
            self.obs[:, t] = self.current
            chosen = act(t, self.current)
            self.actions[:, t] = torch.as_tensor(chosen, dtype=self.actions.dtype)
            t1 = time.perf_counter()
            for k, env in enumerate(w.envs):
                obs, r, term, trunc, _ = w.step_game(k, chosen[k])
                self.rewards[k, t], self.terminated[k, t], self.truncated[k, t] = float(r), term, trunc
                if trunc and not term:
                    self.cuts.append((t, k, torch.as_tensor(obs)))
                if term or trunc:
                    obs, _ = env.reset()  # a lost life (training): the same game goes on
                self.current[k] = torch.as_tensor(obs)
            act_s, env_s = act_s + t1 - t0, env_s + time.perf_counter() - t1
        self.seconds["act"], self.seconds["env"] = act_s, env_s

    def frames(self) -> int:
        """The frames a rollout plays."""
        return self.rewards.numel() * self.w.run.spec.frames_per_step

    def prepare(self, net: torch.nn.Module) -> torch.Tensor:
        """The rollout's observations as `net`'s first layer reads them (normalized, channels-last:
        networks.AtariTorso.inputs), computed once for all epochs rather than in every minibatch's forward, in
        chunks that stay in the cache, into a buffer kept from one rollout to the next."""
        obs = self.obs.flatten(0, 1)
        with torch.no_grad():
            for start in range(0, len(obs), 64):
                x = net.inputs(obs[start:start + 64])
                if self.inputs is None:
                    layout = torch.channels_last if x.dim() == 4 else torch.contiguous_format
                    self.inputs = torch.empty((len(obs), *x.shape[1:]), memory_format=layout)
                    self.batch = torch.empty_like(_in_memory_order(self.inputs))
                self.inputs[start:start + len(x)] = x
        return self.inputs

    def minibatch_inputs(self, rows: torch.Tensor) -> torch.Tensor:
        """The prepared inputs of `rows`, gathered row by row in memory order into a buffer kept for every
        minibatch (indexing the channels-last tensor itself took torch's strided path, ~10x slower)."""
        out = self.batch[:len(rows)]
        torch.index_select(_in_memory_order(self.inputs), 0, rows, out=out)
        return out.permute(0, 3, 1, 2) if self.inputs.dim() == 4 else out

    def minibatches(self, epochs: int, count: int) -> Iterator[torch.Tensor]:
        """The rows of `count` shuffled minibatches, `epochs` times over the rollout; none once the run is to stop
        (the rest of the epochs would delay its end by seconds)."""
        n = self.rewards.numel()
        for _ in range(epochs):
            for rows in np.array_split(self.w.rng.permutation(n), count):
                if self.w.shared.is_set(STOP):
                    return
                yield torch.from_numpy(rows)


def _in_memory_order(x: torch.Tensor) -> torch.Tensor:
    """A channels-last batch as the (rows, H, W, C) view its memory holds; other tensors as they are."""
    return x.permute(0, 2, 3, 1) if x.dim() == 4 else x


class PPO:
    """One worker's rollout, what PPO records of it, and its loop body."""

    def __init__(self, worker: ActorLearner, loss: Callable):
        """`loss`: algorithms.ppo.ppo_loss's signature."""
        self.w, cfg = worker, worker.cfg
        self.loss_fn = loss
        self.local, self.sync = worker.local_copy()
        self.params = list(self.local.parameters())
        self.value_norm = value_norm(self.local)  # --value-normalize: as synced when acting
        self.shared_value_norm = value_norm(worker.shared.model)  # all workers' returns feed it
        self.rollout = Rollout(worker)
        E, T = cfg.envs_per_worker, cfg.t_max
        self.log_probs, self.values, self.next_values = (torch.zeros(E, T) for _ in range(3))
        self.learn_seconds = 0.0

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

    def learn(self, advantages: torch.Tensor, returns: torch.Tensor, version: int) -> None:
        """--epochs passes over the rollout in --minibatches shuffled minibatches, each: sync, its loss on the
        local copy, its gradient into the shared model. `returns` are the value's targets, on the head's scale
        (standardized with --value-normalize), as are the behaviour values the value clip starts from."""
        w, cfg, ro = self.w, self.w.cfg, self.rollout
        self.sync()  # its statistics have this rollout's frames in, as every minibatch's sync has them
        ro.prepare(self.local)
        flat = Minibatch(ro.actions.flatten(0, 1), self.log_probs.flatten(), self.values.flatten(),
                         advantages.flatten(), returns.flatten())
        for rows in ro.minibatches(cfg.epochs, cfg.minibatches):
            batch = flat.rows(rows)
            inputs = ro.minibatch_inputs(rows)
            self.sync()
            out = self.local.from_inputs(inputs)
            loss, info = self.loss_fn(out, batch, clip=cfg.ppo_clip, value_coef=cfg.value_coef,
                                      entropy_beta=cfg.entropy_beta, clip_value=cfg.value_clip)
            info[metrics.POLICY_LAG] = int(w.shared.worker_updates.sum()) - version
            info["losses/grad_norm"] = w.apply(loss, self.params)
            w.logged(info, 0.0, self.phases)

    def phases(self) -> dict:
        """The last rollout's seconds in each phase (perf/)."""
        seconds = {**self.rollout.seconds, "learn": self.learn_seconds}
        return {metrics.PHASE_SECONDS.format(phase=k): v for k, v in seconds.items()}


CHUNK = 256  # rows a forward of the targets takes at once


class QLambda:
    """One worker's rollout and its loop body."""

    def __init__(self, worker: ActorLearner, loss: Callable):
        """`loss`: algorithms.pqn.pqn_loss's signature."""
        self.w = worker
        self.loss_fn = loss
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
        best = torch.cat([self.local.from_inputs(inputs[s:s + CHUNK]).max(-1).values
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
            loss, info = self.loss_fn(self.local.from_inputs(inputs), actions[rows], targets[rows])
            info["losses/grad_norm"] = w.apply(loss, self.params)
            w.logged(info, eps, self.phases)

    def phases(self) -> dict:
        """The last rollout's seconds in each phase (perf/)."""
        seconds = {**self.rollout.seconds, "learn": self.learn_seconds}
        return {metrics.PHASE_SECONDS.format(phase=k): v for k, v in seconds.items()}
