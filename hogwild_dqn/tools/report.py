"""Sweep report: learning curves, the paper's speedup table (Table 2) and frames/s against thread count.

    python -m hogwild_dqn.tools.report --logdir runs [--game Pong] [--score 18]      (or: make report LOGDIR=runs)

Reads every run dir under --logdir (summary.json, or the tensorboard event files of a run that has none
yet) and writes report.md and PNG plots into --logdir. Unfinished runs are listed as such. A sweep is of one game:
with runs of several under --logdir, --game picks one.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hogwild_dqn.commands import command
from hogwild_dqn.config import Parser, is_number, variant
from hogwild_dqn.evaluation.scores import is_periodic
from hogwild_dqn.tools.output import fmt, pyplot, save, write_text
from hogwild_dqn.tools.runs import ended, summary_at

# Reference scores for the speedup table when --score is not given (CartPole: the classic "solved" mark;
# Atari: scores the paper's 16-thread agents passed early in training).
DEFAULT_SCORES = {"CartPole-v1": 195.0, "Pong": 18.0, "Breakout": 100.0, "SpaceInvaders": 600.0, "Qbert": 3000.0,
                  "Seaquest": 1000.0, "BeamRider": 2000.0}


class ReportError(ValueError):
    """Nothing to report, or no reference score; printed as one line, exit 2."""


@dataclass
class RunRecord:
    """What the report needs of one run dir."""
    path: Path
    game: str
    algo: str                        # config.variant: a3c, a3c-lstm, ...
    threads: int
    seed: int
    status: str                      # "finished", another final status, or "unfinished (no summary.json)"
    frames_per_second: float | None
    evals: list = field(default_factory=list)  # [{frames, wall_seconds, mean_return}, ...]
    frames: int | None = None        # global frames and wall seconds at the end (or the last evaluation)
    wall_seconds: float | None = None
    final: dict | None = None        # summary.json's final_eval: the last weights over many games, the score
    confirmed: dict | None = None    # summary.json's confirmed: frames and wall seconds to a confirmed --stop-return
    protocol: str | None = None      # the env as named beside its scores (None: a run before it was named)


def read_run(path: Path) -> RunRecord | None:
    """A run dir is a folder with a config.yaml; its results come from summary.json, else the event files."""
    cfg_file = path / "config.yaml"
    if not cfg_file.is_file():
        return None
    try:
        cfg = yaml.safe_load(cfg_file.read_text()) or {}
    except (OSError, yaml.YAMLError):
        cfg = None
    if not isinstance(cfg, dict) or not _config_well_formed(cfg):
        print(f"report: passed over {path}: its config.yaml is not a run's config", file=sys.stderr)
        return None
    algo = variant(cfg.get("algo", "?"), cfg.get("net", "ff"), cfg.get("obs_normalize", False),
                   cfg.get("value_normalize", False))
    summary_file = path / "summary.json"
    if summary_file.is_file():
        s = summary_at(summary_file)
        if s is None or not _well_formed(s):
            print(f"report: passed over {path}: its summary.json is not a run's summary", file=sys.stderr)
            return None
        return RunRecord(path, s["game"], algo, s["threads"], s["seed"], s["status"], s["frames_per_second"],
                   s["evals"], s.get("frames"), s.get("wall_seconds"), s.get("final_eval"), s.get("confirmed"),
                   s.get("protocol"))
    evals = evals_from_events(path)
    last = evals[-1] if evals else {}
    # threads null (one a core, of the machine that ran it): as many as wrote their own event files
    threads = cfg.get("threads") or len({p.name.rsplit(".", 1)[-1] for p in path.glob("events.*.worker*")})
    return RunRecord(path, cfg.get("game", "?"), algo, threads, cfg.get("seed", 0),
               "unfinished (no summary.json)", None, evals, last.get("frames"), last.get("wall_seconds"))


def _config_well_formed(cfg: dict) -> bool:
    """Whether a config.yaml's values the report reads are of their kinds (text names, whole numbers)."""
    return (all(isinstance(cfg.get(k, ""), str) for k in ("game", "algo", "net"))
            and all(cfg.get(k) is None or (isinstance(cfg[k], int) and not isinstance(cfg[k], bool))
                    for k in ("threads", "seed")))


def _well_formed(s: dict) -> bool:
    """Whether a summary.json (summary_at's) has what the report reads, of its kinds: a file edited by hand, or
    another program's, is passed over rather than failing the report."""
    return (isinstance(s.get("threads"), int) and not isinstance(s["threads"], bool) and s["threads"] >= 1
            and "frames_per_second" in s
            and (s["frames_per_second"] is None or is_number(s["frames_per_second"]))
            and isinstance(s.get("evals"), list)
            and all(isinstance(e, dict) and all(is_number(e.get(k)) for k in ("frames", "wall_seconds", "mean_return"))
                    for e in s["evals"]))


def evals_from_events(path: Path) -> list[dict]:
    """The eval/mean_return points of a run's tensorboard files (wall time from the events' timestamps)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(path))
    acc.Reload()
    if "eval/mean_return" not in acc.Tags().get("scalars", []):
        return []
    points = acc.Scalars("eval/mean_return")
    t0 = min(e.wall_time for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag))
    return [{"frames": e.step, "wall_seconds": e.wall_time - t0, "mean_return": e.value} for e in points]


def read_runs(logdir: Path) -> list[RunRecord]:
    return [r for r in (read_run(p.parent) for p in sorted(logdir.rglob("config.yaml"))) if r is not None]


def time_to_score(evals: list[dict], score: float) -> float | None:
    """Wall seconds at the first periodic evaluation whose mean return reaches `score` (None if never): a few
    games, a curve point (a confirmed score is the run's `confirmed`)."""
    return next((e["wall_seconds"] for e in evals if not e.get("confirmation") and e["mean_return"] >= score), None)


def speedup_table(runs: list[RunRecord], score: float) -> list[dict]:
    """Per algorithm and thread count: median time to `score` over seeds, and the speedup over 1 thread.

    A thread count none of whose runs reached the score has time None; speedups need 1 thread's time.
    """
    times = defaultdict(list)
    for r in runs:
        t = time_to_score(r.evals, score)
        times[(r.algo, r.threads)].append(t)
    rows = []
    for algo in sorted({a for a, _ in times}):
        reached = {n: [t for t in ts if t is not None] for (a, n), ts in times.items() if a == algo}
        base = statistics.median(reached[1]) if reached.get(1) else None
        for n in sorted(reached):
            t = statistics.median(reached[n]) if reached[n] else None
            rows.append({"algo": algo, "threads": n, "runs": len(times[(algo, n)]), "reached": len(reached[n]),
                         "seconds": t, "speedup": base / t if base and t else None})
    return rows


def plot_curves(runs: list[RunRecord], x: str, out: Path) -> None:
    """Eval return of every run against frames or wall time: a panel per algorithm, a colour per thread count.

    Dotted lines are unfinished runs.
    """
    algos = sorted({r.algo for r in runs})
    threads = sorted({r.threads for r in runs})
    plt = pyplot()
    colours = {n: plt.cm.viridis(i / max(1, len(threads) - 1)) for i, n in enumerate(threads)}
    fig, axes = plt.subplots(1, len(algos), figsize=(5 * len(algos), 4), squeeze=False, sharey=True)
    for ax, algo in zip(axes[0], algos, strict=True):
        labelled = set()
        for r in (r for r in runs if r.algo == algo and r.evals):
            curve = [e for e in r.evals if not e.get("confirmation")]  # a confirmation repeats its point's frames
            label = f"{r.threads} worker{'s' if r.threads > 1 else ''}" if r.threads not in labelled else None
            labelled.add(r.threads)
            ax.plot([e[x] for e in curve], [e["mean_return"] for e in curve], color=colours[r.threads],
                    label=label, linestyle="-" if ended(r.status, r.final) else ":", marker=".")
        ax.set_title(f"{' / '.join(sorted({r.game for r in runs}))} {algo}")
        ax.set_xlabel("global frames" if x == "frames" else "wall time (s)")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # runs without evaluations draw nothing to name
            ax.legend()
    axes[0][0].set_ylabel("evaluation mean return")
    save(fig, out)


def plot_bars(rows: list[dict], key: str, ylabel: str, out: Path, ideal: bool = False) -> None:
    """One line per algorithm of `key` against thread count (with the ideal linear speedup if asked)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for algo in sorted({r["algo"] for r in rows}):
        pts = [(r["threads"], r[key]) for r in rows if r["algo"] == algo and r[key] is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=algo)
    ns = sorted({r["threads"] for r in rows})
    if ideal and rows:
        ax.plot(ns, ns, "k--", alpha=0.4, label="linear")
    ax.set_xticks(ns)
    ax.set_xlabel("threads (worker processes)")
    ax.set_ylabel(ylabel)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    ax.grid(alpha=0.3)
    save(fig, out)


def write_report(logdir: Path, score: float | None, game: str | None = None) -> Path:
    """Write report.md and the PNGs into logdir (the runs of `game`, where runs of several games are there);
    return the report's path."""
    runs = read_runs(logdir)
    if not runs:
        raise ReportError(f"no run dirs (folders with a config.yaml) under {logdir}, or none readable")
    games = sorted({r.game for r in runs})
    if game is not None:
        runs = [r for r in runs if r.game == game]
        if not runs:
            raise ReportError(f"--game {game}: no run of it under {logdir} (its games: {', '.join(games)})")
        games = [game]
    elif len(games) > 1:  # one speedup table over several games would time each against one game's score
        raise ReportError(f"runs of {len(games)} games under {logdir} ({', '.join(games)}): a sweep's report is of "
                          "one game; choose it with --game")
    score = score if score is not None else DEFAULT_SCORES.get(games[0])
    if score is None:
        raise ReportError(f"no default reference score for {games[0]}; pass --score")
    plot_curves(runs, "frames", logdir / "curves_frames.png")
    plot_curves(runs, "wall_seconds", logdir / "curves_wall.png")
    rows = speedup_table(runs, score)
    plot_bars(rows, "speedup", f"speedup to reach {score:g}", logdir / "speedup.png", ideal=True)
    fps = defaultdict(list)
    for r in runs:
        if r.frames_per_second:
            fps[(r.algo, r.threads)].append(r.frames_per_second)
    fps_rows = [{"algo": a, "threads": n, "fps": statistics.median(v)} for (a, n), v in sorted(fps.items())]
    plot_bars(fps_rows, "fps", "frames per second (median over runs)", logdir / "fps.png")

    lines = [f"# Sweep report: {', '.join(games)}", "",
             f"Runs under `{logdir}`: {len(runs)}. Reference score for the speedup table: {score:g}.", "",
             "## Speedup (the paper's Table 2)", "",
             "| algo | threads | runs | reached | median seconds to score | speedup over 1 thread |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['algo']} | {r['threads']} | {r['runs']} | {r['reached']} | {fmt(r['seconds'])} | "
              f"{fmt(r['speedup'], '.2f')} |" for r in rows]
    lines += ["", "![speedup](speedup.png)", "", "## Frames per second", "",
              "| algo | threads | frames/s |", "| --- | --- | --- |"]
    lines += [f"| {r['algo']} | {r['threads']} | {r['fps']:.0f} |" for r in fps_rows]
    lines += ["", "![frames per second](fps.png)", "", "## Learning curves", "",
              "![eval return against frames](curves_frames.png)", "",
              "![eval return against wall time](curves_wall.png)", "", "## Runs", "",
              "| run | algo | threads | seed | status | evals | final eval (mean ± std, games) | best periodic eval "
              "| confirmed --stop-return (frames, minutes) | frames | wall minutes | frames/s | env |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        best = max((e["mean_return"] for e in r.evals if is_periodic(e)), default=None)
        confirmed = (f"{r.confirmed['frames']:,}, {r.confirmed['wall_seconds'] / 60:.1f}" if r.confirmed else "—")
        final = (f"{r.final['mean_return']:.1f} ± {r.final['std_return']:.1f} ({r.final['episodes']})"
                 if r.final else "—")
        minutes = None if r.wall_seconds is None else r.wall_seconds / 60
        lines.append(f"| {r.path.relative_to(logdir)} | {r.algo} | {r.threads} | {r.seed} | {r.status} | "
                     f"{len(r.evals)} | {final} | {fmt(best)} | {confirmed} | {fmt(r.frames, ',')} | {fmt(minutes)} | "
                     f"{fmt(r.frames_per_second, ',.0f')} | {r.protocol or r.game} |")
    out = logdir / "report.md"
    write_text(out, "\n".join(lines) + "\n")
    return out


@command("report", interrupted="stopped (Ctrl-C)")
def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m hogwild_dqn.tools.report", description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default="runs", help="log root holding the run dirs (default: runs)")
    p.add_argument("--score", type=float, default=None, help="reference score for the speedup table")
    p.add_argument("--game", default=None, help="the game whose runs to report, where --logdir holds several")
    args = p.parse_args(argv)
    if args.score is not None and not math.isfinite(args.score):
        p.error(f"--score must be a finite number, got {args.score}")
    logdir = Path(args.logdir)
    if not logdir.is_dir():
        print(f"report: error: --logdir {logdir} is not a directory", file=sys.stderr)
        return 2
    try:
        out = write_report(logdir, args.score, args.game)
    except ReportError as e:
        print(f"report: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out} and its PNGs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
