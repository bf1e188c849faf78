"""The network probe over real runs: the numbers it reads off an LSTM actor-critic, and its one-line refusals."""

import math
import sys

import pytest
import torch

from hogwild_dqn.metrics import feature_spread
from hogwild_dqn.tools.probe import probe
from tests.conftest import run_cmd, run_train


def test_the_probe_reads_the_torso_the_cells_and_the_policy_of_an_lstm_run(tmp_path, cartpole_q1):
    run = tmp_path / "lstm"
    done = run_train("--game", "CartPole-v1", "--net", "lstm", "--threads", 1, "--frames", 2000, "--eval-every",
                     2000, "--eval-episodes", 1, "--final-eval-episodes", 1, "--run-dir", run)
    assert done.returncode == 0, done.stderr[-2000:]
    r = probe(run, steps=50, best=False, seed=0)
    assert r["steps"] == 50 and r["frames"] >= 2000
    assert r["torso_variation"] > 0 and r["torso_max"] >= r["torso_mean"]
    assert 0 < r["cell_mean"] <= r["cell_max"]
    assert all(0 <= r[k] <= 1 for k in ("saturated_input", "saturated_forget", "saturated_output",
                                        "saturated_candidate", "torso_active"))
    assert r["torso_gradient"] > 0
    assert r["entropy_max"] == math.log(2) and 0 < r["entropy"] <= r["entropy_max"] + 1e-6
    shown = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.probe", run, "--steps", 20], 120)
    assert shown.returncode == 0 and "cells: |c| mean" in shown.stdout and "policy entropy" in shown.stdout
    assert "gradient from the heads" in shown.stdout and "saturated candidates" in shown.stdout

    refused = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.probe", cartpole_q1], 120)
    assert refused.returncode == 2 and refused.stderr.strip().startswith("probe: error:") and \
        "actor-critic" in refused.stderr and "Traceback" not in refused.stderr


def test_the_features_spread_is_their_variation_over_time_against_their_size():
    still = torch.tensor([[3.0, -1.0], [3.0, -1.0], [3.0, -1.0]])  # (time, units): the screen changes, they don't
    assert feature_spread(still) == (0.0, 2.0)
    moving = torch.tensor([[[0.0], [2.0]], [[4.0], [4.0]]])  # two games, one unit: std over time sqrt(2) and 0
    variation, size = feature_spread(moving)
    assert variation == pytest.approx(2 ** 0.5 / 2) and size == pytest.approx((1 + 4) / 2)
