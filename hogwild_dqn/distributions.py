"""The policies' distributions, written once for acting, evaluating and learning: softmax logits (rows, actions),
or an independent Gaussian per component as (mean, variance) stacked (rows, 2, components) (networks.GaussianHead):
draw an action (`sample`, with the caller's numpy generator), the most likely one (`most_likely`), and the log-
probability of an action taken with the policy's entropy (`log_prob_entropy`, the losses')."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from hogwild_dqn.faults import NonFinite


def gaussian(policy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(mean, variance) of a policy head's output (rows, 2, components); None for softmax logits."""
    return (policy[:, 0], policy[:, 1]) if policy.dim() == 3 else None


def sample(policy: torch.Tensor, rng: np.random.Generator) -> np.ndarray:
    """One action per row, drawn with the worker's own generator: an index from softmax logits (rows, actions),
    or a vector of floats from a Gaussian's (mean, variance) (rows, 2, components), unclipped (the env clips)."""
    if (normal := gaussian(policy)) is not None:
        mean, var = (t.numpy() for t in normal)
        if not (np.isfinite(mean).all() and np.isfinite(var).all()):
            raise NonFinite("non-finite policy while acting")
        return mean + np.sqrt(var) * rng.standard_normal(mean.shape)
    cdf = torch.softmax(policy, dim=1).cumsum(1).numpy()
    if not np.isfinite(cdf[:, -1]).all():
        raise NonFinite("non-finite policy while acting")
    u = rng.random(len(cdf)) * cdf[:, -1]
    return np.minimum((cdf <= u[:, None]).sum(1), cdf.shape[1] - 1)


def most_likely(policy: torch.Tensor) -> np.ndarray:
    """One action per row without drawing: the most likely index of softmax logits, or a Gaussian's mean."""
    if (normal := gaussian(policy)) is not None:
        return normal[0].numpy()
    return policy.argmax(1).numpy()


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
