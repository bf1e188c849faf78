"""A3C on continuous (Box) actions with real worker processes: Pendulum-v1 learns to swing up, and the trained
run plays (play, load_policy, the best-episode GIF); the LSTM acts with the Gaussian head too."""

import sys

import numpy as np
import torch

import hogwild_dqn
from tests.conftest import read_summary, run_cmd, run_train


def test_a3c_learns_to_swing_the_pendulum_up_and_the_run_plays(tmp_path):
    """configs/pendulum.yaml (Pendulum-v1's default), 2 workers x 8 games: a random policy scores about -1200;
    an evaluation of -400 or better means most of the 10 games swing up and hold the pendulum. The runs that
    chose the preset reached it at 60k frames (seeds 1 and 2)."""
    run = tmp_path / "pendulum"
    proc = run_train("--game", "Pendulum-v1", "--threads", 2, "--frames", 200_000, "--seed", 1,
                     "--stop-return", -400, "--video-steps", 20, "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("configs/pendulum.yaml: a3c on Pendulum-v1, 2 workers x 8 games")
    evals = [round(e["mean_return"]) for e in read_summary(run)["evals"]]
    print(f"Pendulum-v1 evaluations every 20k frames: {evals}")
    assert evals[0] < -700 and max(evals) >= -400, evals

    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ckpt["continuous"] is True and ckpt["n_actions"] == 1  # one torque
    assert ckpt["model"]["pi.variance.weight"].shape == (1, 64)  # the Gaussian head
    assert (run / "best_episode.gif").stat().st_size > 0  # Pendulum draws with pygame, no display needed
    policy = hogwild_dqn.load_policy(run)
    env = hogwild_dqn.make_env(policy.cfg, seed=5, for_eval=True)
    obs, _ = env.reset()
    action = policy.act(obs)
    assert isinstance(action, np.ndarray) and action.shape == (1,) and np.isfinite(action).all()
    env.step(action)
    env.close()
    play = run_cmd([sys.executable, "-m", "hogwild_dqn.play", run, "--episodes", 2], 300)
    assert play.returncode == 0 and "a3c on Pendulum-v1" in play.stdout, play.stderr[-2000:]
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
    # both workers' observations reached the shared statistics (a race may drop a batch, never most of them)
    assert 0.9 * s["frames"] <= model["torso.norm.count"].item() <= s["frames"]
    cos, sin, speed = model["torso.norm.mean"].tolist()
    assert -1 <= cos <= 1 and -1 <= sin <= 1 and model["torso.norm.var"][2] > 0.1  # Pendulum's cos, sin, speed
