"""The benchmark script runs real workers and writes its table and bench.json (no timing is asserted)."""

import json
import threading
import time

import pytest
import torch

from hogwild_dqn.tools.bench import counted_rates, main


def test_bench_writes_medians_for_every_point(tmp_path, capsys):
    assert main(["--algos", "a3c", "dqn", "--threads", "1", "--envs", "2", "--seconds", "0.5",
                 "--warmup", "0.3", "--repeats", "2", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data["cores"] >= 1 and data["emulator_frames_per_second"] > 100  # a loaded machine: ~900 seen
    assert [(r["algo"], r["threads"], r["envs_per_worker"], r["repeats"]) for r in data["results"]] == [
        ("a3c", 1, 2, 2), ("dqn", 1, 1, 2), ("dqn@final-eps", 1, 1, 2)]  # dqn: one game whatever --envs says
    for r in data["results"]:
        assert r["frames_per_second"] > 0 and r["agent_steps_per_second"] * 4 == r["frames_per_second"]
        assert r["updates_per_second"] > 0  # counted where the gradients are pushed, dqn's minibatches too
    out = capsys.readouterr().out
    assert "| a3c | 1 | 2 |" in out and "| dqn | 1 | 1 |" in out and "bare emulator" in out
    assert (tmp_path / "bench.md").read_text() in out + "\n"


def test_bench_against_a_baseline_commit_measures_both_and_gives_the_ratio(tmp_path, capsys):
    """--baseline HEAD: the committed code's workers, driven by its own bench functions in a tree of their own,
    interleaved with the working tree's."""
    assert main(["--algos", "a3c", "--threads", "1", "--seconds", "1", "--warmup", "0.5", "--repeats", "1",
                 "--baseline", "HEAD", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "bench.json").read_text())
    (r,) = data["results"]
    assert data["baseline"] and r["baseline_frames_per_second"] > 0 and r["frames_per_second"] > 0
    assert r["ratio_to_baseline"] == r["frames_per_second"] / r["baseline_frames_per_second"]
    out = capsys.readouterr().out
    assert "baseline:" in out and "ratio to baseline" in out and "  repeat 1: baseline: a3c x1" in out


def test_bench_baseline_runs_without_a_value_its_config_lacks(tmp_path, capsys):
    """e18cb39 predates --layer-norm: its side of that row runs as it always did, and the table says so; the plain
    row lacks nothing."""
    assert main(["--algos", "nq", "--threads", "1", "--seconds", "1", "--warmup", "0.5", "--repeats", "1",
                 "--baseline", "e18cb39", "--with=--layer-norm", "--out", str(tmp_path)]) == 0
    plain, flagged = json.loads((tmp_path / "bench.json").read_text())["results"]
    assert plain["baseline_lacks"] == [] and flagged["baseline_lacks"] == ["layer_norm"]
    assert flagged["baseline_frames_per_second"] > 0 and flagged["frames_per_second"] > 0
    out = capsys.readouterr().out
    assert "the baseline lacks layer_norm: its side of `nq --layer-norm` ran without" in out


def test_bench_with_a_bad_baseline_is_one_line(capsys):
    assert main(["--baseline", "no-such-ref-xyz", "--repeats", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no-such-ref-xyz" in err and "not a commit" in err


def test_bench_profiles_one_worker(tmp_path, capsys):
    assert main(["--algos", "a3c", "--envs", "2", "--profile", "1500", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "a3c on Pong, 2 games, one worker inline:" in out and "under the profiler" in out
    assert "tottime" in out and "play_segment" in out and (tmp_path / "profile.txt").read_text() in out


def test_bench_with_train_flags_measures_them_as_rows_of_their_own(tmp_path, capsys):
    """--with: train.py's flags reach the workers of a row of their own (a3c pushes one update per t_max steps:
    the ratio of updates to steps tells which value the workers ran)."""
    assert main(["--algos", "a3c", "--threads", "1", "--seconds", "1", "--warmup", "0.5", "--repeats", "1",
                 "--with", "--t-max 40 --obs-normalize --no-obs-standardize", "--out", str(tmp_path)]) == 0
    plain, flagged = json.loads((tmp_path / "bench.json").read_text())["results"]
    assert plain["algo"] == "a3c" and flagged["algo"] == "a3c --t-max 40 --obs-normalize --no-obs-standardize"
    assert 4 < plain["agent_steps_per_second"] / plain["updates_per_second"] < 6
    assert 32 < flagged["agent_steps_per_second"] / flagged["updates_per_second"] < 48
    assert "| a3c --t-max 40 --obs-normalize --no-obs-standardize | 1 | 1 |" in capsys.readouterr().out


@pytest.mark.parametrize("flags, said", [
    ("--lr abc", "--with '--lr abc': argument --lr: must be a number, got 'abc'"),
    ("--game Breakout", "--with '--game Breakout': the benchmark sets game itself"),
    ("--obs-normalize --obs-standardize", "--with '--obs-normalize --obs-standardize' on a3c x1 games: "
                                          "--obs-normalize"),
])
def test_bench_with_bad_train_flags_is_one_line(flags, said, capsys):
    assert main(["--algos", "a3c", "--with", flags, "--repeats", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and said in err


def test_bench_evaluator_plays_whole_rounds_of_games_for_each_row(tmp_path, capsys):
    """--evaluator: the evaluation player's games, the preset's row (30 games a round) and a --with row with its
    own values (rounds of 4 games, one at a time), each at least one whole round; the ratio to the preset's row."""
    assert main(["--game", "Breakout", "--algos", "ppo", "--evaluator", "--seconds", "0.1", "--repeats", "1",
                 "--with", "--eval-envs 1 --final-eval-episodes 4", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "bench.json").read_text())
    plain, flagged = data["results"]
    assert data["evaluator"] and data["emulator_frames_per_second"] > 100
    assert plain["row"] == "plain" and plain["games"] == [30] and plain["ratio_to_plain"] == 1
    assert flagged["row"] == "--eval-envs 1 --final-eval-episodes 4" and flagged["games"] == [4]
    assert flagged["frames_per_second"] > 0 and flagged["ratio_to_plain"] > 0
    out = capsys.readouterr().out
    assert "| the preset (--eval-envs 16) |" in out and "| --eval-envs 1 --final-eval-episodes 4 |" in out
    capsys.readouterr()
    assert main(["--evaluator", "--baseline", "HEAD"]) == 2
    assert capsys.readouterr().err.strip() == ("bench: error: --evaluator measures this tree's evaluator only: compare "
                                               "with --with rows, not --baseline")


def test_rates_are_taken_over_whole_counts_not_a_window_that_cuts_them():
    """Two counters in real shared memory stepped by 4,096 frames (and 16 updates) every 0.3 s and 0.5 s, as PPO
    workers count a rollout at its end: the rates are the steps' own, 4,096 / 0.3 + 4,096 / 0.5 frames/s, where
    a fixed window of 1 s held 3 or 4 of the first counter's steps, 6% under or 12% over the sum."""
    frames, updates = torch.zeros(2, dtype=torch.int64).share_memory_(), torch.zeros(2, dtype=torch.int64)
    periods, stop = (0.3, 0.5), threading.Event()

    def count(i: int) -> None:
        t0, k = time.perf_counter(), 0
        while not stop.is_set():
            k += 1
            time.sleep(max(0.0, t0 + k * periods[i] - time.perf_counter()))  # on a schedule: no drift
            updates[i] += 16  # a worker pushes its updates, then counts its frames (workers.rollouts.PPO.step)
            frames[i] += 4096

    def wait(until, done=lambda: False):
        while time.perf_counter() < until and not done():
            time.sleep(0.005)

    threads = [threading.Thread(target=count, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        fps, ups = counted_rates(frames, updates, wait, 1.0)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert fps == pytest.approx(4096 / 0.3 + 4096 / 0.5, rel=0.04)
    assert ups == pytest.approx(16 / 0.3 + 16 / 0.5, rel=0.04)


def test_rates_of_a_worker_that_never_counts_end_in_an_error():
    frames, updates = torch.zeros(1, dtype=torch.int64), torch.zeros(1, dtype=torch.int64)
    with pytest.raises(RuntimeError, match=r"worker\(s\) \[0\] counted frames too seldom"):
        counted_rates(frames, updates, lambda until, done=lambda: False: done(), 0.1)
