"""Asynchronous Q(lambda)'s loss (PQN, Gallici et al. 2024) on one minibatch of a worker's rollout: the squared
error of Q(s, a) against the rollout's Q(lambda) targets (returns.q_lambda_targets), which stay fixed over the
epochs. No target network: the network's LayerNorm keeps bootstrapping from itself stable."""

from __future__ import annotations

import torch


def pqn_loss(q: torch.Tensor, actions: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """0.5 * mean over the rows of (G - Q(s, a))^2; `q` the network's Q-values for the rows' observations (rows,
    actions), `actions` the actions taken (rows,), `targets` their Q(lambda) targets G (rows,)."""
    q_sa = q.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    loss = 0.5 * ((targets.detach() - q_sa) ** 2).mean()
    return loss, {"losses/td_loss": loss.detach(), "losses/q_mean": q_sa.detach().mean()}
