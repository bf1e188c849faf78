"""Published Atari scores beside a suite's: docs/published/atari_10m.csv (game, algorithm, frames, score, seeds,
protocol, source) and its per-seed rows (atari_10m_seeds.csv), read by the benchmark's report. Each published
algorithm's IQM over a suite's games is rliable's, pooled over runs x games as the suite's own, from its first k
runs of each game (k: the fewest any of the games has), normalized with the same random and human scores."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

PUBLISHED = Path(__file__).resolve().parents[2] / "docs" / "published" / "atari_10m.csv"  # a checkout's


@dataclass
class Published:
    """One published algorithm on a suite's games: each game's mean score, its per-seed scores, its protocol, and
    the fewest runs behind any game's mean (`runs`: a source may give means without the runs' own scores)."""
    algorithm: str
    protocol: str
    sources: list[str]
    means: dict[str, float]
    seeds: dict[str, list[float]]
    runs: int


COLUMNS = {"game", "algorithm", "score", "seeds", "protocol", "source"}  # what read() takes from each file
SEED_COLUMNS = {"game", "algorithm", "score"}


def problem(path: Path) -> str | None:
    """Why `path` (with its _seeds file beside it) cannot be read as published scores; None if it can. Asked
    before a suite runs, so that a bad file is told in one line then, not after hours of runs."""
    seeds = path.with_name(path.stem + "_seeds.csv")
    for file, needed, numbers in ((path, COLUMNS, ("score", "seeds")), (seeds, SEED_COLUMNS, ("score",))):
        # a score is any number, seeds a count (read() takes them as float and int)
        if file == path or file.is_file():
            try:
                with file.open(newline="", encoding="utf-8") as f:
                    reader = csv.DictReader(f)
                    header, rows = set(reader.fieldnames or ()), list(reader)
            except (OSError, UnicodeDecodeError, csv.Error) as e:
                return f"{file} cannot be read as CSV ({e})"
            if missing := needed - header:
                return f"{file} lacks the column(s) {', '.join(sorted(missing))}"
            if any(None in r or None in r.values() or not all(_number(r[k], k == "seeds") for k in numbers)
                   for r in rows):
                return (f"{file}: a row with more or fewer fields than its header, or a {' or '.join(numbers)} that "
                        "is not a number")
    return None


def _number(text: str, whole: bool) -> bool:
    try:
        (int if whole else float)(text)
        return True
    except ValueError:
        return False


def read(path: Path, games: list[str]) -> list[Published]:
    """The algorithms of `path` (and of its _seeds file beside it) that have every one of `games`, in file order."""
    rows = list(csv.DictReader(path.open()))
    per_seed = path.with_name(path.stem + "_seeds.csv")
    seed_rows = list(csv.DictReader(per_seed.open())) if per_seed.is_file() else []
    out = []
    for algorithm in dict.fromkeys(r["algorithm"] for r in rows):
        mine = {r["game"]: r for r in rows if r["algorithm"] == algorithm}
        if not all(g in mine for g in games):
            continue
        seeds = {g: [float(r["score"]) for r in seed_rows if r["algorithm"] == algorithm and r["game"] == g]
                 for g in games}
        out.append(Published(algorithm, mine[games[0]]["protocol"],
                             sorted({mine[g]["source"].split(" (")[0] for g in games}),
                             {g: float(mine[g]["score"]) for g in games}, seeds,
                             min(int(mine[g]["seeds"]) for g in games)))
    return out


def run_matrix(p: Published, games: list[str], normalize) -> list[list[float]] | None:
    """(runs, games) human-normalized scores from the first k runs of each game, k the fewest of any game; None
    without per-seed rows."""
    k = min((len(p.seeds[g]) for g in games), default=0)
    if k == 0:
        return None
    return [[normalize(g, p.seeds[g][i]) for g in games] for i in range(k)]


if __name__ == "__main__":
    import sys

    from hogwild_dqn.commands import not_a_command

    sys.exit(not_a_command(__spec__.name, "`python -m hogwild_dqn.tools.benchmark --report-only` (its report sets "
                                          "the published rows beside a suite)"))
