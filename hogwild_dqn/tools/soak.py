"""Memory soak: run a real training and watch the resident memory of every one of its processes.

    python -m hogwild_dqn.tools.soak --minutes 30 --from-minute 5      (or: make soak)

Prints each process's RSS at --from-minute and at the end, and its growth; exits 1 if any process grew by
more than --max-growth percent. The samples are saved as soak.json in the run dir.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import psutil

from hogwild_dqn.commands import command
from hogwild_dqn.config import Parser
from hogwild_dqn.tools.output import write_text
from hogwild_dqn.tools.runs import TRAIN


def roles(main: psutil.Process) -> dict[int, str]:
    """Name the trainer's processes: workers start before the evaluator; multiprocessing adds a tracker."""
    kids = sorted(main.children(), key=lambda p: (p.create_time(), p.pid))
    names, spawned = {main.pid: "main"}, []
    for p in kids:
        try:
            if "resource_tracker" in " ".join(p.cmdline()):
                names[p.pid] = "resource_tracker"
            else:
                spawned.append(p.pid)
        except psutil.NoSuchProcess:
            pass
    for i, pid in enumerate(spawned):
        names[pid] = "evaluator" if i == len(spawned) - 1 else f"worker{i}"
    return names


def rss_mib(pids: dict[int, str]) -> dict[str, float]:
    out = {}
    for pid, name in pids.items():
        try:
            out[name] = psutil.Process(pid).memory_info().rss / 2**20
        except psutil.NoSuchProcess:
            out[name] = float("nan")
    return out


@command("soak", interrupted="stopped (Ctrl-C)")
def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m hogwild_dqn.tools.soak", description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30.0, help="length of the run")
    p.add_argument("--from-minute", type=float, default=5.0, help="the reference sample (after warm-up)")
    p.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    p.add_argument("--max-growth", type=float, default=10.0, help="allowed RSS growth in percent")
    p.add_argument("--run-dir", default=None, help="run dir (default runs/soak-<timestamp>)")
    p.add_argument("train_args", nargs=argparse.REMAINDER, help="extra train.py arguments after --")
    args = p.parse_args(argv)
    if not 0 <= args.from_minute < args.minutes:
        p.error("--from-minute must lie in [0, --minutes)")
    if not 0 < args.interval < math.inf or not args.max_growth >= 0:
        p.error("--interval must be a positive number of seconds and --max-growth a percentage >= 0")
    run_dir = Path(args.run_dir or f"runs/soak-{datetime.now():%Y%m%d-%H%M%S}")
    extra = [a for a in args.train_args if a != "--"]
    cmd = [*TRAIN, "--no-progress", "--game", "Pong", "--frames", "1000000000000",
           "--eval-every", "250000", "--run-dir", str(run_dir), *extra]
    train = subprocess.Popen(cmd)
    main_proc = psutil.Process(train.pid)
    start, samples, names, base = time.time(), [], {}, None
    try:
        while (minute := (time.time() - start) / 60) < args.minutes:
            if train.poll() is not None:
                print(f"soak: train.py exited early with status {train.returncode}", file=sys.stderr)
                return 1
            names = roles(main_proc)  # again each time: a restarted worker is a new process
            samples.append({"minute": round(minute, 3), "rss_mib": rss_mib(names)})
            if base is None and minute >= args.from_minute:
                base = samples[-1]
            time.sleep(min(args.interval, max(0.0, args.minutes * 60 - (time.time() - start))))  # never past the end
        end = {"minute": round((time.time() - start) / 60, 3), "rss_mib": rss_mib(names)}
        samples.append(end)
    except KeyboardInterrupt:  # Ctrl-C: the run is stopped below, as at the end, and kept; no verdict without it
        print(f"soak: stopped after {(time.time() - start) / 60:.1f} minutes, no verdict; run dir {run_dir} kept",
              file=sys.stderr)
        return 130
    finally:
        if train.poll() is None:  # SIGTERM: the trainer checkpoints and exits (SIGINT may be ignored in background)
            train.send_signal(signal.SIGTERM)
            try:
                train.wait(timeout=60)
            except subprocess.TimeoutExpired:
                train.kill()
    base = base or samples[0]
    heads = [f"RSS at min {base['minute']:.1f}", f"RSS at min {end['minute']:.1f}"]
    print(f"{'process':<18}{heads[0]:>18}{heads[1]:>18}{'growth':>10}")
    worst = 0.0
    for name, before in base["rss_mib"].items():
        after = end["rss_mib"].get(name, float("nan"))
        growth = 100 * (after - before) / before
        worst = max(worst, growth) if growth == growth else float("inf")  # NaN: the process was gone
        print(f"{name:<18}{before:>15.1f} MiB{after:>15.1f} MiB{growth:>9.1f}%")
    write_text(run_dir / "soak.json", json.dumps({"samples": samples, "worst_growth_percent": worst}, indent=1))
    verdict = "ok" if worst <= args.max_growth else "FAIL"
    print(f"{verdict}: largest growth {worst:.1f}% (allowed {args.max_growth}%), samples in {run_dir / 'soak.json'}")
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
