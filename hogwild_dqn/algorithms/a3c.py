"""Advantage actor-critic (A3C, Mnih et al. 2016 Algorithm S3) as one loss over a T-step segment."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hogwild_dqn.algorithms.returns import Segment, n_step_returns


def a3c_loss(out: tuple[torch.Tensor, torch.Tensor], target_q_next, seg: Segment, *, gamma: float,
             entropy_beta: float, value_coef: float) -> tuple[torch.Tensor, dict]:
    """Policy gradient with advantage R - V(s), value loss x value_coef, entropy bonus x entropy_beta.

    `out` is (logits, values) for s_0..s_T; V(s_{t+1}) (detached) is the bootstrap where the segment is cut.
    `target_q_next` is unused: A3C has no target network.
    """
    logits, values = out
    T = len(seg.actions)
    returns = n_step_returns(seg.rewards, seg.terminated, seg.truncated, values[1:].detach(), gamma)
    advantage = returns - values[:T]
    log_probs = F.log_softmax(logits[:T], dim=1)
    entropy = -(log_probs.exp() * log_probs).sum(1)
    chosen = log_probs.gather(1, seg.actions.unsqueeze(1)).squeeze(1)
    policy_loss = -(chosen * advantage.detach()).sum()
    value_loss = value_coef * (advantage ** 2).sum()
    loss = policy_loss + value_loss - entropy_beta * entropy.sum()
    return loss, {"losses/policy_loss": policy_loss.item(), "losses/value_loss": value_loss.item(),
                  "losses/entropy": entropy.mean().item()}
