"""Per-worker epsilon draw and the schedules."""

import numpy as np
import pytest

from hogwild_dqn.exploration import draw_final_epsilon, epsilon, learning_rate


def test_final_epsilon_draw_matches_paper_distribution():
    rng = np.random.default_rng(0)
    draws = np.array([draw_final_epsilon(rng, [0.1, 0.01, 0.5], [0.4, 0.3, 0.3]) for _ in range(20_000)])
    assert set(np.unique(draws)) == {0.1, 0.01, 0.5}
    for value, p in [(0.1, 0.4), (0.01, 0.3), (0.5, 0.3)]:
        assert np.mean(draws == value) == pytest.approx(p, abs=0.015)


def test_workers_draw_reproducibly_from_their_seed():
    a = [draw_final_epsilon(np.random.default_rng(s), [0.1, 0.01, 0.5], [0.4, 0.3, 0.3]) for s in range(8)]
    b = [draw_final_epsilon(np.random.default_rng(s), [0.1, 0.01, 0.5], [0.4, 0.3, 0.3]) for s in range(8)]
    assert a == b and len(set(a)) > 1


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
