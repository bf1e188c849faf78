"""Advantage actor-critic (A3C, Mnih et al. 2016 Algorithm S3) as one loss over T-step segments."""

from __future__ import annotations

import torch

from hogwild_dqn.algorithms.returns import Segment, gae, masked_mean, masked_sum, n_step_returns
from hogwild_dqn.distributions import log_prob_entropy


def a3c_loss(out: tuple[torch.Tensor, torch.Tensor], target_q_next, seg: Segment, *, gamma: float,
             entropy_beta: float, value_coef: float, gae_lambda: float = 1.0, **_) -> tuple[torch.Tensor, dict]:
    """Policy gradient with advantage R - V(s), value loss x value_coef, entropy bonus x entropy_beta; summed
    over each game's steps, averaged over games. gae_lambda < 1: the policy's advantage is GAE(lambda) and V
    learns the lambda-return (GAE + V, fixed); 1 is the n-step advantage (the paper's).

    `out` is (policy, values) for s_0..s_T (see distributions.log_prob_entropy); V(s_{t+1}) (detached) is the
    bootstrap where the segment is cut. `target_q_next` is unused: A3C has no target network. Metrics are
    detached tensors.
    """
    policy, values = out
    T = seg.rewards.shape[-1]
    if gae_lambda < 1:
        fixed = values.detach()
        estimate = gae(seg.rewards, fixed[..., :T], fixed[..., 1:], seg.terminated, seg.truncated, gamma, gae_lambda)
        advantage = (estimate + fixed[..., :T]) - values[..., :T]  # its gradient: V towards the lambda-return
    else:
        returns = n_step_returns(seg.rewards, seg.terminated, seg.truncated, values[..., 1:].detach(), gamma)
        advantage = returns - values[..., :T]
    chosen, entropy = log_prob_entropy(policy.narrow(values.dim() - 1, 0, T), seg.actions)  # s_0..s_{T-1}
    policy_loss = masked_sum(-(chosen * advantage.detach()), seg.mask)
    value_loss = value_coef * masked_sum(advantage ** 2, seg.mask)
    loss = policy_loss + value_loss - entropy_beta * masked_sum(entropy, seg.mask)
    return loss, {"losses/policy_loss": policy_loss.detach(), "losses/value_loss": value_loss.detach(),
                  "losses/entropy": masked_mean(entropy, seg.mask)}
