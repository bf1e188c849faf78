"""Return maths shared by the n-step methods; `terminated` and `truncated` stay apart."""

from __future__ import annotations

from typing import NamedTuple

import torch


class Segment(NamedTuple):
    """A worker's rollout of T steps. Row t describes the step from s_t to s_{t+1}."""
    actions: torch.Tensor       # [T] long, a_t; continuous actions: [T, components] float
    rewards: torch.Tensor       # [T] float, r_t
    terminated: torch.Tensor    # [T] bool, s_{t+1} is a real terminal: never bootstrap through it
    truncated: torch.Tensor     # [T] bool, the episode was cut at s_{t+1} by a time limit: bootstrap from it
    next_actions: torch.Tensor  # [T] long, a_{t+1}: the action taken (or chosen) in s_{t+1} (SARSA)


def n_step_returns(rewards: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
                   bootstrap: torch.Tensor, gamma: float) -> torch.Tensor:
    """Forward-view returns R_t = r_t + gamma * R_{t+1}, computed backwards.

    The trajectory is cut after step t when t is the last row or truncated[t]; there R_{t+1} is replaced
    by bootstrap[t], the estimated value of s_{t+1}. After a terminated step nothing is added.
    """
    T = rewards.shape[0]
    out = torch.empty_like(rewards)
    ret = bootstrap[T - 1]
    for t in range(T - 1, -1, -1):
        if t == T - 1 or truncated[t]:
            ret = bootstrap[t]
        ret = rewards[t] + gamma * ret * (~terminated[t])
        out[t] = ret
    return out


def one_step_targets(rewards: torch.Tensor, terminated: torch.Tensor, next_values: torch.Tensor,
                     gamma: float) -> torch.Tensor:
    """y_t = r_t + gamma * V(s_{t+1}), with no bootstrap through a terminal (a truncation bootstraps)."""
    return rewards + gamma * next_values * (~terminated)
