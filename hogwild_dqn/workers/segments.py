"""The segment family's loop body (OnPolicy: one-step Q and SARSA, n-step Q, A3C): sync -> act t_max steps in each of
the worker's games -> one loss over their segments -> push gradients -> count frames. What every worker has besides
is in actor_learner.py."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch

from hogwild_dqn import metrics
from hogwild_dqn.acting import act_many
from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.algorithms.returns import Segment
from hogwild_dqn.distributions import sample
from hogwild_dqn.networks import is_recurrent
from hogwild_dqn.workers.actor_learner import ActorLearner


class GameStates:
    """--net lstm: the recurrent state (h, c) of each of a worker's games, carried from step to step and across
    segments; zeroed when that game ends (terminated or truncated). A lost life that ends the return (Atari,
    training only) keeps it, since the game goes on, as it does in evaluation."""

    def __init__(self, net: torch.nn.Module, games: int):
        self.h, self.c = net.initial_state(games)

    @torch.no_grad()
    def act(self, net: torch.nn.Module, rows: list[int], obs: torch.Tensor, rng: np.random.Generator) -> np.ndarray:
        """Step the games `rows` on their observations `obs`: sample their actions and keep their new states."""
        policy, _, (self.h[rows], self.c[rows]) = net(obs, (self.h[rows], self.c[rows]))
        return sample(policy, rng)

    def start(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The states at a segment's start, for the loss: a copy, so the gradient stops there (truncated BPTT)."""
        return self.h.clone(), self.c.clone()

    def end_game(self, k: int) -> None:
        self.h[k], self.c[k] = 0.0, 0.0


class Rollout(NamedTuple):
    """A worker's segment buffers, one row per game: obs[k, t] is s_t, obs[k, t+1] the state after a_t. Torch
    tensors over numpy arrays: the acting loop writes the arrays, the loss reads the tensors, nothing is copied."""
    obs: torch.Tensor           # (E, T+1, *obs_shape)
    actions: torch.Tensor       # (E, T+1): a_t, and a' after the last step for SARSA; (E, T+1, components) floats
                                # for continuous actions
    rewards: torch.Tensor       # (E, T)
    terminated: torch.Tensor    # (E, T)
    truncated: torch.Tensor     # (E, T)
    state0: tuple | None = None  # --net lstm: each game's (h, c) at the segment's start


def new_rollout(spec, games: int, steps: int) -> Rollout:
    """Zeroed segment buffers for `games` games of `steps` steps."""
    E, T = games, steps
    obs = np.zeros((E, T + 1, *spec.obs_shape), dtype=np.uint8 if spec.is_atari else np.float32)
    actions = np.zeros((E, T + 1, spec.n_actions), np.float32) if spec.continuous else np.zeros((E, T + 1), np.int64)
    return Rollout(*(torch.from_numpy(a) for a in (obs, actions, np.zeros((E, T), np.float32),
                                                   np.zeros((E, T), bool), np.zeros((E, T), bool))))


def segment_loss(local, target, loss_fn, rollout: Rollout, n) -> tuple[torch.Tensor, dict]:
    """The mean over a worker's games of the algorithm's loss (hyperparameters bound) on each game's segment
    (n[k] steps of game k).

    One forward over every game's rows (and one of the target network), the loss over (games, steps) tensors
    with a mask of the steps played: no Python loop over games. A recurrent network replays every game's
    segment from its state at the segment's start. Rows past a game's end hold the previous segment's data:
    computed, finite, and masked out.
    """
    obs, actions, rewards, terminated, truncated, state0 = rollout
    E, T = rewards.shape
    n = torch.as_tensor(n).view(E, 1)
    steps = torch.arange(T)
    mask = steps < n
    cut = truncated | (steps == n - 1)  # a game's last step played in this segment is where its return is cut
    if state0 is not None:
        out = local.unroll(obs, state0)
    else:
        out = local(obs.flatten(0, 1))
        out = tuple(o.unflatten(0, (E, T + 1)) for o in out) if isinstance(out, tuple) else out.unflatten(0, (E, T + 1))
    target_q_next = None
    if target is not None:
        with torch.no_grad():
            target_q_next = target(obs[:, 1:].flatten(0, 1)).unflatten(0, (E, T))  # s_1..s_T of each game
    seg = Segment(actions[:, :T], rewards, terminated, cut, actions[:, 1:], None if bool(mask.all()) else mask)
    return loss_fn(out, target_q_next, seg)


class OnPolicy:
    """The loop body of the on-policy methods (one-step Q and SARSA, n-step Q, A3C): sync the local copy, act up
    to t_max steps in each of the worker's games, one loss over all their segments into the shared model."""

    def __init__(self, worker: ActorLearner, loss: Callable):
        """`loss`: (outputs, target_q_next, segment, *, gamma, entropy_beta, value_coef, gae_lambda) -> (loss,
        metrics), the signature of algorithms.a3c's and algorithms.q_learning's."""
        self.w, cfg, spec = worker, worker.cfg, worker.run.spec
        self.algo = ALGORITHMS[cfg.algo]
        self.loss_fn = functools.partial(loss, gamma=cfg.gamma, entropy_beta=cfg.entropy_beta,
                                         value_coef=cfg.value_coef, gae_lambda=cfg.gae_lambda)
        self.local, self.sync = worker.local_copy()
        self.states = GameStates(self.local, cfg.envs_per_worker) if is_recurrent(self.local) else None
        self.params = list(self.local.parameters())
        self.rollout = new_rollout(spec, cfg.envs_per_worker, cfg.t_max)
        self.obs_np, self.act_np, self.rew_np, self.term_np, self.trunc_np = (t.numpy() for t in self.rollout[:5])
        self.obs_np[:, 0] = worker.first_observations()
        self.carry = np.zeros(cfg.envs_per_worker, bool)  # SARSA: a' of the last segment is the action taken
        self.eps = worker.epsilon()
        self.features = None  # the torso's output in its latest forward, kept by a hook (the network is unchanged)
        self.local.torso.register_forward_hook(self.keep_features)

    def keep_features(self, module, inputs, output: torch.Tensor) -> None:
        self.features = output.detach()

    def act(self, rows: np.ndarray, t: int) -> None:
        """Choose the actions of games `rows` in their states s_t (an LSTM steps their states too), with this
        segment's epsilons; every game's rows are a view, a subset a copy."""
        obs = self.rollout.obs[:, t] if len(rows) == len(self.carry) else self.rollout.obs[rows, t]
        if self.states is not None:
            self.act_np[rows, t] = self.states.act(self.local, rows, obs, self.w.rng)
        else:
            self.act_np[rows, t] = act_many(self.local, obs, self.eps[rows], self.algo.actor_critic, self.w.rng)

    def step(self) -> None:
        """One segment: act, learn, log, and set up the next segment."""
        self.sync()
        self.eps = self.w.epsilon()
        if self.states is not None:
            self.rollout = self.rollout._replace(state0=self.states.start())
        n, ended, life_lost = self.play_segment()
        info = self.learn(n)
        self.w.logged(info, 0.0 if self.algo.actor_critic else self.eps, self.diagnostics)
        self.next_segment(ended, life_lost)

    def play_segment(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Up to t_max steps in every game (a game whose episode ends sits out the rest of the segment); return
        the steps each game played, which games ended and which of those only lost a life."""
        w, spec, T = self.w, self.w.run.spec, self.rew_np.shape[1]
        obs_np, act_np, rew_np, term_np, trunc_np = self.obs_np, self.act_np, self.rew_np, self.term_np, self.trunc_np
        E = len(w.envs)
        fresh = np.flatnonzero(~self.carry)
        if len(fresh):
            self.act(fresh, 0)
        n, ended, life_lost = np.full(E, T), np.zeros(E, bool), np.zeros(E, bool)
        live = np.arange(E)
        for t in range(T):
            chosen = act_np[:, t] if spec.continuous else act_np[:, t].tolist()
            for k in live:
                obs, r, term, trunc, info = w.step_game(k, chosen[k])
                obs_np[k, t + 1], rew_np[k, t], term_np[k, t], trunc_np[k, t] = obs, r, term, trunc
                if term or trunc:
                    n[k], ended[k], life_lost[k] = t + 1, True, bool(info.get("life_lost"))
            if ended.any():
                live = np.flatnonzero(~ended)
            if t + 1 < T and len(live):  # the action in the segment's last state is chosen after the next sync
                self.act(live, t + 1)
        if self.algo.next_action:  # SARSA: a' in each last next state, chosen before the update
            games = np.arange(E)
            act_np[games, n] = act_many(self.local, self.rollout.obs[games, n], self.eps, False, w.rng)
            self.carry = ~ended
        return n, ended, life_lost

    def learn(self, n: np.ndarray) -> dict:
        """One batched forward over all segments, the mean of their losses into the shared model."""
        if self.w.shared_norm is not None:  # acted and learnt with the statistics as synced; the next segment has these
            self.w.observed(torch.cat([self.rollout.obs[k, 1: n[k] + 1] for k in range(len(n))]))
        loss, info = segment_loss(self.local, self.w.shared.target, self.loss_fn, self.rollout, n)
        info["losses/grad_norm"] = self.w.apply(loss, self.params)
        self.w.count(int(n.sum()) * self.w.run.spec.frames_per_step)
        return info

    def diagnostics(self) -> dict:
        """The signs of a collapsed network, from the last loss's forward: how much the torso's features vary
        over each game's segment against their size (and that size), and the LSTM cells' |c| at the segments'
        start."""
        E, T = self.rew_np.shape
        variation, size = metrics.feature_spread(self.features.view(E, T + 1, -1))
        out = {metrics.TORSO_VARIATION: variation / max(size, 1e-12), metrics.TORSO_SIZE: size}
        if self.rollout.state0 is not None:
            out[metrics.LSTM_CELL] = float(self.rollout.state0[1].abs().mean())
        return out

    def next_segment(self, ended: np.ndarray, life_lost: np.ndarray) -> None:
        """The next segment starts from each game's new state (a fresh game after an end)."""
        T = self.rew_np.shape[1]
        going = np.flatnonzero(~ended)
        self.obs_np[going, 0], self.act_np[going, 0] = self.obs_np[going, T], self.act_np[going, T]
        for k in np.flatnonzero(ended):
            if self.states is not None and not life_lost[k]:
                self.states.end_game(k)
            self.obs_np[k, 0], _ = self.w.envs[k].reset()
