"""Advantage actor-critic (A3C, Mnih et al. 2016 Algorithm S3) as one loss over T-step segments."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from hogwild_dqn.algorithms.returns import Segment, gae, masked_mean, masked_sum, n_step_returns


def log_prob_entropy(policy: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: log pi(a_t | s_t) of the action taken and the policy's entropy (any leading axes).

    Discrete actions (long `actions`, [...]): `policy` is softmax logits [..., actions]. Continuous ones (float
    `actions`, [..., components]): `policy` is [..., 2, components], each component an independent Gaussian
    N(mean, variance) (the paper's continuous policy); log N(a) = -(a - mean)^2 / (2 var) - log(2 pi var) / 2,
    entropy log(2 pi e var) / 2, both summed over the components.
    """
    if actions.is_floating_point():
        mean, var = policy[..., 0, :], policy[..., 1, :]
        log_2pi_var = torch.log(2 * math.pi * var)
        log_prob = (-(actions - mean) ** 2 / (2 * var) - log_2pi_var / 2).sum(-1)
        return log_prob, ((log_2pi_var + 1) / 2).sum(-1)
    log_probs = F.log_softmax(policy, dim=-1)
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    return log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1), entropy


def a3c_loss(out: tuple[torch.Tensor, torch.Tensor], target_q_next, seg: Segment, *, gamma: float,
             entropy_beta: float, value_coef: float, gae_lambda: float = 1.0, **_) -> tuple[torch.Tensor, dict]:
    """Policy gradient with advantage R - V(s), value loss x value_coef, entropy bonus x entropy_beta; summed
    over each game's steps, averaged over games. gae_lambda < 1: the policy's advantage is GAE(lambda) and V
    learns the lambda-return (GAE + V, fixed); 1 is the n-step advantage (the paper's), computed as before.

    `out` is (policy, values) for s_0..s_T (see log_prob_entropy); V(s_{t+1}) (detached) is the bootstrap where
    the segment is cut. `target_q_next` is unused: A3C has no target network. Metrics are detached tensors.
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
