"""Throughput benchmark: the bare emulator and the trainer's workers, measured side by side in one run.

    python -m hogwild_dqn.tools.bench [--threads 1 2] [--algos q1 sarsa1 nq a3c dqn] [--envs 1 8] [--seconds 8]
                                [--baseline REF] [--with "TRAIN FLAGS" ...]
    make bench [BENCH_ARGS="--baseline REF ..."]
    python -m hogwild_dqn.tools.bench --algos a3c --envs 8 --profile 60000    # where one worker's time goes
    python -m hogwild_dqn.tools.bench --algos ppo --evaluator --with "--eval-envs 1"    # the evaluator's games

Each point starts real worker processes over real shared memory (evaluator off), lets them warm up, counts
each worker's frames and the updates it pushed over at least --seconds, from one of its counts to another
(whole rollouts for PPO, which counts a rollout's frames at its end), and stops them; points are interleaved
across repeats so that a noisy machine hurts every point alike. Medians are reported, with bench.md and bench.json
written to --out. A replay method (dqn) runs its own preset (configs/dqn_atari.yaml) with minibatches from
its first --batch-size transitions, so that its updates are measured with its acting; it plays one game per
worker whatever --envs says. It is measured twice: as a run starts (epsilon near 1: acting needs almost no
forward) and with epsilon at its final value from the first step (a forward per step), the row
"dqn@final-eps".

With --baseline REF (a git ref of this repository), every point is also measured on that commit's own code
(its tree extracted to a temporary folder, driven by its own bench functions), interleaved with the working
tree's, each point in a fresh process on both sides, and the table gives each point's ratio.

With --with "FLAGS" (train.py's flags, e.g. --with "--obs-normalize --no-obs-standardize"), every algorithm is
also measured with those values over its point's, as rows of their own interleaved with the plain ones (and on
the baseline's side with the same values; a value the baseline's config lacks, such as an option added since,
is left out there, and the table says so under it: the baseline runs as it always did).

With --evaluator, the evaluator's games instead (tools/bench_evaluator.py): the first --algos' preset network
(untrained, seeded) plays --final-eval-episodes whole games from the evaluation player a run's evaluator uses (real
ALE, one torch thread, this process), again and again for at least --seconds, each --with row interleaved with the
plain one; frames/s of the games and each row's ratio to the plain row's.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp

from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.commands import command
from hogwild_dqn.config import Config, ConfigError, Parser
from hogwild_dqn.envs import emulator_fps, env_spec, resolve
from hogwild_dqn.processes import Processes
from hogwild_dqn.rundir import Run
from hogwild_dqn.shared import new_shared_state
from hogwild_dqn.tools.bench_evaluator import measure_evaluator
from hogwild_dqn.tools.bench_points import FINAL_EPS, bench_config, flag_overrides, out_folder, point_overrides
from hogwild_dqn.tools.output import write_text
from hogwild_dqn.workers import run_worker

START_SECONDS = 120  # spawning, importing torch and building the games may take this long on a loaded machine


def workers_fps(cfg: Config, threads: int, warmup: float, seconds: float) -> tuple[float, float]:
    """Global frames/s and updates/s of `threads` real worker processes over one shared network, after a
    warm-up: the run's own Processes (no evaluator, no restart: a worker that dies ends the benchmark)."""
    spec = env_spec(cfg)
    shared = new_shared_state(cfg, spec, threads)
    cfg = Config(**{**cfg.to_dict(), "max_restarts": 0})
    with tempfile.TemporaryDirectory() as run_dir:
        procs = Processes(mp.get_context("spawn"), Run(cfg, spec, Path(run_dir), threads), shared,
                          with_evaluator=False)

        def wait(until: float, done=lambda: False) -> None:
            while time.perf_counter() < until and not done():
                if failure := procs.check():
                    raise RuntimeError(f"a worker died during the benchmark ({failure})")
                time.sleep(0.01)

        try:
            procs.start()
            wait(time.perf_counter() + START_SECONDS, lambda: shared.frames() > 0)  # torch imported, envs built
            if shared.frames() == 0:
                raise RuntimeError(f"no frame in the first {START_SECONDS} s of the benchmark's workers")
            wait(time.perf_counter() + warmup)
            return counted_rates(shared.worker_frames[:threads], shared.worker_updates, wait, seconds)
        finally:
            procs.stop(wait_for_eval=False)


def counted_rates(frames: torch.Tensor, updates: torch.Tensor, wait, seconds: float) -> tuple[float, float]:
    """Frames/s and updates/s of workers whose counters (`frames`, `updates`: one slot each) are counted in
    steps, summed over the workers, each worker's own rate taken between two moments its frame count stepped:
    its first step after now and its first step at least `seconds` later. A fixed window read the steps, not
    the rate: a PPO worker counts its 4,096 frames at a rollout's end, and a 20 s window held 8 or 9 of the
    two workers' rollouts on a slow machine, 11% apart whatever the code's speed. `wait(until, done)` polls
    `done` until the time `until` (and notices a dead worker); a worker that steps too seldom ends in an
    error rather than a wait without limit. Updates are read at a frame step, so they are whole only because
    every worker pushes its updates before it counts the frames they learnt from."""
    start, n = time.perf_counter(), len(frames)
    first: list[tuple | None] = [None] * n
    last: list[tuple | None] = [None] * n
    seen = frames.tolist()

    def stepped() -> bool:
        now, counts = time.perf_counter(), frames.tolist()
        for i, count in enumerate(counts):
            if count != seen[i]:
                mark = (now, count, int(updates[i]))
                if first[i] is None:
                    first[i] = mark
                elif last[i] is None and now - first[i][0] >= seconds:
                    last[i] = mark
        seen[:] = counts
        return all(m is not None for m in last)

    limit = start + 2 * seconds + START_SECONDS
    wait(limit, stepped)
    if not all(m is not None for m in last):
        slow = [i for i in range(n) if last[i] is None]
        raise RuntimeError(f"worker(s) {slow} counted frames too seldom to measure in {limit - start:.0f} s")
    spans = [(b[0] - a[0], b[1] - a[1], b[2] - a[2]) for a, b in zip(first, last, strict=True)]
    return sum(f / t for t, f, _ in spans), sum(u / t for t, _, u in spans)


# Run in a fresh interpreter inside a tree (the working tree's or the baseline's): that tree's own workers
# and processes, measured by this tree's workers_fps and counted_rates, whose source is put into the script, so
# that both sides are measured alike. The tree must keep point_config (bench_points.py; bench.py before it),
# Processes(context, Run, shared, with_evaluator=...), Run, new_shared_state, env_spec and the per-worker counters
# (every commit since the tools moved into hogwild_dqn/tools does; an older --baseline fails with its import error).
DRIVER = """
import dataclasses, json, sys, tempfile, time
from pathlib import Path
import torch
import torch.multiprocessing as mp
from hogwild_dqn.config import Config
from hogwild_dqn.envs import env_spec
from hogwild_dqn.processes import Processes
from hogwild_dqn.rundir import Run
from hogwild_dqn.shared import new_shared_state
try:
    from hogwild_dqn.tools.bench_points import point_config
except ImportError:  # a tree from before bench_points.py
    from hogwild_dqn.tools.bench import point_config
START_SECONDS = %d
%s
%s
a = json.loads(sys.argv[1])
torch.set_num_threads(1)
base = Config(game=a["game"], frames=10**12, progress=False, video_steps=0)
cfg = point_config(base, a["algo"], a["envs"])
known = {f.name for f in dataclasses.fields(Config)}
cfg = Config(**{**cfg.to_dict(), **{k: v for k, v in a["overrides"].items() if k in known}})
print(json.dumps([*workers_fps(cfg, a["threads"], a["warmup"], a["seconds"]), sorted(set(a["overrides"]) - known)]))
"""


def point_in_tree(tree: Path, point: dict) -> tuple[float, float, list[str]]:
    """(frames/s, updates/s, the overrides `tree`'s config lacks and ran without) of one point, measured by the code
    in `tree`, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    script = DRIVER % (START_SECONDS, inspect.getsource(workers_fps), inspect.getsource(counted_rates))
    limit = 2 * START_SECONDS + point["warmup"] + 4 * point["seconds"] + 60
    try:
        done = subprocess.run([sys.executable, "-c", script, json.dumps(point)], cwd=tree, env=env,
                              capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the point {point['algo']} x{point['threads']} did not end within {limit:.0f} s in "
                           f"{tree}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the point {point['algo']} x{point['threads']} failed in {tree}: {last}")
    fps, ups, lacks = json.loads(done.stdout.strip().splitlines()[-1])
    return fps, ups, lacks


def baseline_tree(ref: str, into: Path) -> str:
    """Extract commit `ref` of this repository into `into`; return its short hash. A bad ref is a ConfigError."""
    root = Path(__file__).resolve().parents[2]
    rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "--verify", f"{ref}^{{commit}}"],
                         capture_output=True, text=True)
    if rev.returncode != 0:
        raise ConfigError(f"--baseline {ref!r} is not a commit of the repository at {root}")
    archive = subprocess.run(["git", "-C", str(root), "archive", rev.stdout.strip()], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return rev.stdout.strip()


def profile_worker(cfg: Config, frames: int, rows: int = 25) -> str:
    """cProfile of one worker of `cfg` run inline in this process (one torch thread; real env and shared
    memory) for `frames` frames: frames/s under the profiler, then the functions with the most time of their
    own, then those with the most time under them (the worker loop's parts, whatever the machine's load)."""
    import cProfile
    import io
    import pstats

    cfg = Config(**{**cfg.to_dict(), "frames": frames})
    spec = env_spec(cfg)
    shared = new_shared_state(cfg, spec, 1)
    prof = cProfile.Profile()
    with tempfile.TemporaryDirectory() as run_dir:
        t0 = time.perf_counter()
        prof.runcall(run_worker, 0, 0, Run(cfg, spec, Path(run_dir), 1), shared)
        seconds = time.perf_counter() - t0
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(rows)
    stats.sort_stats("cumulative").print_stats(rows)
    return (f"{cfg.algo} on {cfg.game}, {cfg.envs_per_worker} games, one worker inline: {shared.frames():,} frames "
            f"in {seconds:.1f} s ({shared.frames() / seconds:,.0f} frames/s under the profiler)\n{out.getvalue()}")


def table(cores: int, emu: float, results: list[dict], frame_skip: int) -> str:
    """The markdown table of the medians, with scaling efficiency and the ratio to the bare emulator."""
    one = {(r["algo"], r["envs_per_worker"]): r["frames_per_second"] for r in results if r["threads"] == 1}
    base = any("baseline_frames_per_second" in r for r in results)
    lines = [f"cores: {cores}; bare emulator (ALE, frame skip {frame_skip}, random actions): {emu:,.0f} frames/s",
             "", "| algo | workers | games per worker | frames/s | agent steps/s | frames/s per worker | "
             "updates/s per worker | scaling efficiency | per worker / emulator |"
             + (" baseline frames/s | ratio to baseline |" if base else ""),
             "| --- " * (11 if base else 9) + "|"]
    for r in results:
        key = (r["algo"], r["envs_per_worker"])
        eff = r["frames_per_second"] / (r["threads"] * one[key]) if key in one else None
        per = r["frames_per_second"] / r["threads"]
        line = (f"| {r['algo']} | {r['threads']} | {r['envs_per_worker']} | {r['frames_per_second']:,.0f} | "
                f"{r['agent_steps_per_second']:,.0f} | {per:,.0f} | "
                f"{r['updates_per_second'] / r['threads']:,.0f} | {'—' if eff is None else f'{eff:.2f}'} | "
                f"{per / emu:.2f} |")
        if base:
            line += f" {r['baseline_frames_per_second']:,.0f} | {r['ratio_to_baseline']:.2f} |"
        lines.append(line)
    return "\n".join(lines)


@command("bench", interrupted="stopped (Ctrl-C)")
def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m hogwild_dqn.tools.bench", description=__doc__.splitlines()[0])
    p.add_argument("--game", default="Pong")
    p.add_argument("--algos", nargs="+", default=list(ALGORITHMS), choices=list(ALGORITHMS))
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2], help="worker counts to measure")
    p.add_argument("--envs", nargs="+", type=int, default=[1],
                   help="games per worker to measure (--envs-per-worker of train.py)")
    p.add_argument("--seconds", type=float, default=6.0, help="measured seconds per point")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds after start-up before measuring")
    p.add_argument("--repeats", type=int, default=3, help="repeats of every point (medians are reported)")
    p.add_argument("--baseline", default=None, metavar="REF",
                   help="a git ref (commit, tag, branch) whose workers are measured beside the working tree's")
    p.add_argument("--with", dest="variants", action="append", default=[], metavar="FLAGS",
                   help='train.py flags measured as rows of their own beside each algorithm\'s plain point, e.g. '
                        '--with "--obs-normalize --no-obs-standardize"; --with=--obs-normalize for one flag '
                        '(repeatable)')
    p.add_argument("--profile", type=int, default=None, metavar="FRAMES",
                   help="instead of the table: profile one worker of the first --algos and --envs inline for FRAMES "
                        "frames (cProfile, written to profile.txt)")
    p.add_argument("--evaluator", action="store_true",
                   help="instead of the workers: the evaluator's games, frames/s of each row (see above)")
    p.add_argument("--out", default=None, help="folder for bench.md and bench.json (default runs/bench-<time>)")
    args = p.parse_args(argv)
    if min(args.threads) < 1 or min(args.envs) < 1 or args.repeats < 1 or not 0 < args.seconds < math.inf:
        p.error("--threads, --envs, --repeats and --seconds must be positive (and --seconds finite)")
    if not 0 <= args.warmup < math.inf:
        p.error("--warmup must be a finite number of seconds, 0 or more")
    if not resolve(args.game)[0]:  # an unknown game: its one line, with close names
        p.error(f"--game {args.game}: bench measures ALE games, beside their bare emulator")
    torch.set_num_threads(1)
    args.variants = [(flags, flag_overrides(flags, args.game, args.algos, args.envs)) for flags in args.variants]
    if args.profile is not None:
        if args.profile < 1:
            p.error("--profile must be a positive number of frames")
        out = out_folder(args)  # a bad --out is told before the profile, not after
        text = profile_worker(bench_config(args.game, args.algos[0], args.envs[0], {}), args.profile)
        write_text(out / "profile.txt", text)
        print(text + f"wrote {out / 'profile.txt'}")
        return 0
    if args.evaluator:
        if args.baseline is not None:
            p.error("--evaluator measures this tree's evaluator only: compare with --with rows, not --baseline")
        return measure_evaluator(args)
    with tempfile.TemporaryDirectory(prefix="hogwild_dqn-baseline-") as tmp:
        baseline = None
        if args.baseline is not None:
            baseline = baseline_tree(args.baseline, Path(tmp))
        try:
            return measure(args, Path(tmp) if baseline else None, baseline)
        except RuntimeError as e:  # a point's workers died, or the baseline's code failed: its last line
            print(f"bench: error: {e}", file=sys.stderr)
            return 1


def measure(args, baseline_dir: Path | None, baseline: str | None) -> int:
    """Every point (and the emulator) over the repeats, interleaved; the table and files."""
    out = out_folder(args)
    cores = os.cpu_count() or 1
    against = f", against {args.baseline} ({baseline})" if baseline else ""
    print(f"benchmark on {cores} cores: {args.game}, {args.repeats} repeats of {args.seconds:g} s per point{against}")
    base = Config(game=args.game, frames=10**12, progress=False, video_steps=0)
    labels = row_labels(args)
    overrides = {label: values for label, _, values in labels}
    emu, samples = [], {(label, a, e, n): {"new": [], "baseline": []} for label, a, _ in labels
                        for e in ([1] if ALGORITHMS[a].replay else args.envs) for n in args.threads}
    here = Path(__file__).resolve().parent.parent
    lacks: dict[str, list[str]] = {}  # a row's overrides the baseline's config lacks (it ran without them)
    for rep in range(args.repeats):
        emu.append(emulator_fps(base, args.seconds))
        for label, algo, e, n in samples:
            point = {"game": args.game, "algo": algo, "envs": e, "threads": n, "warmup": args.warmup,
                     "seconds": args.seconds, "overrides": overrides[label]}
            sides = ["new"] if baseline_dir is None else (["baseline", "new"] if rep % 2 == 0 else ["new", "baseline"])
            for side in sides:
                if baseline_dir is None:
                    fps, ups = workers_fps(bench_config(args.game, algo, e, point["overrides"]), n, args.warmup,
                                           args.seconds)
                else:
                    fps, ups, missing = point_in_tree(baseline_dir if side == "baseline" else here, point)
                    if missing and side == "baseline":
                        lacks[label] = missing
                samples[(label, algo, e, n)][side].append((fps, ups))
                who = "" if baseline_dir is None else f"{side:>8}: "
                print(f"  repeat {rep + 1}: {who}{label} x{n}, {e} games each: {fps:,.0f} frames/s, "
                      f"{ups:,.1f} updates/s", flush=True)
    emu_med = statistics.median(emu)
    results = medians(samples, lacks, base.frame_skip)
    md = table(cores, emu_med, results, base.frame_skip)
    if baseline:
        md += f"\n\nbaseline: {args.baseline} ({baseline}); ratio: median frames/s of the working tree / the baseline's"
        md += "".join(f"\nthe baseline lacks {', '.join(missing)}: its side of `{label}` ran without"
                      for label, missing in lacks.items())
    print(md)
    write_text(out / "bench.md", md + "\n")
    write_text(out / "bench.json", json.dumps({"cores": cores, "game": args.game, "emulator_frames_per_second":
                                              emu_med, "emulator_samples": emu, "baseline": baseline,
                                              "results": results}, indent=2))
    print(f"wrote {out / 'bench.md'} and {out / 'bench.json'}")
    return 0



def row_labels(args) -> list[tuple[str, str, dict]]:
    """(label, algorithm, config overrides) of each row of the table: the plain algorithms, a replay method at its
    final epsilon, then each --with's flags over every one of them."""
    labels = [(a, a, {}) for a in args.algos]
    labels += [(a + FINAL_EPS, a, point_overrides(a + FINAL_EPS)) for a in args.algos if ALGORITHMS[a].replay]
    labels += [(f"{label} {flags}", a, {**base_values, **values}) for flags, values in args.variants
               for label, a, base_values in labels]
    return labels


def medians(samples: dict, lacks: dict[str, list[str]], frame_skip: int) -> list[dict]:
    """Each point's result: the median of its repeats' rates, and beside it the baseline's where it was measured."""
    results = []
    for (label, _, e, n), sides in samples.items():
        v = sides["new"]
        fps = statistics.median(f for f, _ in v)
        r = {"algo": label, "threads": n, "envs_per_worker": e, "frames_per_second": fps,
             "agent_steps_per_second": fps / frame_skip,
             "updates_per_second": statistics.median(u for _, u in v), "repeats": len(v),
             "samples": [f for f, _ in v], "update_samples": [u for _, u in v]}
        if sides["baseline"]:
            old = statistics.median(f for f, _ in sides["baseline"])
            r.update({"baseline_frames_per_second": old, "ratio_to_baseline": fps / old,
                      "baseline_samples": [f for f, _ in sides["baseline"]],
                      "baseline_update_samples": [u for _, u in sides["baseline"]],
                      "baseline_lacks": lacks.get(label, [])})
        results.append(r)
    return results


if __name__ == "__main__":
    sys.exit(main())
