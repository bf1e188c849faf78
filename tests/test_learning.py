"""Each algorithm learns CartPole-v1 with 2 real worker processes, a fixed seed and a frame budget.

Threshold: an evaluation mean (10 episodes, raw returns) of at least 195, within 100,000 frames for A3C,
60,000 for PPO, 150,000 for the paper's Q methods (online Q-learning without replay is noisier) and 300,000 for
Q(lambda) (pqn: its preset's frames, with its epsilon annealed over the first fifth); a random policy
scores about 22, the maximum is 500. Frames-to-threshold are printed (pytest -s shows them).
"""

import shutil

import pytest

from hogwild_dqn.checkpoint import load_checkpoint
from tests.conftest import CARTPOLE_A3C_STOP, read_summary, run_train

THRESHOLD = 195
BUDGETS = {"a3c": 100_000, "nq": 150_000, "q1": 150_000, "sarsa1": 150_000, "dqn": 80_000, "ppo": 60_000,
           "pqn": 300_000}


def _first_reaching(algo: str, run, threshold: float) -> int | None:
    evals = read_summary(run)["evals"]
    reached = [e["frames"] for e in evals if e["mean_return"] >= threshold]
    print(f"{algo}: evals {[round(e['mean_return']) for e in evals]}; "
          f"first >= {threshold} at {reached[0] if reached else None} frames")
    return reached[0] if reached else None


@pytest.mark.parametrize("algo", [a for a in BUDGETS if a != "a3c"])
def test_cartpole_learns(tmp_path, algo):
    run = tmp_path / algo
    # --stop-return: a run that reaches the threshold has passed; the rest of its budget would prove nothing more
    proc = run_train("--game", "CartPole-v1", "--algo", algo, "--threads", 2, "--frames", BUDGETS[algo], "--seed", 1,
                     "--stop-return", THRESHOLD, "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _first_reaching(algo, run, THRESHOLD), f"{algo} never reached {THRESHOLD}"


@pytest.mark.parametrize("seed", [2, 3])
def test_pqn_learns_cartpole_by_default_on_other_seeds(tmp_path, seed):
    """Its preset as it is (300k frames, over which the learning rate anneals), seeds 2 and 3 (seed 1:
    test_cartpole_learns): a confirmed evaluation >= 195 over 30 games within its frames."""
    run = tmp_path / f"pqn-s{seed}"
    proc = run_train("--game", "CartPole-v1", "--algo", "pqn", "--threads", 2, "--seed", seed, "--stop-return",
                     THRESHOLD, "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = read_summary(run)
    assert s["confirmed"] and s["final_eval"]["mean_return"] >= THRESHOLD and s["frames"] <= BUDGETS["pqn"], s["evals"]


def test_ppo_learns_cartpole_with_its_value_targets_standardized(tmp_path):
    """--value-normalize: the value head learns standardized returns; PPO's budget holds with it."""
    run = tmp_path / "ppo-value-norm"
    proc = run_train("--game", "CartPole-v1", "--algo", "ppo", "--value-normalize", "--threads", 2,
                     "--frames", BUDGETS["ppo"], "--seed", 1, "--stop-return", THRESHOLD, "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _first_reaching("ppo --value-normalize", run, THRESHOLD), f"never reached {THRESHOLD}"
    ckpt = load_checkpoint(run / "checkpoint.pt", "CartPole-v1", "ppo")
    assert ckpt["model"]["value_norm.count"] >= ckpt["frames"] // 2  # the workers' returns fed the statistics


def test_a3c_learns_cartpole(cartpole_a3c):
    """A3C's run (2 workers, seed 1) is the one shared with the play and --stop-return tests."""
    first = _first_reaching("a3c", cartpole_a3c, THRESHOLD)
    assert first is not None and first <= BUDGETS["a3c"], f"a3c did not reach {THRESHOLD} within 100k frames"


def test_stop_return_ends_the_run_at_its_first_confirmed_evaluation(cartpole_a3c, tmp_path):
    """A3C with a budget far beyond need stops itself once a periodic evaluation >= its --stop-return is
    confirmed by the same weights over 30 games (training goes on past the ones that are not);
    `--stop-return none` restores "train all --frames" over the value a resumed run's config.yaml holds."""
    summary, stop = read_summary(cartpole_a3c), CARTPOLE_A3C_STOP
    confirm = summary["evals"][-1]
    assert confirm["confirmation"] and confirm["final"] and confirm["mean_return"] >= stop
    assert summary["status"] == (f"solved: confirmed over 30 games, mean {confirm['mean_return']:g} >= "
                                 f"--stop-return {stop}")
    assert summary["evals"][-2]["frames"] == confirm["frames"] == summary["frames"]
    assert summary["evals"][-2]["mean_return"] >= stop and summary["frames"] < 300_000  # stopped there
    failed = [e for e in summary["evals"] if e.get("confirmation") and not e["final"]]
    assert all(e["mean_return"] < stop for e in failed)
    run = tmp_path / "a3c"
    shutil.copytree(cartpole_a3c, run)  # the shared run stays as it was for the other tests
    proc = run_train("--resume", run, "--stop-return", "none", "--frames", summary["frames"] + 4000, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert read_summary(run)["status"] == "finished"


def test_every_algorithm_of_the_table_is_held_to_a_score():
    """A new ALGORITHMS row needs its CartPole budget here, or this fails (docs/design.md, adding an algorithm)."""
    from hogwild_dqn.algorithms import ALGORITHMS

    assert set(BUDGETS) == set(ALGORITHMS)
