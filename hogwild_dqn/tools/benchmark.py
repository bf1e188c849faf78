"""The benchmark suite: games x seeds of one algorithm, run one after another into one log root, then its report.

    python -m hogwild_dqn.tools.benchmark [--suite atari|atari-sticky|atari5|mujoco] [--games Pong Breakout ...]
        [--seeds 1 2 3] [--frames 10000000] [--algo a3c] [--threads 2] [--sb3] [--logdir runs/benchmark]
        [--record DIR] [--report-only] [-- train.py flags]
    (or: make benchmark, make benchmark SUITE=mujoco)

The atari suite (the default): the default algorithm (PPO on ALE games; --algo a3c) on six games, 10M frames
each; atari-sticky the same with sticky actions 0.25, atari5 Atari-5's five games with them. The mujoco suite:
Hopper, Walker2d, HalfCheetah and Ant (v5), 1M steps each, and beside each run Stable-Baselines3 A2C with rl-zoo's
settings (baselines/sb3_a2c.py, `make install-baselines`; --sb3 / --no-sb3 for any suite).

Each run goes to <logdir>/<game>-<algo>-s<seed> (console output in <run>.log beside it, starts and ends in
chain.log). A finished run is kept and not run again; a cut one is resumed from its checkpoint, so the suite can
be stopped with Ctrl-C and started again. With --record DIR, each ended run's summary.json is also copied to
DIR/<run>.json, and a run recorded there is done: a record kept in the repository carries the suite over to a
clone on another machine, whose run dirs are gone. Then the report (benchmark.md, benchmark.csv and the figures in
--out; tools/suite_report.py): rliable's IQM pooled over runs x games first, each game's runs under it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import yaml

from hogwild_dqn.config import DEFAULT_ALGO, ConfigError, Parser
from hogwild_dqn.envs import resolve
from hogwild_dqn.exits import STOPPED, UNSCORED, pipe_closed
from hogwild_dqn.files import WriteFailed, atomic_bytes, cause, write_failed
from hogwild_dqn.tools import published
from hogwild_dqn.tools.machine import Session, describe, utc_now
from hogwild_dqn.tools.runs import (
    TRAIN,
    check_same_run,
    done,
    kept_config,
    read_json,
    resume_or_start,
    sessions_file,
    summary_at,
    train,
)
from hogwild_dqn.tools.suite_report import (
    HUMAN_REFERENCE,
    SB3,
    BenchmarkError,
    read_summary,
    rliable,
    run_name,
    run_summary,
    write_report,
)
from hogwild_dqn.tools.suites import SEEDS, SUITES
from hogwild_dqn.version import __version__
from hogwild_dqn.version import commit as code_commit

SB3_SCRIPT = Path(__file__).resolve().parents[2] / "baselines" / "sb3_a2c.py"  # a checkout's, not installed


def is_done(args: argparse.Namespace, name: str) -> bool:
    summary = read_summary(args, name)
    return summary is not None and done(summary)


def keep(args: argparse.Namespace, name: str) -> None:
    """Copy an ended run's summary.json, with its sessions and the values it ran with (its config.yaml: the
    preset and the flags over it), to its record (--record), where the suite finds it on any machine."""
    summary = run_summary(args, name)
    if args.record and summary and done(summary):
        kept = summary_at(args.record / f"{name}.json")
        if kept and not same_run(kept, summary):
            print(f"benchmark: {args.record / name}.json is kept as it is: {args.logdir / name} holds another run "
                  "(its evaluations are not the record's continued); move one of them aside", file=sys.stderr)
            return
        cfg = args.logdir / name / "config.yaml"
        record = {**summary, "config": yaml.safe_load(cfg.read_text())} if cfg.is_file() else summary
        args.record.mkdir(parents=True, exist_ok=True)
        atomic_bytes((json.dumps(record, indent=2) + "\n").encode(), args.record / f"{name}.json")  # whole or not


def same_run(record: dict, summary: dict) -> bool:
    """Whether `summary` is the recorded run's, the same or gone on (a resumed run's evaluations continue the
    record's), rather than another run of the same name (another machine's, a run started again)."""
    points = [(e.get("frames"), e.get("mean_return")) for e in record.get("evals", [])]
    return points == [(e.get("frames"), e.get("mean_return")) for e in summary.get("evals", [])][:len(points)]


def sb3_command(args: argparse.Namespace, game: str, seed: int, run: Path) -> list[str]:
    """The baseline's run beside ours: same game, frames and seed (a cut one starts over)."""
    return [sys.executable, str(SB3_SCRIPT), "--game", game, "--frames", str(args.frames), "--seed", str(seed),
            "--eval-every", str(eval_every(args)), "--run-dir", str(run)]


def jobs(args: argparse.Namespace) -> list[tuple[str, int, str]]:
    """(game, seed, algo) of every run of the suite, in the order they run: each of ours, then SB3's beside it."""
    out = []
    for game in args.games:
        for seed in args.seeds:
            out.append((game, seed, args.algo))
            if args.sb3:
                out.append((game, seed, SB3))
    return out


def command(args: argparse.Namespace, game: str, seed: int, algo: str, run: Path) -> list[str]:
    """The command of one run: ours resumed from its checkpoint if it was cut, else started (SB3's always
    starts; a dir cut short is set aside first)."""
    start = sb3_command(args, game, seed, run) if algo == SB3 else train_command(args, game, seed, run)
    return resume_or_start(run, start)


def eval_every(args: argparse.Namespace) -> int:
    """Every run of a suite, ours and SB3's, is evaluated 20 times (the presets' own intervals suit their default
    frames, not a suite's)."""
    return max(1, args.frames // 20)


def train_command(args: argparse.Namespace, game: str, seed: int, run: Path) -> list[str]:
    """The train.py command that starts one of our runs."""
    return [*TRAIN, "--game", game, "--algo", args.algo, "--threads", str(args.threads), "--frames",
            str(args.frames), "--seed", str(seed), "--eval-every", str(eval_every(args)), "--run-dir", str(run),
            "--no-progress", *args.train_args]


def commit() -> str:
    """The code a run is made of: the checkout's commit, marked when files differ from it."""
    return code_commit() or f"version {__version__}"  # installed, not a checkout


def say(args: argparse.Namespace, text: str) -> None:
    """A line on the console and in chain.log (the record's too, with --record), stamped with the UTC time."""
    line = f"== {utc_now()} {text}"
    print(line, flush=True)
    for folder in filter(None, (args.logdir, args.record)):
        folder.mkdir(parents=True, exist_ok=True)
        try:
            with (folder / "chain.log").open("a") as f:
                f.write(line + "\n")
        except OSError as e:
            raise write_failed(folder / "chain.log", e, "the lines written before are kept") from None


def session(args: argparse.Namespace, name: str, game: str, start: str, cmd: list[str], where: str = "") -> int:
    """One session of a run (a start or a resume) to its end, said in chain.log with `where` (the code and
    machine) and the bare emulator's speed before it, and other work's share of the CPU during it; kept in
    <run>.sessions.json for its record."""
    machine, code = Session(game), {"code": commit(), "machine": describe()}  # a resume may run on other code
    said = "; ".join(filter(None, (where, machine.emulator and f"bare emulator {machine.emulator:,} frames/s")))
    say(args, f"{start}{f' ({said})' if said else ''}: {' '.join(cmd[1:])}")
    path = sessions_file(args.logdir / name)
    earlier = read_json(path) or []
    keep_sessions(path, [*earlier, {**machine.begun(), **code}])  # kept before it runs: one killed outright counts
    rc = train(cmd, args.logdir / f"{name}.log")
    ended = machine.end()
    say(args, f"end {name} rc={rc}; other work took {ended['other_work_cpu_share']:.0%} of the CPU")
    keep_sessions(path, [*earlier, {**ended, **code}])
    return rc


def keep_sessions(path: Path, sessions: list[dict]) -> None:
    """Write a run's sessions; a failed write loses only their figures (the run is whole), so it is said, not
    raised."""
    try:
        atomic_bytes((json.dumps(sessions, indent=1) + "\n").encode(), path)
    except WriteFailed as e:
        print(f"benchmark: {e}", file=sys.stderr)


def run_suite(args: argparse.Namespace) -> list[str]:
    """Every game x seed one after another, skipping done runs; return the names of runs that failed."""
    failed = []
    for game, seed, algo in jobs(args):
        name = run_name(game, algo, seed)
        if algo != SB3:  # a run kept there of another budget or flags must not stand in the table for this one
            record = summary_at(args.record / f"{name}.json") if args.record else None
            check_same_run(args.logdir / name, train_command(args, game, seed, args.logdir / name),
                           kept_config(args.logdir / name) or (record or {}).get("config"))
        if is_done(args, name):
            continue
        cmd = command(args, game, seed, algo, args.logdir / name)
        rc = session(args, name, game, f"start {name}", cmd, f"commit {commit()}, {describe()}")
        if rc == UNSCORED:  # trained, but its final evaluation was cut: play it now, once
            cmd = resume_or_start(args.logdir / name, cmd)
            rc = session(args, name, game, f"resume {name}, unscored, to play its final evaluation", cmd)
        keep(args, name)
        if rc in STOPPED:  # the run was stopped (Ctrl-C, SIGTERM): so is the suite
            raise KeyboardInterrupt
        if rc == 2:  # its command line was refused: every other run's would be too
            said = (args.logdir / f"{name}.log").read_text().strip().splitlines()
            program = "sb3_a2c.py" if algo == SB3 else "train.py"
            raise BenchmarkError(f"{program} refused the run {name}: {said[-1] if said else 'no output'}")
        if rc != 0:
            failed.append(name)
    return failed


def check_sb3() -> None:
    """--sb3 needs the checkout's baselines/sb3_a2c.py and Stable-Baselines3 (an optional package)."""
    if not SB3_SCRIPT.is_file():
        raise BenchmarkError(f"--sb3 runs {SB3_SCRIPT.relative_to(SB3_SCRIPT.parents[1])} of a checkout, which "
                             "is not here; run it from a clone of the repository, or pass --no-sb3")
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        raise BenchmarkError("--sb3 needs Stable-Baselines3: make install-baselines, or pip install -r "
                             "requirements-baselines.txt (or pass --no-sb3)") from None


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The suite's flags, with its --suite's games, frames and baseline where they are not given, checked."""
    argv = list(sys.argv[1:] if argv is None else argv)
    train_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = parser()
    args = p.parse_args(argv)
    games, frames, sb3, flags, kind = SUITES[args.suite]
    args.train_args = [*flags, *train_args]  # flags after `--` come last, so they win
    args.algo = args.algo or DEFAULT_ALGO[kind]
    args.games = args.games or list(games)
    args.frames = frames if args.frames is None else args.frames
    args.sb3 = sb3 if args.sb3 is None else args.sb3
    args.logdir = args.logdir or Path("runs/benchmark" + ("" if args.suite == "atari" else f"-{args.suite}"))
    args.reference = references(p, args.references)
    check_paths(p, args)
    if min(args.frames, args.threads, args.reps) < 1 or len(set(args.seeds)) != len(args.seeds):
        p.error("--frames, --threads and --reps must be positive and --seeds distinct")
    return args


def parser() -> Parser:
    """The suite's command line, its flags unfilled (a --suite's values are filled in by parse)."""
    p = Parser(prog="python -m hogwild_dqn.tools.benchmark", description=__doc__.splitlines()[0])
    p.add_argument("--suite", choices=list(SUITES), default="atari",
                   help="the games, frames and baseline of a suite (atari: 6 games x 10M frames; atari-sticky: the "
                        "same with sticky actions 0.25, the field's protocol; atari5: Atari-5's five games, sticky; "
                        "mujoco: 4 tasks x 1M steps beside SB3 A2C); the flags below override them")
    p.add_argument("--games", nargs="+", default=None)
    p.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    p.add_argument("--frames", type=int, default=None, help="frames of every run")
    p.add_argument("--sb3", action=argparse.BooleanOptionalAction, default=None,
                   help="run Stable-Baselines3 A2C (rl-zoo settings) beside each run (default: the mujoco suite's)")
    p.add_argument("--algo", default=None, help="default: the suite's kind's (config.DEFAULT_ALGO)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--logdir", type=Path, default=None,
                   help="where the runs go (default: runs/benchmark, runs/benchmark-mujoco for the mujoco suite)")
    p.add_argument("--out", type=Path, default=None, help="where the report goes (default: --logdir)")
    p.add_argument("--record", type=Path, default=None, metavar="DIR",
                   help="keep each ended run's summary.json as DIR/<run>.json; a run recorded there is done and "
                        "enters the report without its run dir (e.g. docs/benchmark/records, kept in the repository)")
    p.add_argument("--reps", type=int, default=50_000, help="bootstrap resamples of the IQM's interval")
    p.add_argument("--reference", action="append", default=[], metavar="GAME=RANDOM,HUMAN", dest="references",
                   help="random and human scores of a game the built-in table lacks (repeatable)")
    p.add_argument("--report-only", action="store_true", help="write the report of the runs there are; run none")
    p.add_argument("--compare", action="append", default=[], metavar="[LABEL=]RECORDS",
                   help="another suite's records (e.g. docs/benchmark/records, A3C's) beside this one: its IQM, "
                        "its performance profile and the probability that a run of ours beats one of its "
                        "(repeatable); LABEL names it in the tables and figures (default: its algorithm and folder)")
    p.add_argument("--label", default=None,
                   help="this suite's name in the tables and figures beside others (default: its algorithm)")
    p.add_argument("--published", type=Path, default=None, metavar="CSV",
                   help="published scores beside ours (default on Atari: the checkout's "
                        "docs/published/atari_10m.csv, with its _seeds.csv)")
    return p


def references(p: Parser, given: list[str]) -> dict[str, tuple[float, float]]:
    """The (random, human) scores of each game: the built-in table's, with those of --reference over them."""
    reference = dict(HUMAN_REFERENCE)
    for one in given:
        game, _, pair = one.partition("=")
        try:
            random_score, human = (float(v) for v in pair.split(","))
        except ValueError:
            p.error(f"--reference {one!r}: expected GAME=RANDOM,HUMAN, e.g. Pong=-20.7,14.6")
        if not (math.isfinite(random_score) and math.isfinite(human)):
            p.error(f"--reference {one!r}: the random and human scores must be finite numbers")
        if human == random_score:
            p.error(f"--reference {one!r}: the human and random scores must differ")
        reference[game] = (random_score, human)
    return reference


def compared(given: list[str]) -> tuple[list[Path], dict[Path, str]]:
    """--compare's folders, and the label given to each (LABEL=RECORDS) where one was."""
    folders, labels = [], {}
    for one in given:
        label, sep, folder = one.rpartition("=")
        path = Path(folder if sep and label else one)
        folders.append(path)
        if sep and label:
            labels[path] = label
    return folders, labels


def check_paths(p: Parser, args: argparse.Namespace) -> None:
    """Refuse a --record, --compare or --published that is not there as such; --published defaults, on Atari, to
    the checkout's table."""
    if args.record and args.record.exists() and not args.record.is_dir():
        p.error(f"--record {args.record}: not a directory")
    args.compare, args.compare_labels = compared(args.compare)
    for folder in args.compare:
        if not folder.is_dir():
            p.error(f"--compare {folder}: not a directory of records")
    if args.published is not None and not args.published.is_file():
        p.error(f"--published {args.published}: no such file")
    if args.published is None and published.PUBLISHED.is_file() and all(resolve(g)[0] for g in args.games):
        args.published = published.PUBLISHED
    if args.published is not None and (bad := published.problem(args.published)):
        p.error(f"--published: {bad}")


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(argv)
        rliable()  # before hours of runs, not after
        if args.sb3 and not args.report_only:
            check_sb3()
        for game, seed, algo in jobs(args):  # runs that ended before --record was given
            keep(args, run_name(game, algo, seed))
        failed = [] if args.report_only else run_suite(args)
        out = write_report(args)
        print(out.read_text())
        print(f"wrote {out}, {out.with_name('benchmark.csv')}", flush=True)
    except KeyboardInterrupt:
        print("benchmark: stopped; run the same command again to resume", file=sys.stderr)
        return 130
    except ConfigError as e:
        print(f"benchmark: error: {e}", file=sys.stderr)
        return 2
    except WriteFailed as e:
        print(f"benchmark: error: {e}; the same command resumes the suite once there is room", file=sys.stderr)
        return 1
    except BrokenPipeError:  # its lines piped on (`--report-only | head`), their reader gone
        return pipe_closed()
    except OSError as e:  # the report's files (markdown, CSV, figures): the records and runs are whole
        print(f"benchmark: error: cannot write {e.filename or 'the report'}: {cause(e)}; the runs and records are "
              "kept, --report-only writes the report once there is room", file=sys.stderr)
        return 1
    if failed:
        print(f"benchmark: error: runs failed: {', '.join(failed)} (their output: <logdir>/<run>.log)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
