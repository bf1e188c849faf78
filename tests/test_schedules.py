"""Per-game epsilon draw, the schedules and the workers' random streams."""

import numpy as np
import pytest

from hogwild_dqn.schedules import draw_final_epsilon, epsilon, learning_rate, resumed_lr
from hogwild_dqn.seeding import worker_streams


def test_final_epsilon_draw_matches_paper_distribution():
    rng = np.random.default_rng(0)
    draws = np.array([draw_final_epsilon(rng, [0.1, 0.01, 0.5], [0.4, 0.3, 0.3]) for _ in range(20_000)])
    assert set(np.unique(draws)) == {0.1, 0.01, 0.5}
    for value, p in [(0.1, 0.4), (0.01, 0.3), (0.5, 0.3)]:
        assert np.mean(draws == value) == pytest.approx(p, abs=0.015)


def test_workers_draw_reproducibly_from_their_seed():
    a = [draw_final_epsilon(np.random.default_rng(s), [0.1, 0.01, 0.5], [0.4, 0.3, 0.3]) for s in range(8)]
    b = [draw_final_epsilon(np.random.default_rng(s), [0.1, 0.01, 0.5], [0.4, 0.3, 0.3]) for s in range(8)]
    assert np.array_equal(a, b) and len(np.unique(a)) > 1


def test_each_game_of_a_worker_draws_its_own_final_epsilon():
    """8 games per worker: 8 draws, not one epsilon shared by the worker's games (with 2 workers of 8 games,
    one draw per worker left a run exploring with a single epsilon about 1 time in 5)."""
    draws = np.array([draw_final_epsilon(np.random.default_rng(s), [0.1, 0.01, 0.5], [0.4, 0.3, 0.3], games=8)
                      for s in range(500)])
    assert draws.shape == (500, 8)
    assert np.mean([len(np.unique(row)) == 1 for row in draws]) < 0.01
    assert np.mean(draws == 0.5) == pytest.approx(0.3, abs=0.02)


def test_no_two_runs_workers_restarts_or_games_share_a_random_stream():
    """Seeds 1 and 2 give worker 1 of run 1 and worker 0 of run 2 streams of their own (a seed + rank scheme would
    give them the same)."""
    env_seeds, first_draws = [], []
    for seed in (1, 2, 3):
        for rank in range(4):
            for restart in (0, 1):
                for session in (0, 5_000_000):
                    rng, torch_seed, games = worker_streams(seed, rank, restart, session, 8)
                    env_seeds += [torch_seed, *games]
                    first_draws.append(rng.random())
    assert len(set(env_seeds)) == len(env_seeds) and len(set(first_draws)) == len(first_draws)
    rng, torch_seed, games = worker_streams(1, 0, 0, 0, 8)
    again = worker_streams(1, 0, 0, 0, 8)
    assert (torch_seed, games, rng.random()) == (again[1], again[2], again[0].random())  # reproducible


def test_epsilon_anneals_linearly_then_stays():
    assert epsilon(0, 1.0, 0.1, 4_000_000) == 1.0
    assert epsilon(1_000_000, 1.0, 0.1, 4_000_000) == pytest.approx(0.775)
    assert epsilon(2_000_000, 1.0, 0.5, 4_000_000) == pytest.approx(0.75)
    assert epsilon(4_000_000, 1.0, 0.01, 4_000_000) == pytest.approx(0.01)
    assert epsilon(9_000_000, 1.0, 0.01, 4_000_000) == pytest.approx(0.01)


def test_learning_rate_anneals_to_zero():
    assert learning_rate(0, 7e-4, 1000, True) == pytest.approx(7e-4)
    assert learning_rate(250, 7e-4, 1000, True) == pytest.approx(5.25e-4)
    assert learning_rate(1000, 7e-4, 1000, True) == 0.0
    assert learning_rate(1200, 7e-4, 1000, True) == 0.0
    assert learning_rate(500, 7e-4, 1000, False) == pytest.approx(7e-4)


def test_a_resumed_run_with_more_frames_continues_the_learning_rate_without_a_jump():
    """Resumed at 600 of 1,000 frames with --frames 2,000: the rate goes on from where it was (2.8e-4) down to 0
    at 2,000, where rescaling by the new total jumped it to 4.9e-4."""
    saved = {"config": {"lr": 7e-4, "lr_anneal": True, "frames": 1000}}
    before = learning_rate(600, 7e-4, 1000, True)
    start, lr = resumed_lr(saved, 600, 7e-4)
    assert (start, lr) == (600, pytest.approx(before))
    assert learning_rate(600, lr, 2000, True, start) == pytest.approx(before)
    assert learning_rate(1300, lr, 2000, True, start) == pytest.approx(before / 2)
    assert learning_rate(2000, lr, 2000, True, start) == 0.0
    # a second resume follows the line the first one drew
    saved2 = {"config": {"lr": 7e-4, "lr_anneal": True, "frames": 2000}, "lr_start": [start, lr]}
    start2, lr2 = resumed_lr(saved2, 1300, 7e-4)
    assert lr2 == pytest.approx(before / 2)
    assert learning_rate(1650, lr2, 3000, True, start2) < lr2
    # the same --frames: the same schedule as if the run had never stopped
    assert learning_rate(800, lr, 1000, True, start) == pytest.approx(learning_rate(800, 7e-4, 1000, True))
    # a new --lr starts the line from that rate
    assert resumed_lr(saved, 600, 1e-3) == (600, 1e-3)


def test_evaluation_games_of_neighbouring_runs_share_no_seed_with_each_other_or_the_workers():
    """Seeds 1, 2 and 3 (a suite's runs, averaged) play their 16 evaluation games on seeds of their own (before the
    fix, seed + i: run 2's first 15 envs replayed run 1's last 15), none of them a worker's game seed."""
    from hogwild_dqn.seeding import evaluation_seeds

    runs = [evaluation_seeds(seed, 16) for seed in (1, 2, 3)]
    assert all(len(set(r)) == 16 for r in runs) and len(set().union(*map(set, runs))) == 48
    assert runs[0] == evaluation_seeds(1, 16) and evaluation_seeds(1, 4) == runs[0][:4]  # fixed by the run's seed
    workers = {g for seed in (1, 2, 3) for rank in (0, 1) for g in worker_streams(seed, rank, 0, 0, 8)[2]}
    assert not workers & set().union(*map(set, runs))
