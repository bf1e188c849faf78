"""Playing a trained agent: `make play`, `python -m hogwild_dqn.play` and `hogwild_dqn.load_policy`, on a real
CartPole run trained in this test session (conftest.cartpole_a3c); bad run dirs get one line and exit 2."""

import dataclasses
import math
import re
import shutil
import subprocess
import sys
from types import SimpleNamespace

import imageio.v2 as imageio
import numpy as np
import pytest
import torch

import hogwild_dqn
from hogwild_dqn.config import Config, ConfigError
from hogwild_dqn.networks import network_for
from hogwild_dqn.policy import Policy, play_episode
from tests.conftest import read_summary, run_cmd, run_train


@pytest.fixture(scope="module")
def trained(cartpole_a3c, tmp_path_factory):
    """A copy of the shared A3C CartPole run (conftest.cartpole_a3c: stopped at its first evaluation >= 400),
    since playing writes play.mp4 into the run dir."""
    run = tmp_path_factory.mktemp("play") / "cartpole"
    shutil.copytree(cartpole_a3c, run)
    return run


def _play(*args, make=False) -> subprocess.CompletedProcess:
    cmd = (["make", "--no-print-directory", "play", *args] if make
           else [sys.executable, "-m", "hogwild_dqn.play", *map(str, args)])
    return run_cmd(cmd, 600)


def test_make_play_scores_as_the_evaluator_recorded_and_writes_a_video(trained):
    recorded = read_summary(trained)["final_eval"]  # the last weights over 30 games: the run's score
    proc = _play(f"RUN={trained}", "EPISODES=10", make=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    games = [float(g) for g in re.findall(r"^game \d+: (\S+)$", proc.stdout, re.M)]
    assert len(games) == 10 and f"{trained / 'checkpoint.pt'}: the last weights, a3c on CartPole-v1" in proc.stdout
    m = re.search(r"^mean (\S+) ± (\S+) over 10 games, min (\S+), max (\S+); video (\S+)$", proc.stdout, re.M)
    assert m, proc.stdout
    mean, std, low, high = map(float, m.groups()[:4])
    assert math.isclose(mean, np.mean(games)) and low == min(games) and high == max(games)
    # other seeds than the evaluator's: equal within the noise of both samples (and CartPole's cap of 500)
    noise = 3 * math.sqrt(recorded["std_return"] ** 2 / recorded["episodes"] + std ** 2 / 10) + 25
    assert abs(mean - recorded["mean_return"]) <= noise, (mean, recorded)
    video = trained / "play.mp4"
    assert m.group(5) == str(video)
    with imageio.get_reader(video) as reader:
        frames = reader.count_frames()
        first = reader.get_data(0)
    assert frames == games[0]  # CartPole pays 1 per step: one screen per step of the first game
    assert first.shape == (400, 600, 3) and first.std() > 0


def test_load_policy_acts_on_the_env_make_env_builds(trained):
    """The last weights by default (before the fix: best.pt, the maximum of noisy 5-game evaluations)."""
    policy = hogwild_dqn.load_policy(trained)
    assert policy.source == trained / "checkpoint.pt" and policy.cfg.game == "CartPole-v1" and policy.frames > 0
    assert policy.frames == read_summary(trained)["final_eval"]["frames"]  # the weights the score is about
    env = hogwild_dqn.make_env(policy.cfg, seed=123, for_eval=True)
    try:
        scores = [play_episode(policy, env) for _ in range(3)]
    finally:
        env.close()
    summary = read_summary(trained)
    assert np.mean(scores) >= summary["best_eval_return"] / 2, scores  # a trained agent, not a random one (~22)
    assert hogwild_dqn.load_policy(trained, best=True).source == trained / "best.pt"
    (trained / "best.pt").rename(trained / "best.pt.away")
    try:
        with pytest.raises(ConfigError, match="holds no best.pt"):
            hogwild_dqn.load_policy(trained, best=True)
    finally:
        (trained / "best.pt.away").rename(trained / "best.pt")
    proc = _play(trained, "--episodes", "1", "--best", "--no-video")
    assert proc.returncode == 0 and f"{trained / 'best.pt'}: the best periodic evaluation's weights" in proc.stdout


def test_q_policy_is_epsilon_greedy():
    cfg = dataclasses.replace(Config(game="CartPole-v1", algo="nq"), eval_epsilon=0.0)
    net = network_for(dataclasses.replace(cfg, hidden=8, mlp_layers=1), SimpleNamespace(obs_shape=(4,), n_actions=2))
    obs = np.array([0.1, -0.2, 0.3, 0.0], dtype=np.float32)
    greedy = int(net(torch.as_tensor(obs).unsqueeze(0)).argmax())
    assert {Policy(net, cfg, seed=s).act(obs) for s in range(20)} == {greedy}
    explore = Policy(net, dataclasses.replace(cfg, eval_epsilon=1.0), seed=0)
    assert {explore.act(obs) for _ in range(100)} == {0, 1}


def test_lstm_policy_carries_its_state_through_a_game_and_restarts_it_at_the_next():
    cfg = Config(game="CartPoleNoVel-v1", algo="a3c", net="lstm", hidden=8, mlp_layers=1)
    policy = Policy(network_for(cfg, SimpleNamespace(obs_shape=(2,), n_actions=2)), cfg, seed=0)
    assert not policy.state[0].any()
    env = hogwild_dqn.make_env(cfg, seed=5, for_eval=True)
    try:
        obs, _ = env.reset()
        policy.act(obs)
        h1 = policy.state[0].clone()
        policy.act(obs)
        assert h1.any() and not torch.equal(policy.state[0], h1)  # carried and stepped, not recomputed from zeros
        play_episode(policy, env)  # a whole game: starts from zeros, ends somewhere else
        assert policy.state[0].any()
        policy.reset()
        assert not policy.state[0].any() and not policy.state[1].any()
    finally:
        env.close()


@pytest.mark.parametrize("setup, message", [
    (lambda d: None, "does not exist"),
    (lambda d: d.mkdir(), "holds no checkpoint.pt; is it a hogwild_dqn run dir"),
    (lambda d: (d.mkdir(), (d / "checkpoint.pt").write_text("junk")), "truncated or corrupted"),
    (lambda d: (d.mkdir(), torch.save({"weights": 1}, d / "checkpoint.pt")), "is not a hogwild_dqn checkpoint"),
])
def test_bad_run_dir_is_one_line_and_exit_2(tmp_path, setup, message):
    run = tmp_path / "run"
    setup(run)
    before = {p.name: p.read_bytes() for p in run.iterdir()} if run.is_dir() else None
    proc = _play(run)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("play: error: ") and message in proc.stderr and proc.stderr.count("\n") == 1
    assert ({p.name: p.read_bytes() for p in run.iterdir()} if run.is_dir() else None) == before  # untouched


def test_make_play_without_a_run_names_the_variable():
    proc = _play(make=True)
    assert proc.returncode != 0 and "make play RUN=" in proc.stderr


def test_deterministic_a3c_policy_takes_the_most_likely_action_or_the_mean():
    """--deterministic-eval / load_policy(deterministic=True): the argmax of the logits, the Gaussian's mean;
    without it A3C samples."""
    torch.manual_seed(0)
    cfg = Config(game="CartPole-v1", algo="a3c", hidden=8, mlp_layers=1)
    net = network_for(cfg, SimpleNamespace(obs_shape=(4,), n_actions=3))
    with torch.no_grad():
        net.pi.bias.copy_(torch.tensor([0.0, 1.0, 0.0]))  # action 1 most likely (about 58%), not certain
    obs = np.zeros(4, dtype=np.float32)
    best = int(net(torch.as_tensor(obs).unsqueeze(0))[0].argmax())
    assert {Policy(net, cfg, seed=s, deterministic=True).act(obs) for s in range(30)} == {best}
    assert len({Policy(net, cfg, seed=s).act(obs) for s in range(30)}) > 1
    assert Policy(net, dataclasses.replace(cfg, deterministic_eval=True)).deterministic
    gcfg = Config(game="Pendulum-v1", algo="a3c", hidden=8, mlp_layers=1)
    gnet = network_for(gcfg, SimpleNamespace(obs_shape=(3,), n_actions=1, continuous=True))
    mean = gnet(torch.zeros(1, 3))[0][0, 0].detach().numpy()
    assert np.array_equal(Policy(gnet, gcfg, deterministic=True).act(np.zeros(3, np.float32)), mean)


def test_load_policy_can_be_deterministic_and_take_the_last_weights(trained):
    policy = hogwild_dqn.load_policy(trained, deterministic=True)
    assert policy.deterministic and not hogwild_dqn.load_policy(trained).deterministic
    last = hogwild_dqn.load_policy(trained, last=True)
    assert last.source == trained / "checkpoint.pt" and last.frames == read_summary(trained)["frames"]
    proc = _play(trained, "--episodes", "1", "--last", "--no-video")  # --last: the default, still accepted
    assert proc.returncode == 0 and f"{trained / 'checkpoint.pt'}: the last weights, a3c on CartPole-v1" \
        in proc.stdout, proc.stderr


def test_play_epsilon_overrides_the_q_runs_evaluation_epsilon_and_is_refused_elsewhere(trained, tmp_path):
    run = tmp_path / "q1"
    proc = run_train("--game", "CartPole-v1", "--algo", "q1", "--threads", 1, "--frames", 2000, "--eval-every", 1000,
                     "--run-dir", run, "--final-eval-episodes", 1)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = _play(run, "--episodes", "2", "--last", "--no-video", "--epsilon", "0.3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 games on cpu, epsilon-greedy (epsilon 0.3)" in proc.stdout
    assert "epsilon-greedy (epsilon 0.05)" in _play(run, "--episodes", "1", "--no-video").stdout  # the run's own
    assert hogwild_dqn.load_policy(run, epsilon=0.2).cfg.eval_epsilon == 0.2  # the Python API's override
    with pytest.raises(ConfigError, match=r"--epsilon must be in \[0, 1\], got 1.5"):  # the API's check too
        hogwild_dqn.load_policy(run, epsilon=1.5)
    for target, args, message in [(run, ["--epsilon", "1.5"], "--epsilon must be in [0, 1], got 1.5"),
                                  (trained, ["--epsilon", "0.1"], "--epsilon is for the Q methods")]:
        proc = _play(target, "--no-video", *args)
        assert proc.returncode == 2 and proc.stdout == "", proc.stdout
        assert proc.stderr.startswith("play: error: ") and message in proc.stderr and proc.stderr.count("\n") == 1
