"""How actions are picked, written once for training, evaluation and load_policy: sampling a policy (A3C), its
most likely action (deterministic evaluation), and epsilon-greedy on Q-values (the value-based methods), for a
batch of rows with the caller's own numpy generator."""

from __future__ import annotations

import numpy as np
import torch

from hogwild_dqn.faults import NonFinite
from hogwild_dqn.networks import gaussian


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


def act_many(net: torch.nn.Module, obs: torch.Tensor, eps, actor_critic: bool,
             rng: np.random.Generator) -> np.ndarray:
    """Sample from the policy (A3C) or act epsilon-greedily on Q (value-based methods; `eps` a number or one
    per row), one batched forward."""
    if actor_critic:
        with torch.inference_mode():
            return sample(net(obs)[0], rng)
    rows = len(obs)
    explore = rng.random(rows) < eps
    out = rng.integers(net.q.out_features, size=rows)
    if not explore.all():  # no forward at all when every game explores this step
        greedy = np.flatnonzero(~explore)
        with torch.inference_mode():
            out[greedy] = net(obs[greedy] if len(greedy) < rows else obs).argmax(1).cpu().numpy()
    return out
