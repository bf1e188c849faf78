"""Asynchronous Q(lambda)'s worker (--algo pqn): a real rollout inline (its targets from the weights synced after
it, bootstrapped at a time limit from the cut game's last state), its minibatches reaching the shared model, its
network's LayerNorm, and train.py, play and load_policy on a real run. Its maths: test_algorithms.py; that it
learns CartPole: test_learning.py."""

import sys

import gymnasium as gym
import pytest
import torch
from torch import nn

from hogwild_dqn.algorithms.pqn import pqn_loss
from hogwild_dqn.algorithms.returns import q_lambda_targets
from hogwild_dqn.config import Config, load
from hogwild_dqn.envs import env_spec
from hogwild_dqn.networks import network_for
from hogwild_dqn.rundir import Run
from hogwild_dqn.shared import new_shared_state
from hogwild_dqn.workers.actor_learner import ActorLearner
from hogwild_dqn.workers.rollouts import QLambda
from tests.conftest import ROOT, read_summary, run_cmd, run_train
from tests.test_ppo import Observations


def _worker(tmp_path, **values):
    cfg = Config(**{"game": "CartPole-v1", "algo": "pqn", "envs_per_worker": 2, "t_max": 7, "hidden": 8,
                    "mlp_layers": 1, "frames": 10**6, "progress": False, "video_steps": 0, "minibatches": 2,
                    "epochs": 3, "layer_norm": True, "optimizer": "radam", **values})
    spec = env_spec(cfg)
    shared = new_shared_state(cfg, spec, 1)
    return cfg, shared, ActorLearner(0, 0, Run(cfg, spec, tmp_path, 1), shared, cfg.envs_per_worker)


def test_targets_come_from_the_weights_synced_after_the_rollout_and_bootstrap_a_cut_game(tmp_path):
    """CartPole games cut every 3 steps: the target of a cut step bootstraps from max Q of the cut game's last
    state, not from the next game's first; the targets use the shared weights as they are after the rollout
    (another worker's updates in), not the acting ones."""
    cfg, shared, worker = _worker(tmp_path)
    worker.envs = [gym.wrappers.TimeLimit(Observations(e), 3) for e in worker.envs]
    pqn = QLambda(worker, pqn_loss)
    pqn.sync()
    ro = pqn.rollout
    ro.play(lambda t, obs: [0, 1])
    assert ro.truncated[:, 2].all() and ro.truncated[:, 5].all() and not ro.terminated.any()
    with torch.no_grad():  # another worker's updates, in the shared weights after the rollout
        for p in shared.model.parameters():
            p.add_(0.1 * torch.randn_like(p))
        net = shared.model
        last = [env.env.seen for env in worker.envs]
        v = torch.empty(2, 7)
        for k in range(2):
            for t in range(7):
                state = last[k][t] if t in (2, 5) else ro.obs[k, t + 1] if t < 6 else ro.current[k]
                v[k, t] = net(state[None]).max(-1).values[0]
    want = q_lambda_targets(ro.rewards, v, ro.terminated, ro.truncated, cfg.gamma, cfg.q_lambda)
    torch.testing.assert_close(pqn.targets(), want, atol=1e-5, rtol=1e-5)


def test_a_step_pushes_every_minibatch_into_the_shared_model_and_counts_its_frames(tmp_path):
    cfg, shared, worker = _worker(tmp_path)
    pqn = QLambda(worker, pqn_loss)
    before = [p.detach().clone() for p in shared.model.parameters()]
    frames = shared.frames()
    pqn.step()
    assert int(shared.worker_updates[0]) == 3 * 2 and shared.frames() == frames + 2 * 7
    assert int(shared.optimizer.steps.sum()) == 3 * 2  # RAdam's step count: one per minibatch
    assert all(not torch.equal(b, p) for b, p in zip(before, shared.model.parameters(), strict=True))


def test_layer_norm_follows_every_hidden_layer_of_the_q_network():
    """pqn's preset: GroupNorm(1, C) after each of the torso's convolutions, LayerNorm after its fc, each before its
    ReLU; a Q method without the flag has none, with it the same places; PQN's Nature network takes them too."""
    spec = env_spec(Config(game="Pong"))
    cfg = load(["--game", "Pong", "--algo", "pqn"])[0]
    net = network_for(cfg, spec)
    conv, fc = net.torso.conv, net.torso.fc
    # the paper's two convolutions; their last ReLU is the fc's first step
    assert [type(m).__name__ for m in conv] == ["Conv2d", "GroupNorm", "ReLU", "Conv2d", "GroupNorm"]
    assert [m.num_channels for m in conv if isinstance(m, nn.GroupNorm)] == [16, 32]
    nature = network_for(load(["--game", "Pong", "--algo", "pqn", "--torso", "nature", "--hidden", "512"])[0], spec)
    assert [m.num_channels for m in nature.torso.conv if isinstance(m, nn.GroupNorm)] == [32, 64, 64]
    assert all(m.num_groups == 1 for m in conv if isinstance(m, nn.GroupNorm))  # over channels and pixels
    assert [type(m).__name__ for m in fc] == ["Flatten", "Linear", "LayerNorm", "ReLU"]
    x = torch.randint(0, 255, (3, *spec.obs_shape), dtype=torch.uint8)
    assert net(x).shape == (3, spec.n_actions)
    torch.testing.assert_close(net.from_inputs(net.inputs(x)), net(x))
    plain = network_for(load(["--game", "Pong", "--algo", "nq"])[0], spec)
    assert not any(isinstance(m, (nn.GroupNorm, nn.LayerNorm)) for m in plain.modules())
    normed = network_for(load(["--game", "Pong", "--algo", "nq", "--layer-norm"])[0], spec)
    assert sum(isinstance(m, (nn.GroupNorm, nn.LayerNorm)) for m in normed.modules()) == 3  # the paper's 2 convs, fc
    mlp = network_for(load(["--game", "CartPole-v1", "--algo", "pqn"])[0], env_spec(Config(game="CartPole-v1")))
    assert [type(m).__name__ for m in mlp.torso.body] == ["Linear", "LayerNorm", "ReLU"] * 2


@pytest.mark.parametrize("args, message", [
    (["--q-lambda", "1.5"], "--q-lambda must lie in [0, 1], got 1.5"),
    (["--q-lambda", "-0.1"], "--q-lambda must lie in [0, 1], got -0.1"),
    (["--q-lambda", "nan"], "--q-lambda must be a finite number, got nan"),
    (["--epochs", "0"], "--epochs must be a positive integer, got 0"),
    (["--minibatches", "0"], "--minibatches must be a positive integer, got 0"),
    (["--eps-start", "0.05", "--eps-finals", "0.1", "--eps-probs", "1"], "must not lie above --eps-start 0.05"),
    (["--eps-finals", "1.5", "--eps-probs", "1"], "--eps-finals must lie in [0, 1], got [1.5]"),
    (["--algo", "a3c", "--layer-norm"], "--layer-norm is for the Q-networks"),
])
def test_bad_values_are_one_line_before_any_process_starts(tmp_path, args, message):
    proc = run_train("--game", "CartPole-v1", "--algo", "pqn", "--run-dir", tmp_path / "run", *args, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_pqn_run_trains_plays_and_loads_with_its_evaluation_epsilon(tmp_path):
    """train.py with 2 real workers on CartPole; then hogwild-play and load_policy act on its checkpoint, greedily
    but for --eval-epsilon (0.001 in the preset)."""
    run = tmp_path / "run"
    proc = run_train("--game", "CartPole-v1", "--algo", "pqn", "--threads", 2, "--frames", 8192, "--eval-every", 4096,
                     "--eval-episodes", 2, "--final-eval-episodes", 2, "--run-dir", run, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = read_summary(run)
    assert s["algo"] == "pqn" and s["frames"] >= 8192 and s["final_eval"]["episodes"] == 2
    play = run_cmd([sys.executable, "-m", "hogwild_dqn.play", run, "--episodes", 1, "--no-video"], 300, cwd=ROOT)
    assert play.returncode == 0, play.stderr[-2000:]
    from hogwild_dqn import load_policy

    policy = load_policy(run)
    assert policy.cfg.algo == "pqn" and policy.cfg.eval_epsilon == 0.001
    assert policy.act(torch.zeros(4).numpy()) in (0, 1)
