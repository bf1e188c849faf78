"""Return and loss maths against values worked out by hand (gamma 0.5 or 0.9 keeps them exact)."""

import math
import subprocess
import sys

import pytest
import torch

from hogwild_dqn.algorithms.a3c import a3c_loss
from hogwild_dqn.algorithms.pqn import pqn_loss
from hogwild_dqn.algorithms.q_learning import nq_loss, q1_loss, sarsa1_loss
from hogwild_dqn.algorithms.returns import Segment, n_step_returns, one_step_targets, q_lambda_targets
from hogwild_dqn.distributions import log_prob_entropy
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


def test_every_algorithm_has_its_code_imported_and_config_stays_torch_free():
    """workers.WORKERS binds every ALGORITHMS row to its loop body and its loss, both imported objects; config.py
    (--help, a bad --algo) reads the table without loading torch."""
    from hogwild_dqn.algorithms import ALGORITHMS
    from hogwild_dqn.workers import WORKERS

    assert set(WORKERS) == set(ALGORITHMS)
    for name, code in WORKERS.items():
        assert code.loss.__name__ == f"{name}_loss" and callable(code.body.step)
        assert code.loss.__module__.startswith("hogwild_dqn.algorithms.")
        assert code.body.__module__.startswith("hogwild_dqn.workers.")
    code = "import sys, hogwild_dqn.config; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False).returncode == 0


@pytest.mark.parametrize("terminated, truncated, expected", [
    # r = [1, 0, 2], V(s_t) = [1, 2, 3], V(s_{t+1}) = [2, 3, 4], gamma 0.5, lambda 0.5: delta = [1, -0.5, 1]
    ((F, F, F), (F, F, F), (0.9375, -0.25, 1.0)),  # A1 = -.5 + .25 * 1, A0 = 1 + .25 * A1
    ((F, T_, F), (F, F, F), (0.5, -2.0, 1.0)),     # terminal at s_2: delta1 = 0 - 2, nothing crosses it
    ((F, F, F), (F, T_, F), (0.875, -0.5, 1.0)),   # truncated at s_2: delta1 bootstraps V(s_2) = 3, the sum stops
])
def test_gae_by_hand(terminated, truncated, expected):
    from hogwild_dqn.algorithms.returns import gae

    out = gae(f(1, 0, 2), f(1, 2, 3), f(2, 3, 4), b(*terminated), b(*truncated), 0.5, 0.5)
    assert out.tolist() == pytest.approx(expected)


def test_gae_at_lambda_one_is_the_n_step_advantage_and_at_zero_the_td_error():
    from hogwild_dqn.algorithms.returns import gae

    g = torch.Generator().manual_seed(0)
    rewards, values, next_values = (torch.randn(4, 7, generator=g) for _ in range(3))
    terminated, truncated = torch.rand(4, 7, generator=g) < 0.2, torch.rand(4, 7, generator=g) < 0.2
    # V(s_{t+1}) is the next row's V(s_t) but after an end (a truncation's is its own last observation's)
    next_values[:, :-1] = torch.where(truncated[:, :-1] | terminated[:, :-1], next_values[:, :-1], values[:, 1:])
    n_step = n_step_returns(rewards, terminated, truncated, next_values, 0.9) - values
    assert torch.allclose(gae(rewards, values, next_values, terminated, truncated, 0.9, 1.0), n_step, atol=1e-5)
    td = rewards + 0.9 * next_values * ~terminated - values
    assert torch.allclose(gae(rewards, values, next_values, terminated, truncated, 0.9, 0.0), td)


def test_a3c_with_gae_lambda_one_is_the_papers_a3c_and_below_one_learns_the_lambda_return():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 4, 3, generator=g, requires_grad=True)
    values = torch.randn(2, 4, generator=g, requires_grad=True)
    s = Segment(torch.tensor([[0, 1, 2], [2, 2, 0]]), torch.randn(2, 3, generator=g), b(F, T_, F).repeat(2, 1),
                b(F, F, T_).repeat(2, 1), None)
    hp = {"gamma": 0.9, "entropy_beta": 0.01, "value_coef": 0.5}
    paper, _ = a3c_loss((logits, values), None, s, **hp)
    assert torch.equal(a3c_loss((logits, values), None, s, gae_lambda=1.0, **hp)[0], paper)
    lam, _ = a3c_loss((logits, values), None, s, gae_lambda=0.0, **hp)
    # lambda 0: the advantage is the one-step TD error r + gamma V(s') - V(s); V's target r + gamma V(s')
    v = values.detach()
    td = s.rewards + 0.9 * v[:, 1:] * ~s.terminated - v[:, :3]
    chosen, entropy = log_prob_entropy(logits[:, :3], s.actions)
    expected = (-(chosen * td).sum() + 0.5 * (td ** 2).sum() - 0.01 * entropy.sum()) / 2
    assert lam.item() == pytest.approx(expected.item(), rel=1e-5)


def _ppo_minibatch():
    from hogwild_dqn.algorithms.ppo import Minibatch

    # pi(a|s) = 0.5 for both rows (uniform logits); pi_old 1/3 and 1: ratios 1.5 and 0.5
    old = f(math.log(0.5 / 1.5), 0.0)
    return Minibatch(torch.tensor([0, 1]), old, values=f(0, 2), advantages=f(3, -1), returns=f(3, 1))


@pytest.mark.parametrize("clip_value, value_error", [(True, (7.84 + 1) / 2), (False, (4 + 1) / 2)])
def test_ppo_loss_by_hand(clip_value, value_error):
    from hogwild_dqn.algorithms.ppo import ppo_loss

    logits = torch.zeros(2, 2, requires_grad=True)
    values = torch.tensor([1.0, 2.0], requires_grad=True)
    loss, info = ppo_loss((logits, values), _ppo_minibatch(), clip=0.2, value_coef=0.5, entropy_beta=0.01,
                          clip_value=clip_value)
    # advantages [3, -1] standardized over the minibatch: [1, -1]. Row 0: min(1.5, 1.2) * 1 -> -1.2; row 1:
    # min(0.5 * -1, 0.8 * -1) -> +0.8; the mean -0.2. V: row 0 (1 - 3)^2 = 4, clipped to V_old + 0.2:
    # (0.2 - 3)^2 = 7.84 (the larger); row 1 (2 - 1)^2 = 1 either way. Entropy log 2 per row.
    assert info["losses/policy_loss"].item() == pytest.approx(-0.2)
    assert info["losses/value_loss"].item() == pytest.approx(0.5 * 0.5 * value_error)
    assert loss.item() == pytest.approx(-0.2 + 0.25 * value_error - 0.01 * math.log(2))
    assert info["losses/clip_fraction"].item() == 1.0  # both ratios outside [0.8, 1.2]
    kl = ((0.5 - math.log(1.5)) + (-0.5 - math.log(0.5))) / 2
    assert info["losses/approx_kl"].item() == pytest.approx(kl)
    loss.backward()
    # both rows are clipped: the surrogate gives the policy no gradient, only the entropy bonus does (zero at
    # uniform logits); V gets none from a row whose clipped error is the larger
    assert logits.grad.abs().max().item() == pytest.approx(0.0, abs=1e-7)
    assert values.grad.tolist() == pytest.approx([0.0 if clip_value else 0.25 * (1 - 3), 0.25 * (2 - 1)])


def test_ppo_loss_inside_the_clip_is_the_policy_gradient():
    from hogwild_dqn.algorithms.ppo import Minibatch, ppo_loss

    logits = torch.zeros(2, 2, requires_grad=True)
    batch = Minibatch(torch.tensor([0, 1]), f(math.log(0.5), math.log(0.5)), f(0, 0), f(1, -1), f(0, 0))
    loss, info = ppo_loss((logits, torch.zeros(2)), batch, clip=0.2, value_coef=0.0, entropy_beta=0.0,
                          clip_value=False)
    loss.backward()
    # ratio 1: d(-A r)/d logits = -A * (onehot - pi) / 2 rows: row 0 [-0.25, 0.25], row 1 (A = -1, a = 1) the same
    assert logits.grad.flatten().tolist() == pytest.approx([-0.25, 0.25, -0.25, 0.25])
    assert info["losses/clip_fraction"].item() == 0.0 and info["losses/approx_kl"].item() == pytest.approx(0.0)


def _q_lambda_by_hand(r, v, term, trunc, gamma, lam):
    """Q(lambda) targets written the long way: G_t = r_t + gamma * v_{t+1} where the trajectory is cut (the last
    step, a truncation), r_t after a terminal, else r_t + gamma * ((1 - lam) * v_{t+1} + lam * G_{t+1})."""
    T, out = len(r), [0.0] * len(r)
    for t in reversed(range(T)):
        if term[t]:
            out[t] = r[t]
        elif t == T - 1 or trunc[t]:
            out[t] = r[t] + gamma * v[t]
        else:
            out[t] = r[t] + gamma * ((1 - lam) * v[t] + lam * out[t + 1])
    return out


def test_q_lambda_targets_follow_the_recursion_through_a_terminal_and_a_truncation():
    """A rollout of 6 steps: a game terminates after step 1, a time limit cuts the next after step 3, the rollout
    ends after step 5; next_values are max_a Q(s_{t+1}, a) (at the cut, of the cut game's last observation)."""
    r = [1.0, 0.5, 0.0, 2.0, -1.0, 0.25]
    v = [3.0, 9.0, 1.5, 4.0, 2.0, 6.0]  # v[1]: after a terminal, never used
    term = [False, True, False, False, False, False]
    trunc = [False, False, False, True, False, False]
    gamma, lam = 0.9, 0.65
    got = q_lambda_targets(torch.tensor(r), torch.tensor(v), torch.tensor(term), torch.tensor(trunc), gamma, lam)
    want = _q_lambda_by_hand(r, v, term, trunc, gamma, lam)
    assert got.tolist() == pytest.approx(want)
    # the numbers themselves, for the steps next to each end
    assert got[5].item() == pytest.approx(0.25 + 0.9 * 6.0)           # the rollout's end: the bootstrap
    assert got[3].item() == pytest.approx(2.0 + 0.9 * 4.0)            # the time limit: its last state's max Q
    assert got[1].item() == pytest.approx(0.5)                        # the terminal: its reward alone
    g2 = 0.0 + 0.9 * (0.35 * 1.5 + 0.65 * got[3].item())
    assert got[2].item() == pytest.approx(g2)
    assert got[0].item() == pytest.approx(1.0 + 0.9 * (0.35 * 3.0 + 0.65 * 0.5))


def test_q_lambda_at_zero_is_one_step_q_and_at_one_the_n_step_return():
    gen = torch.Generator().manual_seed(3)
    r, v = torch.randn(4, 9, generator=gen), torch.randn(4, 9, generator=gen)
    term, trunc = torch.rand(4, 9, generator=gen) < 0.2, torch.rand(4, 9, generator=gen) < 0.2
    term &= ~trunc
    torch.testing.assert_close(q_lambda_targets(r, v, term, trunc, 0.99, 0.0), one_step_targets(r, term, v, 0.99))
    torch.testing.assert_close(q_lambda_targets(r, v, term, trunc, 0.99, 1.0), n_step_returns(r, term, trunc, v, 0.99))
    for row in range(4):  # games side by side: each row on its own
        want = _q_lambda_by_hand(r[row].tolist(), v[row].tolist(), term[row].tolist(), trunc[row].tolist(), 0.99, 0.5)
        assert q_lambda_targets(r, v, term, trunc, 0.99, 0.5)[row].tolist() == pytest.approx(want, abs=1e-5)


def test_pqn_loss_by_hand():
    q = torch.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]], requires_grad=True)
    actions, targets = torch.tensor([1, 2]), torch.tensor([3.0, 2.0])
    loss, info = pqn_loss(q, actions, targets)
    assert loss.item() == pytest.approx(0.5 * ((3.0 - 2.0) ** 2 + (2.0 - 3.0) ** 2) / 2)
    loss.backward()
    assert q.grad.tolist() == [[0.0, -0.5, 0.0], [0.0, 0.0, 0.5]]  # only the actions taken move
    assert info["losses/q_mean"].item() == pytest.approx(2.5)
