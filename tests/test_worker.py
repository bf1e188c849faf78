"""The worker's action choice: A3C samples its softmax policy, Q methods act epsilon-greedily."""

import math

import numpy as np
import pytest
import torch

from hogwild_dqn.networks import build_network
from hogwild_dqn.shared import NonFinite
from hogwild_dqn.worker import act


def _net(actor_critic, head_bias):
    net = build_network((4,), 3, actor_critic, 8, 1)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        (net.pi if actor_critic else net.q).bias.copy_(torch.tensor(head_bias))
    return net


def test_a3c_samples_its_policy():
    net, rng = _net(True, [math.log(0.2), math.log(0.5), math.log(0.3)]), np.random.default_rng(0)
    counts = np.bincount([act(net, torch.zeros(4), 0.0, True, rng) for _ in range(20_000)], minlength=3)
    assert (counts / counts.sum()).tolist() == pytest.approx([0.2, 0.5, 0.3], abs=0.015)


def test_q_methods_are_epsilon_greedy():
    net, rng = _net(False, [0.0, 1.0, 0.5]), np.random.default_rng(0)
    counts = np.bincount([act(net, torch.zeros(4), 0.3, False, rng) for _ in range(20_000)], minlength=3)
    # greedy action 1 with 1 - 0.3 + 0.3/3, each other action 0.3/3
    assert (counts / counts.sum()).tolist() == pytest.approx([0.1, 0.8, 0.1], abs=0.015)


def test_non_finite_policy_is_reported():
    net = _net(True, [0.0, float("nan"), 0.0])
    with pytest.raises(NonFinite, match="non-finite policy"):
        act(net, torch.zeros(4), 0.0, True, np.random.default_rng(0))
