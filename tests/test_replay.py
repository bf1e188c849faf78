"""The replay memory on a real ALE game and CartPole, n-step folding, the DQN loss against hand-computed
values, and the memory check."""

import dataclasses

import numpy as np
import pytest
import torch

from hogwild_dqn.algorithms.dqn import Batch, dqn_loss
from hogwild_dqn.config import Config
from hogwild_dqn.envs import make_env
from hogwild_dqn.replay import NStep, ReplayMemory, check_memory


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


def test_memory_check_gives_both_figures():
    per = ReplayMemory.bytes_per_transition((4, 84, 84), True)
    assert 7056 < per < 7200  # one 84x84 frame, not two stacks of four: 100k transitions ~ 0.7 GB
    assert check_memory(2, 100_000, (4, 84, 84), True, 24 * 2**30) is None
    why = check_memory(2, 1_000_000, (4, 84, 84), True, 8 * 2**30)
    assert why == ("2 workers x --replay-size 1,000,000 transitions need 13.3 GiB of replay memory; 8.0 GiB is "
                   "available (at most three quarters of it may go to replay)")
