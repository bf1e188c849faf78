"""Evaluation written once: the evaluation points, late evaluators, --stop-return, and what a result records."""

import json
import sys

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from hogwild_dqn import metrics
from hogwild_dqn.evaluation import Recorder, next_point, points_skipped, stop_reason
from tests.conftest import run_cmd, run_train


def test_evaluation_points_fall_on_multiples_of_eval_every():
    assert [next_point(f, 500) for f in (0, 499, 500, 501, 1499)] == [500, 500, 1000, 1000, 1500]


def test_a_late_evaluator_counts_the_points_training_passed():
    assert points_skipped(500, 999, 500) == 0       # the next point (1000) is still ahead
    assert points_skipped(500, 1000, 500) == 0      # at it: evaluated next, nothing skipped
    assert points_skipped(500, 1600, 500) == 1      # 1000 passed, 1500 is taken by the newest weights
    assert points_skipped(500, 2600, 500) == 3


def test_stop_return_names_the_evaluation_that_reached_it():
    assert stop_reason({"mean_return": 17.9}, 18) is None and stop_reason({"mean_return": 30}, None) is None
    assert stop_reason({"mean_return": 18.6}, 18) == "solved: eval mean 18.6 >= --stop-return 18"


def test_recorder_keeps_best_pt_and_the_gif_only_at_a_new_best(tmp_path):
    writer = metrics.make_writer(tmp_path, "evaluator")
    rec = Recorder(tmp_path, writer, best=5.0)
    gif = metrics.encode_gif([np.full((8, 12, 3), v, dtype=np.uint8) for v in (0, 255)])
    result = {"mean_return": 4.0, "std_return": 1.0, "seconds": 0.5}
    rec.record(result, 1000, lambda best: {"best_eval_return": best}, gif)  # below the earlier best: nothing
    assert not (tmp_path / "best.pt").exists() and not (tmp_path / "best_episode.gif").exists()
    rec.record({**result, "mean_return": 7.5}, 2000, lambda best: {"best_eval_return": best}, gif)
    assert rec.best == 7.5 and torch.load(tmp_path / "best.pt")["best_eval_return"] == 7.5
    assert (tmp_path / "best_episode.gif").read_bytes() == gif
    writer.close()
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert [e.step for e in events.Scalars(metrics.EVAL_MEAN)] == [1000, 2000]
    image = events.Images(metrics.BEST_EPISODE)[0]
    assert (image.step, image.width, image.height) == (2000, 12, 8)


def test_the_final_evaluation_is_the_score_not_a_best(tmp_path):
    """The final evaluation (the last weights over many games) goes to eval/final_*, and never to best.pt, which
    keeps the best periodic evaluation's weights; summary.json names it final_eval."""
    from hogwild_dqn.rundir import best_periodic, final_eval, final_line, result_line

    writer = metrics.make_writer(tmp_path, "evaluator")
    rec = Recorder(tmp_path, writer, best=5.0)
    final = {"mean_return": 9.0, "std_return": 2.0, "seconds": 3.0, "final": True, "frames": 3000,
             "episodes": 30, "returns": [9.0] * 30}
    rec.record(final, 3000, lambda best: {"best_eval_return": best})
    assert rec.best == 5.0 and not (tmp_path / "best.pt").exists()
    writer.close()
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars(metrics.FINAL_MEAN)] == [(3000, 9.0)]
    evals = [{"frames": 1000, "mean_return": 6.0}, {"frames": 2000, "mean_return": 7.0}, final]
    assert best_periodic(5.0, evals) == 7.0
    assert final_eval(evals) == {k: final[k] for k in ("frames", "mean_return", "std_return", "episodes", "returns")}
    assert final_eval(evals[:2]) is None and final_line(None) == "no final evaluation"
    assert final_line(final_eval(evals)) == "final eval 9 ± 2.0 over 30 games"
    assert (result_line({"final_eval": None, "best_eval_return": 384.20500919020657})
            == "no final evaluation, best periodic eval 384.205")  # a float's 17 digits are noise in a line


def test_a_run_with_only_its_final_evaluation_has_no_best(tmp_path):
    """--eval-every equal to --frames: the final evaluation can come before any periodic one; summary.json then
    holds null (strict JSON, not -Infinity) and the last line and `play` say so, not -inf."""
    run = tmp_path / "run"
    proc = run_train("--game", "CartPole-v1", "--frames", 2000, "--eval-every", 2000, "--final-eval-episodes", 1,
                     "--video-steps", 0, "--run-dir", run, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((run / "summary.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    periodic = [e for e in summary["evals"] if not e["final"]]
    assert (summary["best_eval_return"] is None) == (not periodic)
    assert "inf" not in proc.stdout.strip().splitlines()[-1]
    played = run_cmd([sys.executable, "-m", "hogwild_dqn.play", str(run), "--episodes", "1", "--no-video"], 300)
    assert played.returncode == 0, played.stderr[-2000:]
    assert "inf" not in played.stdout.splitlines()[0]
    assert ("no periodic evaluation" in played.stdout) == (not periodic)
