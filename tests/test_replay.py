"""The replay memory on a real ALE game and CartPole, n-step folding, the DQN loss against hand-computed
values, and the memory check."""

import dataclasses

import numpy as np
import pytest
import torch

from hogwild_dqn.algorithms.dqn import Batch, dqn_loss
from hogwild_dqn.config import Config
from hogwild_dqn.envs import make_env
from hogwild_dqn.replay_memory import NStep, ReplayMemory


def _play(env, memory: ReplayMemory, steps: int, n: int, gamma: float, seed: int = 0):
    """Random play into the memory; return every transition as the env gave it, in the memory's order."""
    rng, nstep, given = np.random.default_rng(seed), NStep(n, gamma), []
    obs, _ = env.reset()
    refs, pending = memory.add_first(obs), []
    for _ in range(steps):
        a = int(rng.integers(env.action_space.n))
        nxt, r, term, trunc, _ = env.step(a)
        next_refs = memory.add_next(refs, nxt)
        pending.append((np.array(obs), a, float(r)))
        for t in nstep.push(refs, a, float(r), next_refs, bool(term), bool(trunc)):
            memory.add(*t)
            o, act, _ = pending.pop(0)
            m = len(pending) + 1 if (term or trunc) else n
            given.append((o, act, np.array(nxt), bool(term), m))
        if term or trunc:
            obs, _ = env.reset()
            refs, pending = memory.add_first(obs), []
        else:
            obs, refs = nxt, next_refs
    return given


@pytest.mark.parametrize("n", [1, 3])
def test_stacked_frames_come_back_as_the_env_gave_them_across_episode_ends(n):
    """Pong with life-loss training wrappers and 500-step games: 1,500 steps through a memory of 400
    transitions (the frame ring wraps several times); every live transition's stacks equal the env's."""
    cfg = dataclasses.replace(Config(game="Pong"), max_episode_frames=2000)
    env = make_env(cfg, 3, for_eval=False)
    memory = ReplayMemory(400, (4, 84, 84), pixels=True)
    given = _play(env, memory, 1500, n, 0.99)
    env.close()
    first, end = memory._live()
    assert end == len(given) and 350 <= end - first <= 400  # nearly full after wrapping
    obs, actions, returns, nxt, terminated, discounts = memory._gather(np.arange(first, end))
    assert obs.dtype == torch.uint8 and obs.shape == (end - first, 4, 84, 84)
    ends = 0
    for k, i in enumerate(range(first, end)):
        o, a, next_obs, term, m = given[i]
        assert np.array_equal(obs[k].numpy(), o) and np.array_equal(nxt[k].numpy(), next_obs)
        assert actions[k] == a and bool(terminated[k]) == term and discounts[k] == pytest.approx(0.99 ** m)
        ends += m < n
    assert n == 1 or ends > 0  # episodes ended inside the window: the short returns were checked too
    batch = memory.sample(32, np.random.default_rng(0))
    assert batch[0].shape == (32, 4, 84, 84) and batch[3].shape == (32, 4, 84, 84)


def test_vector_observations_and_the_newest_batch():
    env = make_env(Config(game="CartPole-v1"), 1, for_eval=False)
    memory = ReplayMemory(50, (4,), pixels=False)
    given = _play(env, memory, 120, 1, 0.9)
    env.close()
    obs, actions, _, nxt, terminated, _ = memory.latest(5)
    assert obs.dtype == torch.float32 and obs.shape == (5, 4)
    for k, (o, a, next_obs, term, _) in enumerate(given[-5:]):
        assert np.allclose(obs[k].numpy(), o) and np.allclose(nxt[k].numpy(), next_obs)
        assert actions[k] == a and bool(terminated[k]) == term
    assert len(memory) <= 50


def test_n_step_folding_stops_at_the_end_of_an_episode():
    fold = NStep(3, 0.5)
    assert fold.push("s0", 0, 1.0, "s1", False, False) == []
    assert fold.push("s1", 1, 2.0, "s2", False, False) == []
    assert fold.push("s2", 0, 4.0, "s3", False, False) == [("s0", 0, 1 + 0.5 * 2 + 0.25 * 4, "s3", False, 0.125)]
    # the episode is truncated at s4: the two pending steps bootstrap from s4 with their own discounts
    out = fold.push("s3", 1, 8.0, "s4", False, True)
    assert out == [("s1", 1, 2 + 0.5 * 4 + 0.25 * 8, "s4", False, 0.125), ("s2", 0, 4 + 0.5 * 8, "s4", False, 0.25),
                   ("s3", 1, 8.0, "s4", False, 0.5)]
    assert fold.push("t0", 0, 1.0, "t1", True, False) == [("t0", 0, 1.0, "t1", True, 0.5)]  # terminated


def test_dqn_loss_against_hand_computed_values():
    q = torch.tensor([[1.0, 2.0], [0.5, 0.0], [3.0, -1.0]], requires_grad=True)
    next_q = torch.tensor([[4.0, 1.0], [2.0, 6.0], [5.0, 5.0]])
    online = torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 9.0]])
    batch = Batch(torch.tensor([1, 0, 0]), torch.tensor([1.0, 0.5, -1.0]), torch.tensor([False, False, True]),
                  torch.tensor([0.5, 0.25, 0.5]))
    # plain: y = R + d * max Q'(s') = 1 + 0.5*4 = 3, 0.5 + 0.25*6 = 2, -1 (terminal); Q(s,a) = 2, 0.5, 3
    # Huber: |td| = 1, 1.5, 4 -> 0.5, 1.0, 3.5; mean 5/3
    loss, info = dqn_loss(q, next_q, None, batch)
    assert loss.item() == pytest.approx(5 / 3) and info["losses/q_mean"] == pytest.approx(5.5 / 3)
    # double: the online net picks a* = 1, 0, 1; Q' rates them 1, 2, (terminal): y = 1.5, 1.0, -1
    # |td| = 0.5, 0.5, 4 -> 0.125, 0.125, 3.5; mean 3.75/3
    loss, _ = dqn_loss(q, next_q, online, batch)
    assert loss.item() == pytest.approx(3.75 / 3)
    loss.backward()
    assert q.grad[0].tolist() == pytest.approx([0.0, 0.5 / 3])  # only Q(s, a) moves


def test_a_transition_costs_one_frame_not_two_stacks():
    per = ReplayMemory.bytes_per_transition((4, 84, 84), True)
    assert 7056 < per < 7200  # one 84x84 frame, not two stacks of four: 100k transitions ~ 0.7 GB


def _dqn_run(tmp_path, frames_before: int, **values):
    """A CartPole DQN run's state as a worker sees it, resumed at `frames_before` global frames."""
    from hogwild_dqn.envs import env_spec
    from hogwild_dqn.rundir import Run, no_prior
    from hogwild_dqn.shared import new_shared_state

    cfg = Config(**{**Config(game="CartPole-v1", algo="dqn", hidden=16, mlp_layers=1, batch_size=8,
                             train_every=1, progress=False, video_steps=0).to_dict(), **values})
    spec = env_spec(cfg)
    shared = new_shared_state(cfg, spec, 1)
    shared.worker_frames[0] = frames_before
    return Run(cfg, spec, tmp_path, 1, {**no_prior(), "frames": frames_before}), shared


def test_a_resumed_dqn_worker_refills_its_own_memory_before_learning(tmp_path):
    """Resumed at 1M global frames, far past --learning-starts 500: the worker's memory starts empty, so it
    plays 500 frames of its own before its first update, never learning at once from a few transitions."""
    from hogwild_dqn.workers import run_worker

    run, shared = _dqn_run(tmp_path, 1_000_000, learning_starts=500, frames=1_000_400)
    run_worker(0, 0, run, shared)
    assert shared.frames() >= 1_000_400 and int(shared.worker_updates[0]) == 0
    run, shared = _dqn_run(tmp_path, 1_000_000, learning_starts=500, frames=1_000_700)
    run_worker(0, 0, run, shared)
    assert 150 <= int(shared.worker_updates[0]) <= 201  # one per step from its 500th transition on


def test_dqn_acts_on_the_shared_weights_without_copying_them(tmp_path):
    """Acting reads the shared network in place: the local copy (refreshed for updates only) is left alone,
    and the action is greedy on the shared weights, not on a stale copy."""
    from hogwild_dqn.algorithms.dqn import dqn_loss
    from hogwild_dqn.workers.actor_learner import ActorLearner
    from hogwild_dqn.workers.replay import Learner

    run, shared = _dqn_run(tmp_path, 0)
    learner = Learner(ActorLearner(0, 0, run, shared, games=1), dqn_loss)
    with torch.no_grad():
        for p in learner.local.parameters():
            p.zero_()  # a stale local copy: every Q-value 0, argmax 0
        shared.model.q.bias.copy_(torch.tensor([0.0, 5.0]))  # the shared network prefers action 1
    obs = np.array([0.1, -0.2, 0.3, 0.0], dtype=np.float32)
    assert learner.act(obs, 0.0) == 1
    assert all(not p.any() for p in learner.local.parameters())  # no copy was made
