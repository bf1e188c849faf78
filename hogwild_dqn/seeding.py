"""The random streams of the workers and the evaluator's games: every run, worker, restart, resumed session and
game has its own, spawned from numpy.random.SeedSequence(--seed)."""

from __future__ import annotations

import numpy as np

EVALUATION_KEY = 0  # the evaluator's spawn key: one entry, where each worker's has two (rank, restart)


def worker_streams(seed: int, rank: int, restart: int, session: int, games: int) -> tuple:
    """The random streams of worker `rank` (started after `restart` restarts of the run's workers, in the
    resumed session that began at `session` frames; 0 for a new run): (numpy Generator, torch seed, one env
    seed per game), all spawned from numpy.random.SeedSequence(seed), so that no two runs, workers, restarts or
    games share a stream."""
    root = np.random.SeedSequence(seed if session == 0 else [seed, session])
    worker = np.random.SeedSequence(root.entropy, spawn_key=(rank, restart))
    own, *game_seqs = worker.spawn(games + 1)
    return (np.random.default_rng(own), int(own.generate_state(1)[0]),
            [int(g.generate_state(1)[0]) for g in game_seqs])


def evaluation_seeds(seed: int, games: int) -> list[int]:
    """One env seed for each of the evaluator's `games` played side by side, spawned from
    numpy.random.SeedSequence(seed) apart from the workers' (a spawn key of one entry where theirs have two), so
    that no two runs share one (seed + i would give run s + 1 the streams of run s's games)."""
    evaluation = np.random.SeedSequence(seed, spawn_key=(EVALUATION_KEY,))
    return [int(s.generate_state(1)[0]) for s in evaluation.spawn(games)]
