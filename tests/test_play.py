"""Playing an agent: `python -m hogwild_dqn.play` and `hogwild_dqn.load_policy` on short real runs and hand-built
networks; bad run dirs get one line and exit 2. What needs a trained agent (the shared CartPole learning run) is in
test_play_trained.py, the second tier."""

import dataclasses
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import hogwild_dqn
from hogwild_dqn.config import Config, ConfigError
from hogwild_dqn.evaluation.games import play_episode
from hogwild_dqn.evaluation.policy import Policy
from hogwild_dqn.networks import network_for
from tests.conftest import run_cmd, run_play, start


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
    proc = run_play(run)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("play: error: ") and message in proc.stderr and proc.stderr.count("\n") == 1
    assert ({p.name: p.read_bytes() for p in run.iterdir()} if run.is_dir() else None) == before  # untouched


def test_make_play_without_a_run_names_the_variable():
    proc = run_play(make=True)
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


def test_play_epsilon_overrides_the_q_runs_evaluation_epsilon(cartpole_q1):
    run = cartpole_q1
    proc = run_play(run, "--episodes", "2", "--last", "--no-video", "--epsilon", "0.3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 games on cpu, epsilon-greedy (epsilon 0.3)" in proc.stdout
    assert "epsilon-greedy (epsilon 0.05)" in run_play(run, "--episodes", "1", "--no-video").stdout  # the run's own
    assert hogwild_dqn.load_policy(run, epsilon=0.2).cfg.eval_epsilon == 0.2  # the Python API's override
    with pytest.raises(ConfigError, match=r"--epsilon must be in \[0, 1\], got 1.5"):  # the API's check too
        hogwild_dqn.load_policy(run, epsilon=1.5)
    proc = run_play(run, "--no-video", "--epsilon", "1.5")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.startswith("play: error: ") and "--epsilon must be in [0, 1], got 1.5" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_a_negative_seed_is_one_line_for_play_and_the_probe(cartpole_q1):
    """numpy refuses a negative seed deep inside; both commands say it first, in one line."""
    proc = run_play(cartpole_q1, "--no-video", "--seed", "-1")
    assert proc.returncode == 2 and proc.stderr == "play: error: --seed must be an integer >= 0, got -1\n"
    probe = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.probe", cartpole_q1, "--seed", "-1"], 120)
    assert probe.returncode == 2 and probe.stderr == "probe: error: --seed must be an integer >= 0, got -1\n"


def test_load_policy_says_a_bad_argument_or_checkpoint_in_one_line(cartpole_q1, tmp_path):
    """The Python API checks what play's flags check (device, seed, epsilon, best with last) and turns a
    checkpoint whose values were edited, or are of another version, into one ConfigError line, not numpy's,
    torch's or a KeyError deep inside."""
    import shutil

    for kwargs, message in (({"device": "tpu"}, "--device must be cpu or cuda, got 'tpu'"),
                            ({"seed": -1}, "--seed must be an integer >= 0, got -1"),
                            ({"seed": "abc"}, "--seed must be an integer >= 0, got 'abc'"),
                            ({"epsilon": "0.5"}, "--epsilon must be in [0, 1], got '0.5'"),
                            ({"best": True, "last": True}, "--best and --last name two different files"),
                            ({"best": "no"}, "--best is true or false, got 'no'"),
                            ({"deterministic": "yes"}, "--deterministic is true or false, got 'yes'")):
        with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
            hogwild_dqn.load_policy(cartpole_q1, **kwargs)
    with pytest.raises(ConfigError, match="a run dir is a path, got 123"):
        hogwild_dqn.load_policy(123)
    with pytest.raises(ConfigError, match=r"an observation of shape \(2,\); CartPole-v1's network takes \(4,\)"):
        hogwild_dqn.load_policy(cartpole_q1).act([0.0, 0.0])
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="--device cuda: no CUDA device is available here"):
            hogwild_dqn.load_policy(cartpole_q1, device="cuda")
    good = torch.load(cartpole_q1 / "checkpoint.pt", weights_only=False)
    for key, value in (("algo", "zzz"), ("hidden", "abc"), ("obs_shape", "abc"), ("frames", "abc"),
                       ("best_eval_return", "abc"), ("game", 123), ("seed", "x"), ("game", "Acrobot-v1")):
        run = tmp_path / f"bad-{key}-{value}"
        shutil.copytree(cartpole_q1, run)
        ckpt = {**good, "config": {**good["config"]}}
        (ckpt["config"] if key in ("algo", "hidden", "game", "seed") else ckpt)[key] = value
        if value == "Acrobot-v1":  # a game of other shapes: play is refused before its first step
            torch.save(ckpt, run / "checkpoint.pt")
            proc = run_play(run, "--no-video", "--episodes", "1")
            assert proc.returncode == 2 and proc.stderr == (
                f"play: error: checkpoint {run / 'checkpoint.pt'} does not fit Acrobot-v1: its network takes "
                "observations of shape (4,) and 2 discrete actions, the game has (6,) and 3 discrete actions\n"
            ), proc.stderr[-2000:]
            continue
        torch.save(ckpt, run / "checkpoint.pt")
        with pytest.raises(ConfigError, match=rf"^checkpoint {run / 'checkpoint.pt'}") as caught:
            hogwild_dqn.load_policy(run)
        assert "\n" not in str(caught.value), key
        proc = run_play(run, "--no-video", "--episodes", "1")
        assert proc.returncode == 2 and proc.stderr.startswith("play: error: checkpoint "), proc.stderr[-2000:]
        if key == "algo":  # with --epsilon too, which asks the algorithm whether it is a Q method
            proc = run_play(run, "--no-video", "--episodes", "1", "--epsilon", "0.1")
            assert proc.returncode == 2 and proc.stderr == (f"play: error: checkpoint {run / 'checkpoint.pt'} is of "
                                                            "the algorithm 'zzz', which this version does not have "
                                                            "(q1, sarsa1, nq, a3c, dqn, ppo, pqn)\n"), \
                proc.stderr[-2000:]


def test_play_whose_reader_goes_away_stops_quietly(cartpole_q1):
    """`hogwild-play RUN | head -1`: a shell command's status for a closed pipe (141), not a BrokenPipeError
    traceback."""
    proc = start([sys.executable, "-m", "hogwild_dqn.play", cartpole_q1, "--episodes", "100000", "--no-video"])
    assert proc.stdout.readline().startswith(f"{cartpole_q1 / 'checkpoint.pt'}: the last weights")
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == "", err
