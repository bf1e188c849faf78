"""A worker's replay memory (DQN): bounded, in the worker's own process memory.

Observations are kept as frames, each stored once: an Atari observation is a stack of 4 uint8 frames of which
consecutive observations share 3, so a transition costs one new 84x84 frame (7,056 bytes) plus references,
not two stacks of four. A vector observation is one float32 "frame" (a stack of 1). A transition refers to
the frames of s and s' by their running frame numbers; when the frame ring wraps, transitions whose frames
are gone leave the memory first, so a sampled stack is always exactly what the env returned.

n-step returns are folded as the steps arrive (NStep), per game, and never cross the end of an episode:
terminated and truncated stay apart (a truncation bootstraps from its last state, a termination does not).
"""

from __future__ import annotations

from collections import deque

import numpy as np
import torch

REF_BYTES = 8  # one frame number


class ReplayMemory:
    """Transitions (s, a, R, s', terminated, discount) of one worker; `capacity` transitions at most."""

    def __init__(self, capacity: int, obs_shape: tuple, pixels: bool):
        self.capacity, self.pixels = capacity, pixels
        self.stack = obs_shape[0] if pixels else 1
        frame_shape, dtype = (obs_shape[1:], np.uint8) if pixels else (obs_shape, np.float32)
        # the frame ring holds every frame a live transition can refer to, plus the frames a new episode
        # stacks up front (its first observation brings `stack` of them)
        self.frame_cap = capacity + 2 * self.stack + 2
        self.frames = np.zeros((self.frame_cap, *frame_shape), dtype=dtype)
        self.n_frames = 0  # frames ever stored: frame number f lives in slot f % frame_cap
        self.obs_ref = np.zeros((capacity, self.stack), dtype=np.int64)
        self.next_ref = np.zeros((capacity, self.stack), dtype=np.int64)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.returns = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=bool)
        self.discounts = np.zeros(capacity, dtype=np.float32)  # gamma^n of the bootstrap (n steps folded)
        self.n_added = 0   # transitions ever added: transition i lives in slot i % capacity
        self.first = 0     # the oldest live transition (see _live)

    @staticmethod
    def bytes_per_transition(obs_shape: tuple, pixels: bool) -> int:
        """What one transition costs: its share of the frame ring, two frame references per stacked frame,
        and action, return, terminal flag and discount."""
        stack = obs_shape[0] if pixels else 1
        frame = int(np.prod(obs_shape[1:])) if pixels else 4 * int(np.prod(obs_shape))
        return frame + 2 * stack * REF_BYTES + 8 + 4 + 1 + 4

    def add_first(self, obs: np.ndarray) -> np.ndarray:
        """The first observation of an episode: store all its frames; return its frame references."""
        parts = np.asarray(obs) if self.pixels else np.asarray(obs)[None]
        return np.array([self._store(p) for p in parts], dtype=np.int64)

    def add_next(self, refs: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """The observation after `refs`'s: its newest frame is the only new one; return its references."""
        if not self.pixels:
            return np.array([self._store(np.asarray(obs))], dtype=np.int64)
        return np.append(refs[1:], self._store(np.asarray(obs)[-1]))

    def _store(self, frame: np.ndarray) -> int:
        f = self.n_frames
        self.frames[f % self.frame_cap] = frame
        self.n_frames += 1
        return f

    def add(self, obs_refs: np.ndarray, action: int, ret: float, next_refs: np.ndarray, terminated: bool,
            discount: float) -> None:
        i = self.n_added % self.capacity
        self.obs_ref[i], self.next_ref[i] = obs_refs, next_refs
        self.actions[i], self.returns[i], self.terminated[i], self.discounts[i] = action, ret, terminated, discount
        self.n_added += 1

    def _live(self) -> tuple[int, int]:
        """[first, end) of the transitions whose frames are all still in the ring (running numbers)."""
        end = self.n_added
        first = max(self.first, end - self.capacity)
        oldest_kept = self.n_frames - self.frame_cap
        while first < end and self.obs_ref[first % self.capacity].min() < oldest_kept:
            first += 1  # frame numbers grow with the transition number, so the gone ones are the oldest
        self.first = first
        return first, end

    def __len__(self) -> int:
        first, end = self._live()
        return end - first

    def _gather(self, idx: np.ndarray) -> tuple:
        slots = idx % self.capacity
        obs = self.frames[self.obs_ref[slots] % self.frame_cap]
        nxt = self.frames[self.next_ref[slots] % self.frame_cap]
        if not self.pixels:
            obs, nxt = obs[:, 0], nxt[:, 0]
        return (torch.from_numpy(obs), torch.from_numpy(self.actions[slots]), torch.from_numpy(self.returns[slots]),
                torch.from_numpy(nxt), torch.from_numpy(self.terminated[slots]),
                torch.from_numpy(self.discounts[slots]))

    def sample(self, batch: int, rng: np.random.Generator) -> tuple:
        """`batch` transitions drawn uniformly (with replacement) from the live ones: tensors (obs, actions,
        returns, next_obs, terminated, discounts)."""
        first, end = self._live()
        return self._gather(rng.integers(first, end, size=batch))

    def latest(self, batch: int) -> tuple:
        """The newest `batch` transitions (learning without replay)."""
        first, end = self._live()
        return self._gather(np.arange(max(first, end - batch), end))


class NStep:
    """Folds one game's steps into n-step transitions: (refs of s_t, a_t, sum of gamma^i r_{t+i}, refs of
    s_{t+m}, terminated, gamma^m) with m <= n, cut at the episode's end."""

    def __init__(self, n: int, gamma: float):
        self.n, self.gamma = n, gamma
        self.steps: deque = deque()  # (obs_refs, action, reward)

    def push(self, obs_refs, action: int, reward: float, next_refs, terminated: bool, truncated: bool) -> list:
        """Add a step; return the transitions it completes (all pending ones when the episode ends)."""
        self.steps.append((obs_refs, action, reward))
        out = []
        ended = terminated or truncated
        while self.steps and (len(self.steps) >= self.n or ended):
            ret, discount = 0.0, 1.0
            for _, _, r in self.steps:
                ret += discount * r
                discount *= self.gamma
            refs, a, _ = self.steps.popleft()
            out.append((refs, a, ret, next_refs, terminated, discount))
        return out
