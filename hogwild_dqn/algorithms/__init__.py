"""Pure losses: (network outputs, segment tensors, hyperparameters) -> (loss, metrics)."""

from hogwild_dqn.algorithms.a3c import a3c_loss
from hogwild_dqn.algorithms.q_learning import nq_loss, q1_loss, sarsa1_loss
from hogwild_dqn.algorithms.returns import Segment, n_step_returns, one_step_targets

LOSSES = {"q1": q1_loss, "sarsa1": sarsa1_loss, "nq": nq_loss, "a3c": a3c_loss}

__all__ = ["LOSSES", "Segment", "n_step_returns", "one_step_targets", "a3c_loss", "nq_loss", "q1_loss", "sarsa1_loss"]
