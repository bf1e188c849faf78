"""Return and loss maths against values worked out by hand (gamma 0.5 or 0.9 keeps them exact)."""

import math
import subprocess
import sys

import pytest
import torch

from hogwild_dqn.algorithms.a3c import a3c_loss, log_prob_entropy
from hogwild_dqn.algorithms.q_learning import nq_loss, q1_loss, sarsa1_loss
from hogwild_dqn.algorithms.returns import Segment, n_step_returns, one_step_targets
from tests.conftest import ROOT

F, T_ = False, True


def b(*xs):
    return torch.tensor(xs, dtype=torch.bool)


def f(*xs):
    return torch.tensor(xs, dtype=torch.float32)


@pytest.mark.parametrize("terminated, truncated, bootstrap, expected", [
    # r = [1, 0, 2], gamma 0.5; bootstrap is V(s_{t+1}), used only where the trajectory is cut
    ((F, F, F), (F, F, F), (9, 9, 4), (2.0, 2.0, 4.0)),   # segment cut by t_max: R2 = 2 + .5*4
    ((F, F, T_), (F, F, F), (9, 9, 4), (1.5, 1.0, 2.0)),  # real terminal: no bootstrap
    ((F, F, F), (F, F, T_), (9, 9, 4), (2.0, 2.0, 4.0)),  # time-limit truncation: bootstrap from s_3
    ((F, F, F), (F, T_, F), (9, 10, 4), (3.5, 5.0, 4.0)),  # truncated mid-way: R1 = 0 + .5*V(s_2)=5
    ((F, T_, F), (F, F, F), (9, 9, 4), (1.0, 0.0, 4.0)),  # terminal mid-way: nothing crosses it
])
def test_n_step_returns(terminated, truncated, bootstrap, expected):
    out = n_step_returns(f(1, 0, 2), b(*terminated), b(*truncated), f(*bootstrap), 0.5)
    assert out.tolist() == pytest.approx(expected)


def test_one_step_targets_bootstrap_only_without_terminal():
    y = one_step_targets(f(1, 1), b(F, T_), f(3, 5), 0.9)
    assert y.tolist() == pytest.approx([3.7, 1.0])


# Shared fixture of the Q losses: Q(s_0..s_2) for 2 actions, a_0 = 1, a_1 = 0, rewards 1, gamma 0.9.
Q = [[1.0, 2.0], [0.0, 4.0], [9.0, 9.0]]
TARGET_NEXT = [[3.0, 1.0], [5.0, 2.0]]  # Q_target(s_1), Q_target(s_2)


def seg(terminated=(F, F), truncated=(F, F), next_actions=(1, 0)):
    return Segment(torch.tensor([1, 0]), f(1, 1), b(*terminated), b(*truncated), torch.tensor(next_actions))


def test_q1_loss_by_hand():
    q = torch.tensor(Q, requires_grad=True)
    loss, _ = q1_loss(q, torch.tensor(TARGET_NEXT), seg(terminated=(F, T_)), gamma=0.9)
    # y = [1 + .9*max(3,1), 1 + 0] = [3.7, 1]; Q(s,a) = [2, 0]; 0.5 * (1.7^2 + 1^2)
    assert loss.item() == pytest.approx(0.5 * (1.7 ** 2 + 1.0))
    loss.backward()  # gradient reaches only Q(s_t, a_t): -(y - Q)
    assert q.grad.flatten().tolist() == pytest.approx([0.0, -1.7, -1.0, 0.0, 0.0, 0.0])


def test_sarsa1_uses_the_next_action_taken():
    loss, _ = sarsa1_loss(torch.tensor(Q), torch.tensor(TARGET_NEXT), seg(terminated=(F, T_)), gamma=0.9)
    # y_0 = 1 + .9 * Q_target(s_1, a_1 = 1) = 1.9 (not the max, 3); y_1 = 1 (terminal)
    assert loss.item() == pytest.approx(0.5 * (0.1 ** 2 + 1.0))


def test_nq_loss_by_hand():
    loss, _ = nq_loss(torch.tensor(Q), torch.tensor(TARGET_NEXT), seg(), gamma=0.9)
    # R_1 = 1 + .9 * max Q_target(s_2) = 5.5; R_0 = 1 + .9 * 5.5 = 5.95; Q(s,a) = [2, 0]
    assert loss.item() == pytest.approx(0.5 * (3.95 ** 2 + 5.5 ** 2))
    loss, _ = nq_loss(torch.tensor(Q), torch.tensor(TARGET_NEXT), seg(terminated=(F, T_)), gamma=0.9)
    assert loss.item() == pytest.approx(0.5 * (0.1 ** 2 + 1.0))  # R = [1.9, 1]
    loss, _ = nq_loss(torch.tensor(Q), torch.tensor(TARGET_NEXT), seg(truncated=(F, T_)), gamma=0.9)
    assert loss.item() == pytest.approx(0.5 * (3.95 ** 2 + 5.5 ** 2))  # truncation bootstraps


@pytest.mark.parametrize("terminated, returns", [((F, F), (2.25, 2.5)), ((F, T_), (1.5, 1.0))])
def test_a3c_loss_by_hand(terminated, returns):
    # uniform policy over 2 actions, V(s_0..s_2) = [1, 2, 3], rewards 1, gamma 0.5
    logits = torch.zeros(3, 2, requires_grad=True)
    values = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    loss, m = a3c_loss((logits, values), None, seg(terminated=terminated), gamma=0.5, entropy_beta=0.01,
                       value_coef=0.5)
    adv = [returns[0] - 1.0, returns[1] - 2.0]
    policy = -math.log(0.5) * sum(adv)
    value = 0.5 * sum(a * a for a in adv)
    assert m["losses/policy_loss"] == pytest.approx(policy, abs=1e-6)
    assert m["losses/value_loss"] == pytest.approx(value)
    assert m["losses/entropy"] == pytest.approx(math.log(2))
    assert loss.item() == pytest.approx(policy + value - 0.01 * 2 * math.log(2), abs=1e-6)
    loss.backward()
    # dL/dV(s_t) = -2 * 0.5 * adv_t; the bootstrap V(s_2) is a constant
    assert values.grad.tolist() == pytest.approx([-adv[0], -adv[1], 0.0])


def test_gaussian_log_prob_and_entropy_by_hand():
    # row 0: one Gaussian per component, mean (0, 1), variance (1, 0.25), action (1, 1);
    # row 1: mean (2, -1), variance (4, 1), action (2, -3)
    policy = torch.tensor([[[0.0, 1.0], [1.0, 0.25]], [[2.0, -1.0], [4.0, 1.0]]])
    actions = torch.tensor([[1.0, 1.0], [2.0, -3.0]])
    log_prob, entropy = log_prob_entropy(policy, actions)
    half_log_2pi = 0.5 * math.log(2 * math.pi)
    # log N(a; m, v) = -(a - m)^2 / (2 v) - log(2 pi v) / 2; entropy = (log(2 pi v) + 1) / 2
    row0 = (-0.5 - half_log_2pi) + (0.0 - half_log_2pi - 0.5 * math.log(0.25))
    row1 = (0.0 - half_log_2pi - 0.5 * math.log(4)) + (-2.0 - half_log_2pi)
    assert log_prob.tolist() == pytest.approx([row0, row1])
    ent0 = (half_log_2pi + 0.5) + (half_log_2pi + 0.5 * math.log(0.25) + 0.5)
    ent1 = (half_log_2pi + 0.5 * math.log(4) + 0.5) + (half_log_2pi + 0.5)
    assert entropy.tolist() == pytest.approx([ent0, ent1])


def test_a3c_loss_continuous_by_hand():
    # one action component; N(mean 0, variance 1) in every state, actions 1 then -2; V = [1, 2, 3], gamma 0.5
    policy = torch.tensor([[[0.0], [1.0]]] * 3, requires_grad=True)
    values = torch.tensor([1.0, 2.0, 3.0])
    s = Segment(torch.tensor([[1.0], [-2.0]]), f(1, 1), b(F, F), b(F, F), torch.zeros(2, 1))
    loss, m = a3c_loss((policy, values), None, s, gamma=0.5, entropy_beta=0.01, value_coef=0.5)
    adv = [2.25 - 1.0, 2.5 - 2.0]
    log_p = [-0.5 - 0.5 * math.log(2 * math.pi), -2.0 - 0.5 * math.log(2 * math.pi)]
    assert m["losses/policy_loss"] == pytest.approx(-(log_p[0] * adv[0] + log_p[1] * adv[1]))
    assert m["losses/entropy"] == pytest.approx(0.5 * (math.log(2 * math.pi) + 1))
    loss.backward()
    # d(-log p * adv)/d mean = -adv (a - mean) / var; d/d var = -adv ((a - mean)^2 / (2 var^2) - 1 / (2 var)),
    # less entropy_beta / (2 var) from the entropy bonus
    grad = policy.grad
    assert grad[:2, 0, 0].tolist() == pytest.approx([-adv[0] * 1.0, -adv[1] * -2.0])
    assert grad[:2, 1, 0].tolist() == pytest.approx([-adv[0] * (0.5 - 0.5) - 0.005, -adv[1] * (2.0 - 0.5) - 0.005])
    assert grad[2].abs().sum() == 0  # the last state only bootstraps


def test_every_algorithm_row_names_a_loss_and_config_stays_torch_free():
    from hogwild_dqn.algorithms import ALGORITHMS

    for name, algo in ALGORITHMS.items():
        assert callable(algo.loss) and algo.loss.__name__ == f"{name}_loss"
    code = "import sys, hogwild_dqn.config; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False).returncode == 0
