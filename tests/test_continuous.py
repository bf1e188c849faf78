"""A3C on continuous (Box) actions with real worker processes: Pendulum-v1 end to end (several games per
worker, the LSTM, checkpoint, resume, the evaluator, play, load_policy) and learning to swing the pendulum up."""

import sys

import numpy as np
import torch

import hogwild_dqn
from tests.conftest import read_summary, run_cmd, run_train


def test_pendulum_trains_resumes_and_plays(tmp_path):
    run = tmp_path / "pendulum"
    proc = run_train("--game", "Pendulum-v1", "--net", "lstm", "--threads", 2, "--envs-per-worker", 2,
                     "--frames", 3000, "--eval-every", 1500, "--eval-episodes", 1, "--video-steps", 20,
                     "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first = read_summary(run)
    assert len(first["evals"]) == 2 and all(-2000 < e["mean_return"] < 0 for e in first["evals"])
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ckpt["continuous"] is True and ckpt["n_actions"] == 1  # one torque
    assert ckpt["model"]["pi.variance.weight"].shape == (1, 256)  # the Gaussian head, after the LSTM's cells
    assert (run / "best_episode.gif").stat().st_size > 0  # Pendulum draws with pygame, no display needed

    again = run_train("--resume", run, "--frames", 4500, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    s = read_summary(run)
    assert s["frames"] >= 4500 and s["evals"][:2] == first["evals"]

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
