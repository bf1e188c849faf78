"""A3C and PPO on continuous (Box) actions with real worker processes: InvertedPendulum-v5 (MuJoCo) is balanced,
Pendulum-v1 learns and the trained run plays (play, load_policy, the best-episode GIF); the LSTM acts with the
Gaussian head too, on normalized observations; a state-independent deviation (--policy-std-init) is trained."""

import math
import sys

import numpy as np
import pytest
import torch

import hogwild_dqn
from tests.conftest import read_summary, run_cmd, run_train


def test_a3c_balances_the_inverted_pendulum(tmp_path):
    """MuJoCo's InvertedPendulum-v5 with A3C's preset (--algo a3c: configs/mujoco.yaml), 2 workers x 4 games: a random
    policy scores about 6, the maximum is 1000. Three runs of the preset (seeds 1-3) reached 1000 within 45k-63k
    frames, and their last weights kept it over 30 episodes."""
    pytest.importorskip("mujoco", reason="MuJoCo is an optional extra: make install-mujoco (make test installs it)")
    run = tmp_path / "inverted"
    proc = run_train("--game", "InvertedPendulum-v5", "--algo", "a3c", "--threads", 2, "--frames", 200_000, "--seed", 1,
                     "--stop-return", 950, "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("configs/mujoco.yaml: a3c-norm on InvertedPendulum-v5, 2 workers x 4 games")
    s = read_summary(run)
    evals = [round(e["mean_return"]) for e in s["evals"]]
    print(f"InvertedPendulum-v5 evaluations every 10k frames: {evals}")
    assert s["status"].startswith("solved") and max(evals) >= 950, evals
    assert s["final_eval"]["mean_return"] >= 950, s["final_eval"]  # what it learned is kept


def test_ppo_balances_the_inverted_pendulum(tmp_path):
    """A MuJoCo task without --algo takes PPO, configs/ppo_mujoco.yaml (2 workers x 1 game, rollouts of 1,024 steps,
    10 epochs of 16 minibatches, returns normalized). Seeds 1-3 each reached 1000 at their second evaluation
    (20k frames) and kept it over 30 episodes; the budget leaves three times that."""
    pytest.importorskip("mujoco", reason="MuJoCo is an optional extra: make install-mujoco (make test installs it)")
    run = tmp_path / "inverted-ppo"
    proc = run_train("--game", "InvertedPendulum-v5", "--threads", 2, "--frames", 60_000,
                     "--seed", 1, "--stop-return", 950, "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("configs/ppo_mujoco.yaml: ppo-norm on InvertedPendulum-v5, 2 workers x 1 game")
    s = read_summary(run)
    evals = [round(e["mean_return"]) for e in s["evals"]]
    print(f"InvertedPendulum-v5, ppo, evaluations every 10k frames: {evals}")
    assert s["status"].startswith("solved") and s["final_eval"]["mean_return"] >= 950, (evals, s["final_eval"])


def test_a3c_learns_pendulum_and_the_run_plays(tmp_path):
    """configs/pendulum.yaml (Pendulum-v1's default), 2 workers x 8 games. A random policy scores -1179 +- 289 a
    game (so about +-90 for a mean of 10): -900 or better is learning, not luck. Most runs of the preset swing
    up and hold the pendulum (-400 or better, where the run stops) within 60k-80k frames; one of seven stayed
    near -750 (spinning), which is why the bar is learning and not that."""
    run = tmp_path / "pendulum"
    proc = run_train("--game", "Pendulum-v1", "--threads", 2, "--frames", 200_000, "--seed", 1,
                     "--stop-return", -400, "--video-steps", 20, "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("configs/pendulum.yaml: a3c on Pendulum-v1, 2 workers x 8 games")
    evals = [round(e["mean_return"]) for e in read_summary(run)["evals"]]
    print(f"Pendulum-v1 evaluations every 20k frames: {evals}")
    assert max(evals) >= -900, evals

    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ckpt["continuous"] is True and ckpt["n_actions"] == 1  # one torque
    assert ckpt["model"]["pi.variance.weight"].shape == (1, 64)  # the Gaussian head
    assert (run / "best_episode.gif").stat().st_size > 0  # Pendulum draws with pygame, no display needed
    policy = hogwild_dqn.load_policy(run)  # continuous actions: the Gaussian's mean by default
    env = hogwild_dqn.make_env(policy.cfg, seed=5, for_eval=True)
    obs, _ = env.reset()
    action = policy.act(obs)
    assert isinstance(action, np.ndarray) and action.shape == (1,) and np.isfinite(action).all()
    assert policy.deterministic and np.array_equal(policy.act(obs), action)
    sampling = hogwild_dqn.load_policy(run, deterministic=False)
    assert len({float(sampling.act(obs)[0]) for _ in range(5)}) == 5
    env.step(action)
    env.close()
    play = run_cmd([sys.executable, "-m", "hogwild_dqn.play", run, "--episodes", 2], 300)
    assert play.returncode == 0 and "a3c on Pendulum-v1" in play.stdout, play.stderr[-2000:]
    assert "the Gaussian's mean (--no-deterministic samples)" in play.stdout
    assert (run / "play.mp4").stat().st_size > 0


def test_the_lstm_acts_with_the_gaussian_head_on_normalized_observations(tmp_path):
    run = tmp_path / "lstm"
    proc = run_train("--game", "Pendulum-v1", "--net", "lstm", "--obs-normalize", "--threads", 2,
                     "--envs-per-worker", 2, "--frames", 2000, "--eval-every", 2000, "--eval-episodes", 1,
                     "--video-steps", 0, "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = read_summary(run)  # it ran and was evaluated (2,000 frames teach it nothing)
    assert s["frames"] >= 2000 and len(s["evals"]) == 1
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    model = ckpt["model"]
    assert model["pi.variance.weight"].shape == (1, 256)  # after the LSTM's cells
    # both workers' observations reached the shared statistics: more than one worker's half of the frames. Not
    # all of them: a worker descheduled inside its lock-free merge writes back over the batches merged meanwhile
    # (CI lost 12% so, 1,780 of 2,020, on a loaded 2-core machine; alone here none is lost)
    assert 0.6 * s["frames"] <= model["torso.norm.count"].item() <= s["frames"]
    cos, sin, speed = model["torso.norm.mean"].tolist()
    assert -1 <= cos <= 1 and -1 <= sin <= 1 and model["torso.norm.var"][2] > 0.1  # Pendulum's cos, sin, speed


def test_a_learned_state_independent_deviation_is_trained_through_shared_memory(tmp_path):
    """--policy-std-init: both workers' updates reach the one shared log-std parameter, the checkpoint keeps
    it and load_policy rebuilds the run's head from it."""
    run = tmp_path / "std"
    proc = run_train("--game", "Pendulum-v1", "--policy-std-init", "0.5", "--threads", 2, "--frames", 4000,
                     "--eval-every", 4000, "--eval-episodes", 1, "--final-eval-episodes", 1, "--video-steps", 0,
                     "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    model = torch.load(run / "checkpoint.pt", weights_only=True)["model"]
    assert "pi.variance.weight" not in model and model["pi.log_std"].shape == (1,)
    assert abs(model["pi.log_std"].item() - math.log(0.5)) > 1e-3  # the workers trained it
    policy = hogwild_dqn.load_policy(run, last=True)
    torch.testing.assert_close(policy.net.pi.log_std.detach(), model["pi.log_std"])
