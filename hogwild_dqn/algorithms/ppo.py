"""Proximal policy optimization's loss (Schulman et al. 2017) on one minibatch of a worker's rollout: the
clipped surrogate, the value loss (clipped or not) and the entropy bonus. The rollout's advantages come from
returns.gae; the minibatches and epochs are the worker's (workers/rollouts.py)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from hogwild_dqn.distributions import log_prob_entropy


class Minibatch(NamedTuple):
    """Rows of a rollout, what was recorded when acting (flattened over games and steps)."""
    actions: torch.Tensor     # [B] long, or [B, components] float
    log_probs: torch.Tensor   # [B] log pi_old(a | s) of the behaviour weights, recorded when acting
    values: torch.Tensor      # [B] V_old(s) of the behaviour weights, on the value head's scale
    advantages: torch.Tensor  # [B] GAE(lambda) estimates
    returns: torch.Tensor     # [B] advantages + V_old (standardized with --value-normalize): the value's target

    def rows(self, index) -> Minibatch:
        """The minibatch of the rows `index` selects."""
        return Minibatch(*(x[index] for x in self))


def ppo_loss(out: tuple[torch.Tensor, torch.Tensor], batch: Minibatch, *, clip: float, value_coef: float,
             entropy_beta: float, clip_value: bool) -> tuple[torch.Tensor, dict]:
    """-min(r A, clip(r, 1 - clip, 1 + clip) A) + value_coef * 0.5 (V - R)^2 - entropy_beta * H, means over the
    minibatch, where r = pi(a|s) / pi_old(a|s) and A the advantages standardized over the minibatch. With
    `clip_value`, V's error is the larger of its own and that of V_old + clip(V - V_old, -clip, clip) (PPO2's
    value clipping). `out` is the network's (policy, values) for the minibatch's
    observations. Metrics: approximate KL (E[(r - 1) - log r], Schulman's low-variance estimator) and the
    fraction of rows clipped, both of r."""
    policy, values = out
    log_probs, entropy = log_prob_entropy(policy, batch.actions)
    log_ratio = log_probs - batch.log_probs
    ratio = log_ratio.exp()
    adv = batch.advantages
    adv = (adv - adv.mean()) / (adv.std(correction=0) + 1e-8) if len(adv) > 1 else adv
    surrogate = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip))
    policy_loss = surrogate.mean()
    error = (values - batch.returns) ** 2
    if clip_value:
        clipped = batch.values + (values - batch.values).clamp(-clip, clip)
        error = torch.max(error, (clipped - batch.returns) ** 2)
    value_loss = value_coef * 0.5 * error.mean()
    entropy = entropy.mean()
    loss = policy_loss + value_loss - entropy_beta * entropy
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipped_rows = ((ratio - 1).abs() > clip).float().mean()
    return loss, {"losses/policy_loss": policy_loss.detach(), "losses/value_loss": value_loss.detach(),
                  "losses/entropy": entropy.detach(), "losses/approx_kl": approx_kl,
                  "losses/clip_fraction": clipped_rows}
