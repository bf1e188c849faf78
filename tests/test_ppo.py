"""PPO's worker: a real rollout inline (its bootstrap at a time limit), and train.py on Pong with 2 worker
processes logging the policy lag, clip fraction and approximate KL. Its maths: test_algorithms.py; that it
learns CartPole: test_learning.py."""

import gymnasium as gym
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from hogwild_dqn.algorithms.ppo import ppo_loss
from hogwild_dqn.config import Config
from tests.conftest import read_summary, run_train


class Observations(gym.Wrapper):
    """Keeps the observation of each step (a real env; the test reads what a truncated game's last state was)."""

    def __init__(self, env):
        super().__init__(env)
        self.seen = []

    def step(self, action):
        out = self.env.step(action)
        self.seen.append(torch.as_tensor(out[0]))
        return out


def test_a_rollout_bootstraps_a_truncated_game_from_its_last_state(tmp_path):
    """CartPole games cut every 3 steps (a time limit): V(s_{t+1}) at the cut is the network's value of the
    state the cut game ended in, not of the next game's first state, which the rollout holds next."""
    from hogwild_dqn.envs import env_spec
    from hogwild_dqn.rundir import Run
    from hogwild_dqn.shared import new_shared_state
    from hogwild_dqn.workers.actor_learner import ActorLearner
    from hogwild_dqn.workers.rollouts import PPO

    cfg = Config(game="CartPole-v1", algo="ppo", envs_per_worker=2, t_max=7, hidden=8, mlp_layers=1, frames=10**6,
                 progress=False, video_steps=0, minibatches=2)
    spec = env_spec(cfg)
    shared = new_shared_state(cfg, spec, 1)
    worker = ActorLearner(0, 0, Run(cfg, spec, tmp_path, 1), shared, cfg.envs_per_worker)
    worker.envs = [gym.wrappers.TimeLimit(Observations(e), 3) for e in worker.envs]
    ppo = PPO(worker, ppo_loss)
    ppo.local.load_state_dict(shared.model.state_dict())
    ppo.play()
    last = [env.env.seen for env in worker.envs]
    assert ppo.rollout.truncated[:, 2].all() and ppo.rollout.truncated[:, 5].all() and not ppo.rollout.terminated.any()
    with torch.no_grad():
        for k in range(2):
            for t in (2, 5):
                v = ppo.local(last[k][t][None])[1][0]
                assert torch.isclose(ppo.next_values[k, t], v, atol=1e-6)  # the cut game's last state
                assert not torch.isclose(ppo.next_values[k, t], ppo.values[k, t + 1])  # not the next game's first
            for t in (0, 1, 3, 4):
                assert ppo.next_values[k, t] == ppo.values[k, t + 1]
            assert torch.isclose(ppo.next_values[k, 6], ppo.local(ppo.rollout.current[k][None])[1][0], atol=1e-6)
    frames = shared.frames()
    ppo.step()  # a whole rollout and its 4 epochs of 2 minibatches, each pushed into the shared model
    assert int(shared.worker_updates[0]) == 4 * 2 and shared.frames() == frames + 2 * 7


def test_pong_trains_ppo_by_default_with_two_workers_and_logs_its_lag(tmp_path):
    """No --algo: an ALE game takes PPO's preset (config.DEFAULT_ALGO) and the run's first line names it."""
    run = tmp_path / "ppo"
    proc = run_train("--game", "Pong", "--threads", 2, "--frames", 8000, "--t-max", 32,
                     "--envs-per-worker", 2, "--eval-every", 8000, "--eval-episodes", 1, "--final-eval-episodes", 2,
                     "--max-episode-frames", 400, "--log-every", 4, "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[0].startswith("configs/ppo_atari.yaml: ppo-norm-vnorm on Pong, 2 workers x 2 "
                                                  "games, adam lr 0.00025 eps 1e-05")
    s = read_summary(run)
    assert s["frames"] >= 8000 and s["final_eval"]["episodes"] == 2
    events = EventAccumulator(str(run))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for w in ("w0", "w1"):
        for tag in ("losses/approx_kl", "losses/clip_fraction", "charts/policy_lag", "losses/value_loss",
                    "perf/env_seconds", "perf/act_seconds", "perf/learn_seconds"):
            assert f"{tag}/{w}" in tags, (tag, sorted(tags))
        # each log is the mean over 4 minibatches of one rollout's 16: its own earlier pushes are in the lag
        assert all(e.value >= 1.5 for e in events.Scalars(f"charts/policy_lag/{w}"))
        assert all(0 <= e.value <= 1 for e in events.Scalars(f"losses/clip_fraction/{w}"))
    # games cut at 400 frames (100 steps) within 32-step rollouts: truncations were bootstrapped, finitely
    assert {"charts/episodic_return/w0", "charts/episodic_return/w1"} & tags


def test_value_normalize_takes_advantages_on_returns_and_targets_standardized(tmp_path):
    """--value-normalize: GAE runs on the head's outputs scaled back to returns by the statistics the worker
    acted with; the rollout's returns join the shared statistics, and the value's targets are those returns
    standardized by them."""
    from hogwild_dqn.algorithms.returns import gae
    from hogwild_dqn.envs import env_spec
    from hogwild_dqn.rundir import Run
    from hogwild_dqn.shared import new_shared_state
    from hogwild_dqn.workers.actor_learner import ActorLearner
    from hogwild_dqn.workers.rollouts import PPO

    cfg = Config(game="CartPole-v1", algo="ppo", envs_per_worker=2, t_max=9, hidden=8, mlp_layers=1, frames=10**6,
                 progress=False, video_steps=0, minibatches=2, value_normalize=True, gae_lambda=0.9)
    spec = env_spec(cfg)
    shared = new_shared_state(cfg, spec, 1)
    norm = shared.model.value_norm
    norm.count.fill_(100.0)  # returns seen before: mean 5, std 2
    norm.mean.fill_(5.0)
    norm.var.fill_(4.0)
    worker = ActorLearner(0, 0, Run(cfg, spec, tmp_path, 1), shared, cfg.envs_per_worker)
    ppo = PPO(worker, ppo_loss)
    seen = {}
    ppo.learn = lambda advantages, returns, version: seen.update(advantages=advantages, returns=returns)
    ppo.step()  # sync (the local statistics become the shared ones), play, advantages, targets
    values, next_values = ppo.values * 2 + 5, ppo.next_values * 2 + 5  # the head's outputs on the return scale
    ro = ppo.rollout
    want = gae(ro.rewards, values, next_values, ro.terminated, ro.truncated, cfg.gamma, cfg.gae_lambda)
    torch.testing.assert_close(seen["advantages"], want)
    returns = (want + values).double()
    n = returns.numel()
    mean = (100 * 5 + returns.sum()) / (100 + n)
    var = (100 * 4 + n * returns.var(correction=0) + (returns.mean() - 5) ** 2 * 100 * n / (100 + n)) / (100 + n)
    assert norm.count.item() == 100 + n
    torch.testing.assert_close(norm.mean, mean)
    torch.testing.assert_close(norm.var, var)
    torch.testing.assert_close(seen["returns"], ((returns - mean) / var.sqrt()).float())
