"""Each algorithm learns CartPole-v1 with 2 real worker processes, a fixed seed and a frame budget.

Threshold: an evaluation mean (10 episodes, raw returns) of at least 195, within 100,000 frames for A3C and
150,000 for the Q methods (online Q-learning without replay is noisier); a random policy scores about 22,
the maximum is 500. Frames-to-threshold are printed (pytest -s shows them).
"""

import pytest

from tests.conftest import read_summary, run_train

THRESHOLD = 195
BUDGETS = {"a3c": 100_000, "nq": 150_000, "q1": 150_000, "sarsa1": 150_000}


@pytest.mark.parametrize("algo", list(BUDGETS))
def test_cartpole_learns(tmp_path, algo):
    run = tmp_path / algo
    proc = run_train("--game", "CartPole-v1", "--algo", algo, "--threads", 2, "--frames", BUDGETS[algo], "--seed", 1,
                     "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    evals = read_summary(run)["evals"]
    reached = [e["frames"] for e in evals if e["mean_return"] >= THRESHOLD]
    print(f"{algo}: evals {[round(e['mean_return']) for e in evals]}; "
          f"first >= {THRESHOLD} at {reached[0] if reached else None} frames")
    assert reached, f"{algo} never reached {THRESHOLD}: {[e['mean_return'] for e in evals]}"
