"""How actions are picked, written once for training, evaluation and load_policy: from a policy (A3C, PPO:
distributions.sample), or epsilon-greedy on Q-values (the value-based methods), for a batch of rows with the
caller's own numpy generator."""

from __future__ import annotations

import numpy as np
import torch

from hogwild_dqn.distributions import sample


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
