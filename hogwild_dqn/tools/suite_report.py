"""A benchmark suite's report: its runs' summaries read from their run dirs or records, and benchmark.md,
benchmark.csv, benchmark_curves.png and benchmark_profile.png written from them (tools/benchmark.py runs the suite).

The report opens with the interquartile mean (IQM) of the human-normalized final scores pooled over runs x games (the
last weights over --final-eval-episodes games), then that of the games' means, each with a 95% stratified-bootstrap
confidence interval (rliable: Agarwal et al. 2021; `make install-benchmark`), then per game the mean ± std over
seeds. Beside it (benchmark_beside.png): other suites' records (--compare, e.g. A3C's: their IQM, performance
profile, the probability that a run of ours beats one of theirs, benchmark_improvement.png, and the games where
our mean is below theirs by more than their std over seeds) and published scores
(--published; on Atari docs/published/atari_10m.csv by default), each row with its protocol, and Atari-5's estimate
of the 57-game median where the suite has its five games (the paper's band and an interval over runs; the suite's own
estimate under its IQM).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import statistics
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hogwild_dqn.config import ConfigError
from hogwild_dqn.envs import resolve
from hogwild_dqn.evaluation.scores import is_periodic
from hogwild_dqn.tools import atari5, published
from hogwild_dqn.tools.machine import sessions_line
from hogwild_dqn.tools.output import fmt, pyplot, save, seeds_said, spread, write_text
from hogwild_dqn.tools.runs import done, ended, read_json, read_yaml_file, sessions_file, suite_folder, summary_at

SB3 = "sb3_a2c"  # the baseline's name in run dirs and tables
OLDER_PROTOCOL = ("not recorded (runs before the protocol was named: no sticky actions, up to 30 no-op starts, no "
                  "FIRE reset)")
# (random, human) scores with no-op starts, from DeepMind's dqn_zoo (dqn_zoo/atari_data.py), the table most
# papers since 2015 normalize with; the A3C paper used its own human-starts table.
HUMAN_REFERENCE = {"Pong": (-20.7, 14.6), "Breakout": (1.7, 30.5), "SpaceInvaders": (148.0, 1668.7),
                   "BeamRider": (363.9, 16926.5), "Qbert": (163.9, 13455.0), "Seaquest": (68.4, 42054.7),
                   "Enduro": (0.0, 860.5), "MsPacman": (307.3, 6951.6), "Asterix": (210.0, 8503.3),
                   "BattleZone": (2360.0, 37187.5), "DoubleDunk": (-18.6, -16.4), "NameThisGame": (2292.3, 8049.0),
                   "Phoenix": (761.4, 7242.6)}


class BenchmarkError(ConfigError):
    """A missing optional package, or a run that train.py refused; printed as one line, exit 2."""


@dataclass
class Score:
    """One run's result as the report reads it from its summary.json."""
    game: str
    seed: int
    status: str
    frames: int
    wall_minutes: float
    final_mean: float | None
    final_std: float | None
    episodes: int
    best_periodic: float | None
    reference: tuple[float, float] | None  # (random, human) scores of the game, if known
    curve: list[tuple[int, float]]  # (frames, mean return) of each periodic evaluation
    source: str | None = None  # where a record rebuilt after its run dir was lost came from
    protocol: str | None = None  # the env as its summary names it (envs.protocol); None in older records
    sessions: list[dict] | None = None  # the machine during each session of the run (tools/machine.py)
    budget: tuple | None = None  # (frames, workers) the run was asked for, where its config says (None: older)

    @property
    def normalized(self) -> float | None:
        if self.reference is None or self.final_mean is None:
            return None
        return (self.final_mean - self.reference[0]) / (self.reference[1] - self.reference[0])


def run_name(game: str, algo: str, seed: int) -> str:
    return f"{game.replace('/', '_')}-{algo}-s{seed}"


def read_summary(args: argparse.Namespace, name: str) -> dict | None:
    """A run's summary: its run dir's, else its record's (--record) once it has ended there."""
    summary = run_summary(args, name)
    if args.record and not (summary and done(summary)):
        kept = summary_at(args.record / f"{name}.json")
        summary = kept if kept and done(kept) else summary
    return summary


def run_summary(args: argparse.Namespace, name: str) -> dict | None:
    """A run dir's summary.json with the machine during each of its sessions (<run>.sessions.json) added."""
    summary = summary_at(args.logdir / name / "summary.json")
    sessions = read_json(sessions_file(args.logdir / name)) if summary else None
    return {**summary, "sessions": sessions} if isinstance(sessions, list) and sessions else summary


def read_scores(args: argparse.Namespace, algo: str | None = None) -> list[Score]:
    """The runs of `algo` (ours by default) that have a summary.json."""
    scores = []
    for game in args.games:
        for seed in args.seeds:
            name = run_name(game, algo or args.algo, seed)
            s = read_summary(args, name)
            if s is None:
                continue
            final = s.get("final_eval") or {}
            cfg = s.get("config") or read_yaml_file(args.logdir / name / "config.yaml")
            scores.append(Score(game, seed, s["status"], s["frames"], s["wall_seconds"] / 60,
                                final.get("mean_return"), final.get("std_return"), final.get("episodes", 0),
                                s.get("best_eval_return"), args.reference.get(game),
                                [(e["frames"], e["mean_return"]) for e in s.get("evals", [])
                                 if is_periodic(e)],
                                s.get("recovered_from"), s.get("protocol"), s.get("sessions"),
                                (cfg.get("frames"), s.get("threads")) if isinstance(cfg, dict) else None))
    return scores


def read_records(args: argparse.Namespace, folder: Path) -> tuple[str, list[Score]]:
    """Another suite's ended runs of this suite's games and seeds, from its records; and its algorithm."""
    scores, algos = [], set()
    for path in sorted(folder.glob("*.json")):
        s = summary_at(path)
        if not s or not done(s) or s.get("game") not in args.games or s.get("seed") not in args.seeds:
            continue
        algos.add(s["algo"])
        final = s["final_eval"]
        scores.append(Score(s["game"], s["seed"], s["status"], s["frames"], s["wall_seconds"] / 60,
                            final["mean_return"], final.get("std_return"), final.get("episodes", 0),
                            s.get("best_eval_return"), args.reference.get(s["game"]), [], protocol=s.get("protocol"),
                            sessions=s.get("sessions")))
    return "/".join(sorted(algos)) or folder.name, scores


def protocols(scores: list[Score]) -> list[str]:
    """The env of each game as its runs name it (sticky actions, no-op starts, FIRE reset, episode cap)."""
    named = {s.game: s.protocol for s in scores if s.protocol}
    return [named.get(g) or (g if "-v" in g else f"{g}: {OLDER_PROTOCOL}")
            for g in dict.fromkeys(s.game for s in scores)]


def codes(scores: list[Score]) -> str:
    """The code the runs ran on, as their sessions name it, with how many runs each (a run resumed on other code
    counts under each)."""
    runs: dict[str, int] = {}
    for s in scores:
        for code in dict.fromkeys(x.get("code") or "not named in the record" for x in s.sessions or [{}]):
            runs[code] = runs.get(code, 0) + 1
    return "; ".join(f"{code} ({n} run{'s' * (n > 1)})" for code, n in runs.items())


def rliable():
    """rliable's library and metrics modules (an optional package: requirements-benchmark.txt)."""
    try:
        from rliable import library, metrics
    except ImportError as e:
        raise BenchmarkError(f"the report needs rliable ({e.name} is missing): make install-benchmark, or "
                             "pip install -r requirements-benchmark.txt") from None
    return library, metrics


def aggregate(scores: list[Score], seeds: list[int], reps: int, taus=None) -> dict | None:
    """Over the games that have every seed scored and a human reference: the IQM of the games' mean
    human-normalized final scores (each game one value, as published suites compare), the IQM pooled over every
    run, each with its 95% stratified-bootstrap interval (seeds resampled within each game, both from the same
    resamples; the bounds None with one seed: NO_INTERVAL), the performance profile (rliable), and where those games
    hold Atari-5's, its atari5_estimate."""
    import numpy as np

    rly, metrics = rliable()
    games = sorted({s.game for s in scores})
    complete = [g for g in games if sum(1 for s in scores if s.game == g and s.normalized is not None) == len(seeds)]
    if not complete:
        return None
    matrix = run_matrix(scores, seeds, complete)
    taus = np.linspace(0.0, max(2.0, float(matrix.max()) * 1.05), 101) if taus is None else taus
    # both IQMs from the same resamples, and the profile's bands drawn after them from one seeded generator
    with resampled_alike():
        point, interval = rly.get_interval_estimates(
            {"run": matrix}, lambda x: np.array([metrics.aggregate_iqm(x.mean(axis=0)), metrics.aggregate_iqm(x)]),
            reps=reps)
        profile, profile_ci = rly.create_performance_profile({"run": matrix}, taus)
    (game_iqm, iqm), (game_low, low), (game_high, high) = point["run"], interval["run"][0], interval["run"][1]
    if one_run(matrix):
        game_low = game_high = low = high = None
    raw = run_matrix(scores, seeds, complete, raw=True)
    five = all(g in complete for g in atari5.GAMES)  # what Atari-5's games are run for, estimated once here
    return {"atari5": atari5_estimate(dict(zip(complete, raw.mean(axis=0), strict=True)), raw, complete, reps)
            if five else None,
            "games": complete, "game_iqm": float(game_iqm), "game_low": bound(game_low),
            "game_high": bound(game_high), "iqm": float(iqm), "low": bound(low), "high": bound(high),
            "median": float(np.median(matrix)), "mean": float(matrix.mean()),
            "taus": taus, "profile": profile["run"], "profile_ci": profile_ci["run"]}


def run_matrix(scores: list[Score], seeds: list[int], games: list[str], raw: bool = False):
    """(runs, games) human-normalized final scores, as rliable expects; with `raw`, the scores as played."""
    import numpy as np

    return np.array([[next(s.final_mean if raw else s.normalized for s in scores if s.game == g and s.seed == seed)
                      for g in games] for seed in seeds])


NO_INTERVAL = "one run a game, so no interval over runs"


def one_run(*matrices) -> bool:
    """Whether each of `matrices` (runs x games) has one run a game: the stratified bootstrap, which resamples runs
    within each game, then has nothing to resample and its interval is a point (NO_INTERVAL)."""
    return all(len(m) == 1 for m in matrices)


def bound(x) -> float | None:
    """An interval's bound as a float, or None where there is no interval."""
    return None if x is None else float(x)


def worded(low: float | None, high: float | None, name: str = "95% stratified-bootstrap CI") -> str:
    """An interval as the report words it, or that it has none."""
    return NO_INTERVAL if low is None else f"{name} {low:.3f} to {high:.3f}"


def shown(iqm: float | None, low: float | None, high: float | None) -> str:
    """An IQM and its interval in a table's cell."""
    if iqm is None:
        return "—"
    return f"{iqm:.3f} (one run a game)" if low is None else f"{iqm:.3f} ({low:.3f}-{high:.3f})"


@contextmanager
def resampled_alike():
    """numpy's global generator seeded for rliable's resampling, and the caller's state put back after. rliable 1.2
    resamples from that generator (its random_state reaches arch, which its StratifiedBootstrap.update_indices
    bypasses): seeded, the same records give the same intervals and profile bands every time."""
    import numpy as np

    state = np.random.get_state()
    np.random.seed(0)
    try:
        yield
    finally:
        np.random.set_state(state)


def interval(matrices: dict, statistic, reps: int) -> dict:
    """rliable's point estimates and 95% stratified-bootstrap intervals of `statistic` for each entry of
    `matrices` (a matrix, or a tuple of them for a paired statistic): {name: (point, low, high)}, low and high None
    where every matrix of the entry has one run a game (one_run)."""
    rly, _ = rliable()
    with resampled_alike():
        point, ci = rly.get_interval_estimates(matrices, statistic, reps=reps)
    out = {}
    for k, m in matrices.items():
        single = one_run(*(m if isinstance(m, tuple) else (m,)))
        out[k] = (float(point[k][0]), *((None, None) if single else (float(ci[k][0][0]), float(ci[k][1][0]))))
    return out


def plot_profile(agg: dict, label: str, out: Path, others: dict | None = None) -> None:
    """The performance profile of the suite (`agg`, aggregate's), with those of `others` ({label: agg}) beside."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, a in {label: agg, **(others or {})}.items():
        ax.plot(a["taus"], a["profile"], label=name)
        ax.fill_between(a["taus"], a["profile_ci"][0], a["profile_ci"][1], alpha=0.25)
    ax.set_xlabel("human-normalized score τ")
    ax.set_ylabel("fraction of runs with score > τ")
    ax.set_title(f"performance profile over {len(agg['games'])} games (95% CI)")
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, out)


def beside_others(args: argparse.Namespace, scores: list[Score], agg: dict, out: Path) -> list[str]:
    """Other suites' records (--compare) and published algorithms (--published) on this suite's games: each one's
    IQM pooled over runs x games with its interval, each game's mean score, the probability that a run of ours
    beats one of a compared suite's (rliable's, averaged over games), and the figure of the IQMs
    (benchmark_beside.png) and of the probabilities (benchmark_improvement.png); the compared suites' performance
    profiles join ours. Nothing without either."""
    _, metrics = rliable()
    games = [g for g in args.games if g in agg["games"]]  # the suite's order
    protocol = next((s.protocol for s in scores if s.protocol), "not recorded")
    means = {g: statistics.mean(s.final_mean for s in scores if s.game == g) for g in games}
    five = all(g in games for g in atari5.GAMES)  # Atari-5's estimate of the 57-game median, where it applies
    rows = [(f"{args.label or f'{args.algo}, this suite'} ({seeds_said(len(args.seeds))})", protocol,
             (agg["iqm"], agg["low"], agg["high"]), means, agg["atari5"])]
    compared, lines, profiles, improvements = beside_suites(args, scores, agg, out, games, means, metrics)
    rows += compared
    rows += beside_published(args, games, five, metrics)
    if len(rows) == 1:
        return []
    head = beside_table(args, games, rows, five)
    plot_beside([(r[0], r[2]) for r in rows if r[2][0] is not None], out / "benchmark_beside.png")
    agg["others"] = profiles
    figures = ["", "![IQM of each algorithm](benchmark_beside.png)"]
    if improvements:
        plot_improvement(improvements, out / "benchmark_improvement.png")
        figures += ["", "![probability of improvement over each compared suite](benchmark_improvement.png)"]
    return head + ([""] + lines if lines else []) + figures


def beside_suites(args: argparse.Namespace, scores: list[Score], agg: dict, out: Path, games: list[str],
                  means: dict[str, float], metrics) -> tuple[list[tuple], list[str], dict, dict]:
    """Each --compare suite's row of the table, its lines under it (the probability that a run of ours beats one
    of its, the games where our mean is below its), its performance profile and its probability of improvement."""
    import numpy as np

    ours = run_matrix(scores, args.seeds, games)
    rows, lines, profiles, improvements = [], [], {}, {}
    # a suite is named by its folder beside its algorithm: two suites of one algorithm (epochs, protocols) differ
    ours_name = f"{args.algo} ({suite_folder(args.record or out).name})"
    for folder in args.compare:
        algo, theirs = read_records(args, folder)
        theirs = [s for s in theirs if s.game in games]  # their IQM over this suite's games, not all of theirs
        seeds = sorted({s.seed for s in theirs})
        if not seeds or any(sum(1 for s in theirs if s.game == g) != len(seeds) for g in games):
            lines.append(f"- `{folder}`: not every game of this suite has all of its seeds there; left out.")
            continue
        their = aggregate(theirs, seeds, args.reps, agg["taus"])
        matrix = run_matrix(theirs, seeds, games)
        poi = interval({"poi": (ours, matrix)},
                       lambda x, y: np.array([metrics.probability_of_improvement(x, y)]), args.reps)["poi"]
        label = f"{args.compare_labels.get(folder) or f'{algo}, `{folder}`'} ({seeds_said(len(seeds))})"
        rows.append((label, next((s.protocol for s in theirs if s.protocol), OLDER_PROTOCOL),
                     (their["iqm"], their["low"], their["high"]),
                     {g: statistics.mean(s.final_mean for s in theirs if s.game == g) for g in games},
                     their["atari5"]))
        their_name = f"{algo} ({suite_folder(folder).name})"
        profiles[their_name] = their
        improvements[f"{ours_name};{their_name}"] = poi
        lines.append(f"- P({ours_name} > {their_name}): a run of this suite scores above one of `{folder}` on the "
                     f"same game with probability **{poi[0]:.3f}** ("
                     f"{worded(*poi[1:], name='95% CI')}; rliable's "
                     "probability of improvement, averaged over games).")
        lines.append(f"- Game by game against {their_name}: " + below(means, theirs, games))
    return rows, lines, profiles, improvements


def beside_published(args: argparse.Namespace, games: list[str], five: bool, metrics) -> list[tuple]:
    """Each published algorithm's row of the table (--published): its IQM where the source gives each run's
    scores, its games' mean scores, and where `five`, its Atari-5 estimate."""
    import numpy as np

    ref = args.reference

    def normalize(game: str, score: float) -> float:
        return (score - ref[game][0]) / (ref[game][1] - ref[game][0])

    rows = []
    for pub in published.read(args.published, games) if args.published else []:
        runs = published.run_matrix(pub, games, normalize)
        iqm = (interval({"iqm": np.array(runs)}, lambda x: np.array([metrics.aggregate_iqm(x)]), args.reps)["iqm"]
               if runs else (None, None, None))
        # without per-run scores there is no pooled IQM to give, only the means the source gives
        label = f"{pub.algorithm} ({seeds_said(len(runs))})" if runs else f"{pub.algorithm} (means of {pub.runs} runs)"
        raw = published.run_matrix(pub, games, lambda game, score: score)
        rows.append((label, pub.protocol, iqm, pub.means,
                     atari5_estimate(pub.means, np.array(raw) if raw else None, games, args.reps) if five else None))
    return rows


def beside_table(args: argparse.Namespace, games: list[str], rows: list[tuple], five: bool) -> list[str]:
    """The table of the suite beside the other algorithms, with what its columns and rows are said above it."""
    on = f"these {len(games)} games" if len(games) > 1 else games[0]
    head = ["", f"Beside other algorithms on {on} (IQM pooled over runs x games, 95% "
            "stratified-bootstrap CI; each game's mean score over seeds)."
            + (f" Published rows: `{_shown(args.published)}` (their sources and how they were read: NOTES.md beside "
               "it); a protocol unlike ours (sticky actions, training returns) makes a row a neighbour, not a rival."
               if args.published else "")
            + (" Atari-5 (Aitchison et al. 2023, `hogwild_dqn/tools/atari5.py`) estimates each row's median "
               "human-normalized score over the 57 games from its five games' mean scores; the band is the paper's "
               f"relative error, ±{atari5.RELATIVE_ERROR:.1%} (on final scores: at 10M frames its estimates of "
               "Dopamine's agents erred more, NOTES.md), the CI the estimate's 95% stratified-bootstrap interval over "
               "runs, where a row has two or more." if five else ""),
            "", f"| algorithm | protocol | IQM (95% CI) | {' | '.join(games)} |"
            + (" Atari-5: 57-game median (band; CI over runs) |" if five else ""),
            "| --- | --- | --- |" + " --- |" * (len(games) + five)]
    for label, protocol, (iqm, low, high), game_means, estimate in rows:
        game, _, rest = protocol.partition(", ")  # our protocols name their game first
        head.append(f"| {label} | {rest if game in args.games else protocol} | "
                    f"{shown(iqm, low, high)} | " + " | ".join(fmt(game_means[g]) for g in games) + " |"
                    + (f" {atari5_cell(estimate)} |" if five else ""))
    return head


def below(means: dict[str, float], theirs: list[Score], games: list[str]) -> str:
    """The games whose mean final score is below another suite's mean by more than that suite's spread over seeds
    (the std of its seeds' finals): the test a candidate default passes beside the default it would replace."""
    if len({s.seed for s in theirs}) < 2:
        return "one seed a game there, so no spread over seeds to hold the means against."
    lower = []
    for game in games:
        finals = [s.final_mean for s in theirs if s.game == game and s.final_mean is not None]
        if len(finals) > 1 and means[game] < statistics.mean(finals) - statistics.stdev(finals):
            lower.append(f"{game} ({fmt(means[game])} against {spread(finals)})")
    if not lower:
        return ("this suite's mean is not below its mean by more than its std over seeds on "
                f"{'any of the ' + str(len(games)) + ' games' if len(games) > 1 else games[0]}.")
    where = f"{len(lower)} of the {len(games)} games" if len(games) > 1 else "its one game"
    return f"this suite's mean is below its mean by more than its std over seeds on {where}: {', '.join(lower)}."


def atari5_estimate(means: dict[str, float], raw, games: list[str], reps: int) -> tuple:
    """Atari-5's estimate of the 57-game median from the games' mean scores, its band (the paper's relative error)
    and, where `raw` (runs x games, scores as played) has two runs or more, its 95% stratified-bootstrap interval
    over runs, the seeds' spread, which the band does not hold (else None): (estimate, low, high, interval)."""
    import numpy as np

    median, low, high = atari5.estimate(means)
    if raw is None or one_run(raw):
        return median, low, high, None

    def estimate(x):
        return np.array([atari5.estimate(dict(zip(games, x.mean(axis=0), strict=True)))[0]])

    _, ci_low, ci_high = interval({"atari5": raw}, estimate, reps)["atari5"]
    return median, low, high, (ci_low, ci_high)


def atari5_cell(estimate: tuple) -> str:
    """A table's cell of an atari5_estimate: "estimate (band; interval)"."""
    median, low, high, ci = estimate
    return f"{median:.3f} ({low:.3f}-{high:.3f}" + (f"; {ci[0]:.3f}-{ci[1]:.3f})" if ci else ")")


def plot_improvement(improvements: dict[str, tuple[float, float | None, float | None]], out: Path) -> None:
    """rliable's figure of the probability of improvement, one bar (its 95% interval, the estimate a tick) per
    pair "X;Y" of `improvements` ({pair: (point, low, high)})."""
    import numpy as np

    plt = pyplot()
    from rliable import plot_utils

    fig, ax = plt.subplots(figsize=(7, 0.6 * len(improvements) + 1.4))
    plot_utils.plot_probability_of_improvement(
        {k: np.array([p]) for k, (p, _, _) in improvements.items()},
        {k: np.array([p, p] if low is None else [low, high]) for k, (p, low, high) in improvements.items()},
        pair_separator=";", ax=ax,
        xticks=[0.0, 0.25, 0.5, 0.75, 1.0], xlabel="P(a run of X scores above one of Y on the same game)",
        left_ylabel="X", right_ylabel="Y", ticklabelsize="small", labelsize="medium")
    ax.set_xlim(0, 1)
    save(fig, out)


def _shown(path: Path) -> str:
    """A path as a reader of the report finds it: relative to where the command ran, where it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def plot_beside(rows: list[tuple[str, tuple[float, float | None, float | None]]], out: Path) -> None:
    """Each algorithm's IQM with its interval where it has one, one line each."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.2))
    for i, (_, (iqm, low, high)) in enumerate(reversed(rows)):
        ax.errorbar(iqm, i, xerr=None if low is None else [[iqm - low], [high - iqm]], fmt="o",
                    color="tab:blue" if i == len(rows) - 1 else "tab:gray", capsize=3)
    ax.set_yticks(range(len(rows)), [label.replace("`", "") for label, _ in reversed(rows)], fontsize=8)
    ax.set_xlabel("IQM of human-normalized scores (95% CI)")
    ax.grid(alpha=0.3, axis="x")
    save(fig, out)


def units(games) -> tuple[str, str]:
    """What a suite counts in: an Atari run's frames and games, else a task's steps and episodes."""
    return ("frames", "games") if all(resolve(g)[0] for g in games) else ("steps", "episodes")


def plot_curves(args: argparse.Namespace, ours: list[Score], theirs: list[Score], out: Path) -> None:
    """One panel per game: each run's periodic evaluations against frames, ours and the baseline's, its final
    score a dot at its last frame."""
    plt = pyplot()

    cols = math.ceil(math.sqrt(len(args.games)))
    rows = math.ceil(len(args.games) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.4 * rows), squeeze=False)
    for ax, game in zip(axes.flat, args.games, strict=False):
        for runs, label, color in ((ours, args.algo, "tab:blue"), (theirs, "SB3 A2C", "tab:orange")):
            for r in (s for s in runs if s.game == game):
                if r.curve:
                    ax.plot(*zip(*r.curve, strict=True), color=color, alpha=0.7)
                if r.final_mean is not None:  # the legend names each side by its first final score (a rebuilt
                    ax.plot(r.frames, r.final_mean, "o", color=color, label=label)  # record has no curve)
                    label = None
        ax.set_title(game)
        ax.set_xlim(0, args.frames * 1.03)
        ax.set_xlabel(units(args.games)[0])
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    for ax in axes.flat[len(args.games):]:
        ax.set_visible(False)
    fig.suptitle("periodic evaluations (lines) and final score (dots), one line per seed", fontsize=10)
    save(fig, out, dpi=90)


def write_csv(args: argparse.Namespace, ours: list[Score], theirs: list[Score], path: Path) -> None:
    """One row per run, ours then the baseline's."""
    rows = io.StringIO(newline="")
    w = csv.writer(rows)
    w.writerow(["game", "algo", "seed", "status", "frames", "wall_minutes", "final_mean", "final_std",
                "final_episodes", "human_normalized", "best_periodic_eval"])
    for algo, scores in ((args.algo, ours), (SB3, theirs)):
        for s in scores:
            w.writerow([s.game, algo, s.seed, s.status, s.frames, f"{s.wall_minutes:.1f}", s.final_mean,
                        s.final_std, s.episodes, fmt(s.normalized, ".4f"), s.best_periodic])
    write_text(path, rows.getvalue())


def game_row(game: str, runs: list[Score], seeds: int) -> str:
    """A game's line of the table: its runs' final scores over seeds."""
    if not runs:
        return f"| {game} | 0/{seeds} | not run yet | | | | |"
    scored = [s for s in runs if s.final_mean is not None]
    norm = [s.normalized for s in scored if s.normalized is not None]
    best = [s.best_periodic for s in runs if s.best_periodic is not None]
    each = ", ".join(f"s{s.seed} {fmt(s.final_mean)}" + ("" if ended(s.status, s.final_mean) else f" ({s.status})")
                     for s in runs)
    return (f"| {game} | {len(scored)}/{seeds} | {spread([s.final_mean for s in scored])} | "
            f"{fmt(statistics.mean(norm) if norm else None, '.3f')} | {each} | "
            f"{fmt(statistics.mean(best) if best else None)} | {minutes(runs)} |")


def minutes(runs: list[Score]) -> str:
    """Each run's wall minutes, not their mean: a suite's runs can span machines of different speeds (chain.log
    names each run's), and a mean over them would be no machine's time; with the bare emulator's speed and the
    share of the CPU other work took, where the record has them."""
    return ", ".join(f"s{s.seed} {s.wall_minutes:.1f}{sessions_line(s.sessions)}" for s in runs) if runs else "—"


def _spread(runs: list[Score]) -> str:
    finals = [s.final_mean for s in runs if s.final_mean is not None]
    return f"{spread(finals)} ({len(finals)})" if finals else "—"


def beside_sb3(args: argparse.Namespace, ours: list[Score], theirs: list[Score]) -> list[str]:
    """The table of our final scores beside SB3 A2C's, game by game (none without SB3 runs)."""
    if not theirs:
        return []
    lines = ["", "Beside Stable-Baselines3 A2C (rl-zoo's settings, baselines/sb3_a2c.py; the same "
             f"{units(args.games)[0]} and seeds, "
             "on the same machine; wall minutes as each run measured them, which compare only where the runs had "
             "the machine alike: `chain.log` says when each ran):", "",
             f"| game | {args.algo}: final (mean ± std over seeds, runs) | SB3 A2C: final | {args.algo} wall minutes, "
             "each seed | SB3 A2C wall minutes, each seed | each seed, ours / SB3 |",
             "| --- | --- | --- | --- | --- | --- |"]
    for game in args.games:
        a, b = [s for s in ours if s.game == game], [s for s in theirs if s.game == game]
        seeds = ", ".join(f"s{seed} {fmt(next((s.final_mean for s in a if s.seed == seed), None))} / "
                          f"{fmt(next((s.final_mean for s in b if s.seed == seed), None))}" for seed in args.seeds)
        lines.append(f"| {game} | {_spread(a)} | {_spread(b)} | {minutes(a)} | {minutes(b)} | {seeds} |")
    return lines


def write_report(args: argparse.Namespace) -> Path:
    """benchmark.md, benchmark.csv, benchmark_curves.png and benchmark_profile.png in --out (and
    benchmark_beside.png with --compare or --published); return benchmark.md's path. The headline is rliable's IQM
    pooled over runs x games; the table of each game's runs under it."""
    scores = read_scores(args)
    if not scores:
        raise BenchmarkError(f"no finished or cut runs of this suite under {args.logdir}")
    check_budget(args, scores)
    out = args.out or args.logdir
    out.mkdir(parents=True, exist_ok=True)
    normalized = normalized_with(args)
    frames, games = units(args.games)
    agg = aggregate(scores, args.seeds, args.reps)
    lines = [f"# Benchmark: {args.algo}, {args.threads} workers, {args.frames:,} {frames}, seeds "
             f"{' '.join(map(str, args.seeds))}", ""]
    lines += headline(args, agg)
    lines += runs_table(args, scores, games, normalized)
    theirs = read_scores(args, SB3)
    write_csv(args, scores, theirs, out / "benchmark.csv")
    for source in sorted({s.source for s in scores + theirs if s.source}):
        runs = ", ".join(f"{s.game} s{s.seed} ({algo})" for algo, runs in ((args.algo, scores), ("SB3 A2C", theirs))
                         for s in runs if s.source == source)
        lines += ["", f"Records rebuilt from {source}, their run dirs lost (so no curve): {runs}."]
    lines += beside_sb3(args, scores, theirs)
    if agg is not None:
        lines += beside_others(args, scores, agg, out)
    plot_curves(args, scores, theirs, out / "benchmark_curves.png")
    lines += ["", "![evaluations against frames, each run](benchmark_curves.png)"]
    if agg is not None:
        # beside other suites, each named by its folder: this one too
        named = f" ({suite_folder(args.record or out).name})" if agg.get("others") else ""
        label = f"{args.algo}{named}, {args.threads} workers, {args.frames / 1e6:g}M {frames}"
        plot_profile(agg, label, out / "benchmark_profile.png", agg.get("others"))
        lines += ["", "![performance profile](benchmark_profile.png)"]
    write_text(out / "benchmark.md", "\n".join(lines) + "\n")
    return out / "benchmark.md"


def check_budget(args: argparse.Namespace, scores: list[Score]) -> None:
    """Refuse runs whose config asked for other frames or workers than this report's flags."""
    # the header and the curves' axis are the flags': runs of another budget would be tabled as runs they are not
    other = next((s for s in scores if s.budget and s.budget[0] is not None
                  and s.budget != (args.frames, args.threads)), None)
    if other:
        raise BenchmarkError(f"{other.game} seed {other.seed} was run with {other.budget[0]:,} frames and "
                             f"{other.budget[1]} workers, not this report's --frames {args.frames} --threads "
                             f"{args.threads}: give the runs' own")


def normalized_with(args: argparse.Namespace) -> str:
    """The sentence naming the random and human scores the scores are normalized with ("" where none is known)."""
    references = ", ".join(f"{g} {args.reference[g][0]:g} / {args.reference[g][1]:g}" for g in args.games
                           if g in args.reference)
    return (" Human-normalized as (score − random) / (human − random) with the random and human scores "
            f"{references} (no-op starts, DeepMind's dqn_zoo `atari_data.py`, unless given with --reference)."
            if references else "")


def headline(args: argparse.Namespace, agg: dict | None) -> list[str]:
    """The report's opening lines: the IQMs with their intervals and Atari-5's estimate, or why there are none."""
    if not any(g in args.reference for g in args.games):
        return ["No IQM: these games have no random and human reference scores (--reference adds them).", ""]
    if agg is None:
        return ["IQM: no game has all its seeds scored yet.", ""]
    missing = [g for g in args.games if g not in agg["games"]]
    runs = len(agg["games"]) * len(args.seeds)
    # Until every game has its seeds, the IQM of those that do is not the suite's: said so first, not bold.
    have = "has" if len(agg["games"]) == 1 else "have"
    partial = (f"So far, not yet the suite's: {len(agg['games'])} of its {len(args.games)} games {have} all their "
               f"seeds ({', '.join(agg['games'])}). " if missing else "")
    bold = "" if missing else "**"
    resamples = "" if agg["low"] is None else f"; {args.reps:,} resamples"  # they say nothing without an interval
    lines = [f"{partial}{bold}IQM of human-normalized final scores, pooled over the {runs} runs (rliable): "
             f"{agg['iqm']:.3f} ({worded(agg['low'], agg['high'])}){bold} over "
             f"{len(agg['games'])} "
             f"game{'s' * (len(agg['games']) != 1)} x {seeds_said(len(args.seeds))}; median {agg['median']:.3f}, "
             f"mean {agg['mean']:.3f}{resamples}. IQM of the games' mean human-normalized final "
             f"scores: {agg['game_iqm']:.3f} ({worded(agg['game_low'], agg['game_high'])}), each game one value."
             + (f" Not yet in them: {', '.join(missing)}." if missing else ""), ""]
    if agg["atari5"]:
        median, low, high, ci = agg["atari5"]
        lines += [f"{bold}Atari-5's estimate of the median human-normalized score over the 57 games (Aitchison et "
                  f"al. 2023): {median:.3f}{bold} (the paper's band of ±{atari5.RELATIVE_ERROR:.1%}: {low:.3f} to "
                  f"{high:.3f}" + (f"; 95% stratified-bootstrap CI over runs {ci[0]:.3f} to {ci[1]:.3f}" if ci else
                                   f"; {NO_INTERVAL}")
                  + "), from its five games' mean scores; published algorithms' estimates beside it below.", ""]
    return lines


def runs_table(args: argparse.Namespace, scores: list[Score], games: str, normalized: str) -> list[str]:
    """Where the runs are and what a run's score is, the table of each game's runs, and their protocol and code."""
    lines = [f"Runs under `{args.logdir}`" + (f" or recorded in `{args.record}`" if args.record else "") +
             "; the code and machine of each run are in its `chain.log`. The score of a "
             f"run is its last weights over {max(s.episodes for s in scores)} {games} (`final_eval` in its "
             f"summary.json).{normalized}", "",
             "| game | runs scored | final score (mean ± std over seeds) | human-normalized (mean) | each seed's "
             "final score | best periodic evaluation, mean over seeds (a curve point, not the score) | wall "
             "minutes, each seed (bare emulator frames/s, other work's share of the CPU) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [game_row(g, [s for s in scores if s.game == g], len(args.seeds)) for g in args.games]
    lines += ["", "Protocol of each game, as its runs' summaries name it: " + "; ".join(protocols(scores)) + "."]
    if any(x.get("code") for s in scores for x in s.sessions or []):  # records older than sessions name none
        lines += ["", f"Code of the runs, as their records' sessions name it: {codes(scores)}."]
    return lines


if __name__ == "__main__":
    import sys

    from hogwild_dqn.commands import not_a_command

    sys.exit(not_a_command(__spec__.name, "`python -m hogwild_dqn.tools.benchmark --report-only`"))
