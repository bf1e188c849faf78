"""A worker's rollout, the collection PPO and Q(lambda) share: --t-max steps of each of its --envs-per-worker games
(one row a game, one column a step), what was observed, chosen and received and how each step ended; then the
rollout's observations prepared once as the network's first layer reads them, and its shuffled minibatches."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np
import torch

from hogwild_dqn.actor_learner import ActorLearner
from hogwild_dqn.shared import STOP


class Rollout:
    """The buffers of one worker's rollouts, kept from one rollout to the next."""

    def __init__(self, worker: ActorLearner, bf16: bool = False):
        """`bf16`: prepare the inputs in bfloat16 blocks (--learner-precision, networks.AtariTorso.inputs)."""
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
        self.bf16 = bf16
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
        """The rollout's observations as `net`'s first layer reads them (normalized, channels-last; bf16 and in
        blocks with `bf16`: networks.AtariTorso.inputs), computed once for all epochs rather than in every
        minibatch's forward, in chunks that stay in the cache, into a buffer kept from one rollout to the next."""
        obs = self.obs.flatten(0, 1)
        with torch.no_grad():
            for start in range(0, len(obs), 64):
                x = net.inputs(obs[start:start + 64], blocks=self.bf16)
                if self.inputs is None:
                    layout = torch.channels_last if x.dim() == 4 else torch.contiguous_format
                    dtype = torch.bfloat16 if self.bf16 else torch.float32
                    self.inputs = torch.empty((len(obs), *x.shape[1:]), dtype=dtype, memory_format=layout)
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
