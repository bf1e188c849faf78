"""Return maths shared by the n-step methods; `terminated` and `truncated` stay apart.

Every function works on one game's segment (tensors of T steps) or on a batch of games ((games, T)): time is
the last axis of the step tensors.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class Segment(NamedTuple):
    """A worker's rollout of T steps, of one game ([T]) or of several ([games, T]). Row t describes the step
    from s_t to s_{t+1}."""
    actions: torch.Tensor       # [..., T] long, a_t; continuous actions: [..., T, components] float
    rewards: torch.Tensor       # [..., T] float, r_t
    terminated: torch.Tensor    # [..., T] bool, s_{t+1} is a real terminal: never bootstrap through it
    truncated: torch.Tensor     # [..., T] bool, the trajectory is cut at s_{t+1} (a time limit, or the end of
                                # a game's steps in this segment): bootstrap from it
    next_actions: torch.Tensor  # [..., T] long, a_{t+1}: the action taken (or chosen) in s_{t+1} (SARSA)
    mask: torch.Tensor | None = None  # [..., T] bool, the steps that were played (a game that ended early
                                      # sits out the rest of the segment); None: all of them


def n_step_returns(rewards: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
                   bootstrap: torch.Tensor, gamma: float) -> torch.Tensor:
    """Forward-view returns R_t = r_t + gamma * R_{t+1}, computed backwards over the last axis.

    The trajectory is cut after step t when t is the last row or truncated[t]; there R_{t+1} is replaced
    by bootstrap[t], the estimated value of s_{t+1}. After a terminated step nothing is added.
    """
    T = rewards.shape[-1]
    out = torch.empty_like(rewards)
    keep = gamma * (~terminated).to(rewards.dtype)
    ret = bootstrap[..., T - 1]
    for t in range(T - 1, -1, -1):
        if t < T - 1:
            ret = torch.where(truncated[..., t], bootstrap[..., t], ret)
        ret = rewards[..., t] + keep[..., t] * ret
        out[..., t] = ret
    return out


def one_step_targets(rewards: torch.Tensor, terminated: torch.Tensor, next_values: torch.Tensor,
                     gamma: float) -> torch.Tensor:
    """y_t = r_t + gamma * V(s_{t+1}), with no bootstrap through a terminal (a truncation bootstraps)."""
    return rewards + gamma * next_values * (~terminated)


def masked_sum(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The sum of x over the steps played, divided by the number of games (1 for a single game's segment):
    a batch's loss is the mean over its games of each game's summed loss."""
    games = x[..., 0].numel()
    return (x.sum() if mask is None else torch.where(mask, x, 0.0).sum()) / games


def masked_mean(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The mean over games of each game's mean of x over its steps played (a metric, detached)."""
    x = x.detach()
    if mask is None:
        return x.mean()
    return (torch.where(mask, x, 0.0).sum(-1) / mask.sum(-1).clamp(min=1)).mean()


def gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
        truncated: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
    """Generalized advantage estimates (Schulman et al. 2016), computed backwards over the last axis.

    values[t] = V(s_t); next_values[t] = V(s_{t+1}), the state the step led to (at a truncation: the last
    observation of the cut trajectory). delta_t = r_t + gamma * V(s_{t+1}) [not after a terminal] - V(s_t);
    A_t = delta_t + gamma * lam * A_{t+1}, the sum cut after the last row and after a terminated or truncated
    step. lam = 1 gives the n-step advantage of n_step_returns minus V(s_t); lam = 0 the one-step TD error.
    """
    T = rewards.shape[-1]
    delta = rewards + gamma * next_values * (~terminated).to(rewards.dtype) - values
    goes_on = gamma * lam * (~(terminated | truncated)).to(rewards.dtype)
    out = torch.empty_like(rewards)
    last = torch.zeros_like(rewards[..., 0])
    for t in range(T - 1, -1, -1):
        last = delta[..., t] + (goes_on[..., t] * last if t < T - 1 else 0.0)
        out[..., t] = last
    return out


def q_lambda_targets(rewards: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
                     truncated: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
    """Q(lambda) targets (Peng and Williams 1996; PQN's), computed backwards over the last axis.

    next_values[t] = max_a Q(s_{t+1}, a), the state step t led to (at a truncation: the cut trajectory's last
    observation). G_t = r_t + gamma * [(1 - lam) * next_values[t] + lam * G_{t+1}], where the trajectory goes on;
    after the last row and after a truncated step, G_t = r_t + gamma * next_values[t] (the bootstrap); after a
    terminated step, G_t = r_t. lam = 0 gives one-step Q-learning's targets, lam = 1 the n-step returns of
    n_step_returns bootstrapped from max Q at the cut.
    """
    T = rewards.shape[-1]
    keep = gamma * (~terminated).to(rewards.dtype)
    out = torch.empty_like(rewards)
    ret = next_values[..., T - 1]
    for t in range(T - 1, -1, -1):
        bootstrap = next_values[..., t]
        if t < T - 1:  # where the trajectory goes on, the next target enters with weight lam
            ret = torch.where(truncated[..., t], bootstrap, bootstrap + lam * (ret - bootstrap))
        else:
            ret = bootstrap
        ret = rewards[..., t] + keep[..., t] * ret
        out[..., t] = ret
    return out
