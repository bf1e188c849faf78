"""The worker's action choice (A3C samples its softmax policy, Q methods act epsilon-greedily) and the loss over
several games' segments."""

import functools
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hogwild_dqn.acting import act_many
from hogwild_dqn.algorithms.returns import Segment
from hogwild_dqn.config import Config
from hogwild_dqn.distributions import sample
from hogwild_dqn.faults import NonFinite
from hogwild_dqn.networks import network_for
from hogwild_dqn.workers import WORKERS
from hogwild_dqn.workers.segments import GameStates, Rollout, segment_loss


def _net(actor_critic, head_bias):
    net = _mlp(actor_critic)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        (net.pi if actor_critic else net.q).bias.copy_(torch.tensor(head_bias))
    return net


def _mlp(actor_critic: bool):
    """A small CartPole-sized network: 4 inputs, 3 actions, one hidden layer of 8."""
    cfg = Config(algo="a3c" if actor_critic else "nq", hidden=8, mlp_layers=1)
    return network_for(cfg, SimpleNamespace(obs_shape=(4,), n_actions=3))


def test_a3c_samples_its_policy():
    net, rng = _net(True, [math.log(0.2), math.log(0.5), math.log(0.3)]), np.random.default_rng(0)
    counts = np.bincount([act_many(net, torch.zeros(1, 4), 0.0, True, rng)[0] for _ in range(20_000)], minlength=3)
    assert (counts / counts.sum()).tolist() == pytest.approx([0.2, 0.5, 0.3], abs=0.015)


def test_continuous_actions_are_drawn_from_each_rows_gaussian_unclipped():
    # row 0: mean 1, variance 4; row 1: mean -3, variance 0.25 (beyond Pendulum's bound of 2: the env clips)
    policy = torch.tensor([[[1.0], [4.0]], [[-3.0], [0.25]]])
    rng = np.random.default_rng(0)
    draws = np.array([sample(policy, rng) for _ in range(20_000)])[..., 0]  # (draws, rows)
    assert draws.mean(0).tolist() == pytest.approx([1.0, -3.0], abs=0.04)
    assert draws.std(0).tolist() == pytest.approx([2.0, 0.5], abs=0.03)
    with pytest.raises(NonFinite, match="non-finite policy"):
        sample(torch.tensor([[[float("nan")], [1.0]]]), rng)


def test_q_methods_are_epsilon_greedy():
    net, rng = _net(False, [0.0, 1.0, 0.5]), np.random.default_rng(0)
    counts = np.bincount([act_many(net, torch.zeros(1, 4), 0.3, False, rng)[0] for _ in range(20_000)], minlength=3)
    # greedy action 1 with 1 - 0.3 + 0.3/3, each other action 0.3/3
    assert (counts / counts.sum()).tolist() == pytest.approx([0.1, 0.8, 0.1], abs=0.015)


def test_non_finite_policy_is_reported():
    net = _net(True, [0.0, float("nan"), 0.0])
    with pytest.raises(NonFinite, match="non-finite policy"):
        act_many(net, torch.zeros(1, 4), 0.0, True, np.random.default_rng(0))


def _row_policy_net():
    """The real A3C MLP network, set so that row i's logits are its own observation's first 3 entries."""
    net = _mlp(True)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        net.torso.body[0].weight[:4, :4] = torch.eye(4)
        net.pi.weight[:, :3] = torch.eye(3)
    return net


def test_act_many_samples_each_rows_own_policy():
    net, rng = _row_policy_net(), np.random.default_rng(0)
    obs = torch.tensor([[8.0, 0.0, 0.0, 0.0], [0.0, 0.0, 8.0, 0.0]])  # row 0 ~always action 0, row 1 action 2
    picks = np.array([act_many(net, obs, 0.0, True, rng) for _ in range(2000)])
    assert (picks[:, 0] == 0).mean() > 0.99 and (picks[:, 1] == 2).mean() > 0.99


def test_act_many_explores_each_row_on_its_own():
    net, rng = _net(False, [0.0, 1.0, 0.5]), np.random.default_rng(0)
    picks = np.array([act_many(net, torch.zeros(4, 4), 0.3, False, rng) for _ in range(5000)])
    for row in picks.T:  # every row epsilon-greedy with the right rates
        assert (np.bincount(row, minlength=3) / len(row)).tolist() == pytest.approx([0.1, 0.8, 0.1], abs=0.02)
    assert len({tuple(p) for p in picks}) > 20  # rows draw independently, not one choice copied to all


HP = {"gamma": 0.9, "entropy_beta": 0.01, "value_coef": 0.5}


def _games_of_unequal_length(state0=None) -> tuple[Rollout, list[int]]:
    """3 games' segments of up to 4 steps of 4-number observations; game 1's episode ends after 2 steps."""
    E, T = 3, 4
    obs, actions, rewards = torch.randn(E, T + 1, 4), torch.randint(0, 3, (E, T + 1)), torch.randn(E, T)
    terminated = torch.zeros(E, T, dtype=torch.bool)
    terminated[1, 1] = True
    return Rollout(obs, actions, rewards, terminated, torch.zeros(E, T, dtype=torch.bool), state0), [4, 2, 4]


@pytest.mark.parametrize("algo", ["a3c", "nq", "sarsa1"])
def test_segment_loss_is_the_mean_of_each_games_loss(algo):
    """Games of unequal length (one ended after 2 steps) batched in one forward give the mean of the losses and
    gradients computed game by game."""
    torch.manual_seed(0)
    ac = algo == "a3c"
    net, target = _mlp(ac), None if ac else _mlp(False)
    rollout, n = _games_of_unequal_length()
    obs, actions, rewards, terminated, truncated, _ = rollout
    E, hp = len(n), HP
    loss, info = segment_loss(net, target, functools.partial(WORKERS[algo].loss, **hp), rollout, n)
    loss.backward()
    batched = [p.grad.clone() for p in net.parameters()]

    net.zero_grad()
    want, infos = 0.0, []
    for k in range(E):
        m = n[k]
        seg = Segment(actions[k, :m], rewards[k, :m], terminated[k, :m], truncated[k, :m], actions[k, 1:m + 1])
        tq = None if target is None else target(obs[k, 1:m + 1]).detach()
        loss_k, info_k = WORKERS[algo].loss(net(obs[k, :m + 1]), tq, seg, **hp)
        want, infos = want + loss_k / E, infos + [info_k]
    want.backward()
    assert loss.item() == pytest.approx(want.item(), rel=1e-5)
    for got, exp in zip(batched, (p.grad for p in net.parameters()), strict=True):
        torch.testing.assert_close(got, exp, rtol=1e-4, atol=1e-6)
    for key in info:
        assert float(info[key]) == pytest.approx(sum(float(i[key]) for i in infos) / E, rel=1e-5)


def _lstm_net():
    cfg = Config(algo="a3c", net="lstm", hidden=8, mlp_layers=1)
    return network_for(cfg, SimpleNamespace(obs_shape=(4,), n_actions=3))


def test_lstm_segment_loss_replays_each_game_from_its_state_at_the_segments_start():
    """With --net lstm the loss of games of unequal length, unrolled in one batch from each game's (h, c), is the
    mean of the losses (and gradients) of stepping each game's network one observation at a time from that
    state; the state itself gets no gradient (truncated backpropagation through time)."""
    torch.manual_seed(0)
    net = _lstm_net()
    state0 = (torch.randn(3, 256), torch.randn(3, 256))
    rollout, n = _games_of_unequal_length(state0)
    obs, actions, rewards, terminated, truncated, _ = rollout
    E = len(n)
    loss_fn = functools.partial(WORKERS["a3c"].loss, **HP)
    loss, _ = segment_loss(net, None, loss_fn, rollout, n)
    loss.backward()
    batched = [p.grad.clone() for p in net.parameters()]

    net.zero_grad()
    want = 0.0
    for k in range(E):
        m, state, logits, values = n[k], (state0[0][k:k + 1], state0[1][k:k + 1]), [], []
        for t in range(m + 1):
            lg, v, state = net(obs[k, t:t + 1], state)
            logits, values = logits + [lg], values + [v]
        seg = Segment(actions[k, :m], rewards[k, :m], terminated[k, :m], truncated[k, :m], actions[k, 1:m + 1])
        want = want + loss_fn((torch.cat(logits), torch.cat(values)), None, seg)[0] / E
    want.backward()
    assert loss.item() == pytest.approx(want.item(), rel=1e-5)
    for got, exp in zip(batched, (p.grad for p in net.parameters()), strict=True):
        torch.testing.assert_close(got, exp, rtol=1e-4, atol=1e-6)


def test_game_states_step_their_own_rows_and_restart_at_an_episodes_end():
    torch.manual_seed(0)
    net, rng = _lstm_net(), np.random.default_rng(0)
    states = GameStates(net, 3)
    start = states.start()
    obs = torch.randn(2, 4)
    actions = states.act(net, [0, 2], obs, rng)
    assert states.h.grad_fn is None and not states.start()[0].requires_grad  # no graph reaches past a segment
    assert len(actions) == 2 and all(a in (0, 1, 2) for a in actions)
    _, _, (h, c) = net(obs, (start[0][[0, 2]], start[1][[0, 2]]))
    torch.testing.assert_close(states.h[[0, 2]], h)
    torch.testing.assert_close(states.c[[0, 2]], c)
    assert not states.h[1].any() and not start[0].any()  # row 1 did not act; the segment's start is a copy
    states.end_game(2)
    assert not states.h[2].any() and not states.c[2].any() and states.h[0].any()


def test_act_many_explores_with_each_rows_own_epsilon():
    """Per-game epsilons: a row with epsilon 0 is always greedy, a row with epsilon 1 always random."""
    torch.manual_seed(0)
    net, rng = _mlp(False), np.random.default_rng(0)
    obs = torch.randn(2, 4)
    greedy = int(net(obs[:1]).argmax())
    picks = np.array([act_many(net, obs, np.array([0.0, 1.0]), False, rng) for _ in range(3000)])
    assert set(picks[:, 0]) == {greedy}
    assert np.bincount(picks[:, 1], minlength=3) == pytest.approx([1000, 1000, 1000], abs=120)


def test_each_game_of_a_worker_explores_with_its_own_final_epsilon(tmp_path):
    """A real Q-learning worker with 8 CartPole games: 8 final epsilons drawn and kept in shared memory (for
    checkpoints), not one for the worker; a restarted worker keeps them."""
    from hogwild_dqn.envs import env_spec
    from hogwild_dqn.rundir import Run
    from hogwild_dqn.shared import new_shared_state
    from hogwild_dqn.workers import run_worker

    cfg = Config(game="CartPole-v1", algo="q1", envs_per_worker=8, hidden=8, mlp_layers=1, frames=400, seed=3,
                 eps_anneal_frames=200, progress=False, video_steps=0)
    spec = env_spec(cfg)
    shared = new_shared_state(cfg, spec, 2)
    run = Run(cfg, spec, tmp_path, 2)
    run_worker(1, 0, run, shared)
    finals = shared.worker_eps[1].clone()
    assert finals.shape == (8,) and len(set(finals.tolist())) > 1 and set(finals.tolist()) <= {0.1, 0.01, 0.5}
    assert torch.isnan(shared.worker_eps[0]).all()  # worker 0 has not drawn yet
    shared.worker_frames.zero_()
    run_worker(1, 1, run, shared)  # restarted: new streams, the same exploration
    assert torch.equal(shared.worker_eps[1], finals)
