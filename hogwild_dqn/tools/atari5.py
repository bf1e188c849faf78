"""Atari-5 (Aitchison, Sweetser and Hutter, ICML 2023): the median human-normalized score over the 57 Atari games,
estimated from five (BattleZone, DoubleDunk, NameThisGame, Phoenix, Qbert). Each game's score is normalized as
100 (score - random) / (human - random) with the paper's reference scores, put through t(x) = log10(1 + max(x, 0)),
and the estimate is 10^(sum of weight x t) - 1, in percent of human, within about 10.4% (the paper's 10-fold
cross-validated error; the band is that relative error, not a confidence interval). The weights and references
are those of maitchison/Atari-5 (`Atari-Human.csv`; its fit, whose coefficients maitchison/PPO's
`tools/plot_util.py` publishes: docs/published/NOTES.md)."""

from __future__ import annotations

import math

# game: (weight, random, human)
MODEL = {
    "BattleZone": (0.3819751, 2360.0, 37187.5),
    "DoubleDunk": (0.0679099, -18.55, -16.4),
    "NameThisGame": (0.3108041, 2292.35, 8049.0),
    "Phoenix": (0.1241262, 761.4, 7242.6),
    "Qbert": (0.0804852, 163.88, 13455.0),
}
GAMES = tuple(MODEL)
RELATIVE_ERROR = 0.104  # Atari-5's cross-validated error of the estimate, relative


def estimate(scores: dict[str, float]) -> tuple[float, float, float]:
    """The 57-game median human-normalized score (1.0 = human) estimated from the five games' raw scores; with
    the band of the paper's relative error: (estimate, low, high)."""
    missing = [g for g in GAMES if g not in scores]
    if missing:
        raise ValueError(f"Atari-5 needs a score of each of its games; missing: {', '.join(missing)}")
    total = 0.0
    for game, (weight, random, human) in MODEL.items():
        normalized = 100 * (scores[game] - random) / (human - random)
        total += weight * math.log10(1 + max(normalized, 0.0))
    median = (10**total - 1) / 100
    return median, median * (1 - RELATIVE_ERROR), median * (1 + RELATIVE_ERROR)


if __name__ == "__main__":
    import sys

    from hogwild_dqn.commands import not_a_command

    sys.exit(not_a_command(__spec__.name, "`python -m hogwild_dqn.tools.benchmark --suite atari5` (with "
                                          "--report-only, the estimate from its records)"))
