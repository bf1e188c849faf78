"""Each algorithm learns CartPole-v1 with 2 real worker processes, a fixed seed and a frame budget.

Threshold: an evaluation mean (10 episodes, raw returns) of at least 195, within 100,000 frames for A3C and
150,000 for the Q methods (online Q-learning without replay is noisier); a random policy scores about 22,
the maximum is 500. Frames-to-threshold are printed (pytest -s shows them).
"""

import pytest

from tests.conftest import read_summary, run_train

THRESHOLD = 195
BUDGETS = {"a3c": 100_000, "nq": 150_000, "q1": 150_000, "sarsa1": 150_000, "dqn": 80_000}


@pytest.mark.parametrize("algo", list(BUDGETS))
def test_cartpole_learns(tmp_path, algo):
    run = tmp_path / algo
    # --stop-return: a run that reaches the threshold has passed; the rest of its budget would prove nothing more
    proc = run_train("--game", "CartPole-v1", "--algo", algo, "--threads", 2, "--frames", BUDGETS[algo], "--seed", 1,
                     "--stop-return", THRESHOLD, "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    evals = read_summary(run)["evals"]
    reached = [e["frames"] for e in evals if e["mean_return"] >= THRESHOLD]
    print(f"{algo}: evals {[round(e['mean_return']) for e in evals]}; "
          f"first >= {THRESHOLD} at {reached[0] if reached else None} frames")
    assert reached, f"{algo} never reached {THRESHOLD}: {[e['mean_return'] for e in evals]}"


def test_stop_return_ends_the_run_at_the_first_evaluation_that_reaches_it(tmp_path):
    """A3C with a budget far beyond need stops itself at the first evaluation >= 100; `--stop-return none`
    restores "train all --frames" over the value a resumed run's config.yaml holds."""
    run = tmp_path / "a3c"
    proc = run_train("--game", "CartPole-v1", "--algo", "a3c", "--threads", 2, "--frames", 2_000_000, "--seed", 1,
                     "--stop-return", 100, "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = read_summary(run)
    reached = [e for e in summary["evals"] if e["mean_return"] >= 100]
    assert reached and summary["status"] == f"solved: eval mean {reached[0]['mean_return']:g} >= --stop-return 100"
    assert summary["frames"] < reached[0]["frames"] + 100_000  # stopped there, not at 2M frames
    proc = run_train("--resume", run, "--stop-return", "none", "--frames", summary["frames"] + 4000, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert read_summary(run)["status"] == "finished"
