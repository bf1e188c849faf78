"""DQN's loss (Mnih et al. 2015) on a minibatch from a replay memory, with Double DQN (van Hasselt et al.
2016) as an option. n-step returns are folded into the batch already (replay.NStep)."""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F


class Batch(NamedTuple):
    """Transitions from a replay memory; row i is (s_i, a_i, R_i, s'_i)."""
    actions: torch.Tensor     # [B] long
    returns: torch.Tensor     # [B] float: sum of gamma^k r_{t+k} over the m <= n folded steps
    terminated: torch.Tensor  # [B] bool: s' is a real terminal, never bootstrapped through (a truncation is)
    discounts: torch.Tensor   # [B] float: gamma^m, the bootstrap's discount


def dqn_loss(q: torch.Tensor, next_q: torch.Tensor, next_q_online: torch.Tensor | None,
             batch: Batch) -> tuple[torch.Tensor, dict]:
    """Huber TD loss, mean over the batch: y = R + gamma^m * Q'(s', a*), a* = argmax Q'(s') (plain DQN) or
    argmax Q_online(s') (Double DQN, when `next_q_online` is given). `next_q` is the bootstrap network's
    Q-values of s' (the target network, or the online one without it); both next tensors are detached."""
    q_sa = q.gather(1, batch.actions.unsqueeze(1)).squeeze(1)
    chooser = next_q if next_q_online is None else next_q_online
    best = chooser.detach().argmax(1, keepdim=True)
    bootstrap = next_q.detach().gather(1, best).squeeze(1)
    targets = batch.returns + batch.discounts * bootstrap * (~batch.terminated)
    loss = F.smooth_l1_loss(q_sa, targets)
    return loss, {"losses/td_loss": loss.detach(), "losses/q_mean": q_sa.detach().mean()}
