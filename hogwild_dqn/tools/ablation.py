"""DQN's two additions to Q-learning, switched on and off: replay memory x target network, on CartPole.

    python -m hogwild_dqn.tools.ablation [--seeds 1 2 3 4 5] [--frames 80000] [--threads 2] [--logdir runs/ablation]
    (or: make ablation)

Runs train.py (--algo dqn) for each of the 4 settings and each seed, one after another, into
<logdir>/<setting>/s<seed> (a finished run is kept and not run again, a cut one resumed; a run of other settings
there is refused), then writes <logdir>/ablation.md (final and best periodic evaluation mean ± std over seeds,
frames to reach --score) and <logdir>/ablation.png (the mean evaluation curve of each setting).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from hogwild_dqn.commands import command
from hogwild_dqn.config import Parser
from hogwild_dqn.exits import STOPPED
from hogwild_dqn.tools.output import pyplot, save, spread, write_text
from hogwild_dqn.tools.runs import TRAIN, check_same_run, resume_or_start, run_done, train

SETTINGS = {  # name -> (run dir name, train.py flags)
    "replay + target (DQN)": ("replay-target", []),
    "replay, no target": ("replay-notarget", ["--no-target"]),
    "target, no replay": ("noreplay-target", ["--no-replay"]),
    "neither (online Q)": ("noreplay-notarget", ["--no-replay", "--no-target"]),
}


def run_all(args: argparse.Namespace) -> dict[str, list[dict]]:
    """Every setting x seed (skipping finished ones); return each setting's summaries."""
    out = {}
    for name, (folder, flags) in SETTINGS.items():
        out[name] = []
        for seed in args.seeds:
            run = args.logdir / folder / f"s{seed}"
            start = [*TRAIN, "--game", args.game, "--algo", "dqn", "--threads", str(args.threads), "--frames",
                     str(args.frames), "--seed", str(seed), "--eval-every", str(args.eval_every), "--run-dir",
                     str(run), "--no-progress", *flags]
            check_same_run(run, start)  # a kept run of another game or budget must not stand in this table
            if not run_done(run):
                cmd = resume_or_start(run, start)
                print(f"== {name}, seed {seed}: {' '.join(cmd[1:])}", flush=True)
                rc = train(cmd)
                if rc in STOPPED:  # Ctrl-C or SIGTERM, handed to the run, which saved itself: so ends the ablation
                    print(f"ablation: stopped; the run in {run} is kept and resumes when the same command is run "
                          "again", file=sys.stderr)
                    raise SystemExit(rc)
                if rc != 0:
                    raise SystemExit(f"ablation: the run in {run} failed; see its output above")
            out[name].append(json.loads((run / "summary.json").read_text()))
    return out


def table(results: dict[str, list[dict]], score: float) -> str:
    lines = [f"| setting | runs | final eval (mean ± std) | best periodic eval (mean ± std) | frames to {score:g} "
             "(median of those that reached it) | reached |", "| --- | --- | --- | --- | --- | --- |"]
    for name, runs in results.items():
        final = [(r["final_eval"] or {}).get("mean_return") for r in runs]
        best = [r["best_eval_return"] for r in runs]  # None where the evaluator ran no periodic evaluation
        reached = [next(e["frames"] for e in r["evals"] if e["mean_return"] >= score) for r in runs
                   if any(e["mean_return"] >= score for e in r["evals"])]
        median = f"{statistics.median(reached):,.0f}" if reached else "—"
        lines.append(f"| {name} | {len(runs)} | {spread(final)} | {spread(best)} | {median} | "
                     f"{len(reached)}/{len(runs)} |")
    return "\n".join(lines)


def plot(results: dict[str, list[dict]], out: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, runs in results.items():
        points = sorted({e["frames"] // 1000 for r in runs for e in r["evals"]})
        curve = []
        for p in points:  # the mean over seeds of each seed's evaluation nearest to this point
            vals = [min(r["evals"], key=lambda e, p=p: abs(e["frames"] // 1000 - p))["mean_return"] for r in runs]
            curve.append(statistics.mean(vals))
        ax.plot([p * 1000 for p in points], curve, marker=".", label=name)
    ax.set_xlabel("global frames")
    ax.set_ylabel("evaluation mean return (mean over seeds)")
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, out)


@command("ablation", interrupted="stopped (Ctrl-C)")
def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m hogwild_dqn.tools.ablation", description=__doc__.splitlines()[0])
    p.add_argument("--game", default="CartPole-v1")
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    p.add_argument("--frames", type=int, default=80_000)
    p.add_argument("--eval-every", type=int, default=10_000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--score", type=float, default=195.0, help="the 'frames to' column's score")
    p.add_argument("--logdir", type=Path, default=Path("runs/ablation"))
    args = p.parse_args(argv)
    if min(args.frames, args.eval_every, args.threads) < 1 or args.eval_every > args.frames:
        p.error("--frames, --eval-every and --threads must be positive, --eval-every at most --frames")
    results = run_all(args)
    md = table(results, args.score)
    header = (f"DQN ablation on {args.game}: {len(args.seeds)} seeds ({' '.join(map(str, args.seeds))}), "
              f"{args.frames:,} frames, {args.threads} workers each\n\n")
    write_text(args.logdir / "ablation.md", header + md + "\n\n![curves](ablation.png)\n")
    plot(results, args.logdir / "ablation.png")
    print(header + md)
    print(f"wrote {args.logdir / 'ablation.md'} and {args.logdir / 'ablation.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
