"""Value-based losses of Mnih et al. 2016: one-step Q (S1), one-step SARSA, n-step Q (S2).

`q` holds the learner's Q-values for s_0..s_T (T+1 rows, the last unused here); `target_q_next` holds the
target network's Q-values for s_1..s_T. Losses are summed over each game's segment (that is gradient
accumulation) and averaged over games; any leading axes are games.
"""

from __future__ import annotations

import torch

from hogwild_dqn.algorithms.returns import Segment, masked_mean, masked_sum, n_step_returns, one_step_targets


def _squared_error(q: torch.Tensor, seg: Segment, targets: torch.Tensor) -> tuple[torch.Tensor, dict]:
    T = seg.rewards.shape[-1]
    q_sa = q.narrow(-2, 0, T).gather(-1, seg.actions.unsqueeze(-1)).squeeze(-1)
    td = targets.detach() - q_sa
    loss = masked_sum(0.5 * td ** 2, seg.mask)
    return loss, {"losses/td_loss": loss.detach(), "losses/q_mean": masked_mean(q_sa, seg.mask)}


def q1_loss(q: torch.Tensor, target_q_next: torch.Tensor, seg: Segment, *, gamma: float, **_) -> tuple:
    """One-step Q-learning: y = r + gamma * max_a' Q_target(s', a')."""
    next_values = target_q_next.max(-1).values
    return _squared_error(q, seg, one_step_targets(seg.rewards, seg.terminated, next_values, gamma))


def sarsa1_loss(q: torch.Tensor, target_q_next: torch.Tensor, seg: Segment, *, gamma: float, **_) -> tuple:
    """One-step SARSA: y = r + gamma * Q_target(s', a') with a' the action actually taken next."""
    next_q = target_q_next.gather(-1, seg.next_actions.unsqueeze(-1)).squeeze(-1)
    return _squared_error(q, seg, one_step_targets(seg.rewards, seg.terminated, next_q, gamma))


def nq_loss(q: torch.Tensor, target_q_next: torch.Tensor, seg: Segment, *, gamma: float, **_) -> tuple:
    """n-step Q-learning: forward-view returns bootstrapped from max_a Q_target at the cut."""
    returns = n_step_returns(seg.rewards, seg.terminated, seg.truncated, target_q_next.max(-1).values, gamma)
    return _squared_error(q, seg, returns)
