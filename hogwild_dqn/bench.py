"""Throughput benchmark: the bare emulator and the trainer's workers, measured side by side in one run.

    python -m hogwild_dqn.bench [--threads 1 2] [--algos q1 sarsa1 nq a3c dqn] [--envs 1 8] [--seconds 8]
    make bench

Each point starts real worker processes over real shared memory (evaluator off), lets them warm up, counts
the global frames and the updates pushed over --seconds, and stops them; points are interleaved across
repeats so that a noisy machine hurts every point alike. Medians are reported, with bench.md and bench.json
written to --out. A replay method (dqn) runs its own preset (configs/dqn_atari.yaml) with minibatches from
its first --batch-size transitions, so that its updates are measured with its acting (epsilon is still near
1 in so short a run: acting needs almost no forward); it plays one game per worker, so it is measured at
--envs 1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import torch
import torch.multiprocessing as mp

from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.config import Config, default_preset, read_yaml
from hogwild_dqn.envs import env_spec
from hogwild_dqn.processes import Child
from hogwild_dqn.rundir import Run
from hogwild_dqn.shared import STOP, new_shared_state
from hogwild_dqn.worker import worker_process


def emulator_fps(cfg: Config, seconds: float) -> float:
    """Frames/s of the bare ALE game: frame skip 4, random actions, no preprocessing, no learning."""
    import ale_py  # noqa: F401  (registers the ALE ids)
    import gymnasium as gym

    env = gym.make(f"ALE/{cfg.game}-v5", frameskip=cfg.frame_skip, repeat_action_probability=0.0)
    env.reset(seed=0)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        steps += 1
        if term or trunc:
            env.reset()
    env.close()
    return steps * cfg.frame_skip / (time.perf_counter() - t0)


def workers_fps(cfg: Config, threads: int, warmup: float, seconds: float) -> tuple[float, float]:
    """Global frames/s and updates/s of `threads` real worker processes over one shared network, after a
    warm-up."""
    spec = env_spec(cfg)
    shared = new_shared_state(cfg, spec, threads)
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as run_dir:
        run = Run(cfg, spec, Path(run_dir), threads)
        kids = [Child(ctx, f"worker{r}", worker_process, (r, cfg.seed + r, run, shared)) for r in range(threads)]
        try:
            while shared.frames() == 0 and all(k.proc.is_alive() for k in kids):
                time.sleep(0.05)  # every process imported torch and built its env
            time.sleep(warmup)
            f0, u0, t0 = shared.frames(), int(shared.worker_updates.sum()), time.perf_counter()
            time.sleep(seconds)
            f1, u1, t1 = shared.frames(), int(shared.worker_updates.sum()), time.perf_counter()
            dead = [k for k in kids if not k.proc.is_alive()]
            if dead:
                for k in dead:
                    k.poll()
                why = "; ".join(f"{k.name}: {k.errors[-1].strip().splitlines()[-1] if k.errors else k.proc.exitcode}"
                                for k in dead)
                raise RuntimeError(f"workers died during the benchmark ({why})")
        finally:
            shared.set(STOP)
            for k in kids:
                k.proc.join(timeout=10)
                if k.proc.is_alive():
                    k.proc.terminate()
    return (f1 - f0) / (t1 - t0), (u1 - u0) / (t1 - t0)


def point_config(base: Config, algo: str, envs: int) -> Config:
    """The config of one point: the base values, or a replay method's own preset learning from the start."""
    values = {**base.to_dict(), "algo": algo, "envs_per_worker": envs}
    if ALGORITHMS[algo].replay:
        preset = read_yaml(default_preset(base.game, algo))
        values.update({**preset, "game": base.game, "algo": algo, "envs_per_worker": envs, "frames": base.frames,
                       "eval_every": base.eval_every, "learning_starts": 0})
    return Config(**values)


def table(cores: int, emu: float, results: list[dict], frame_skip: int) -> str:
    """The markdown table of the medians, with scaling efficiency and the ratio to the bare emulator."""
    one = {(r["algo"], r["envs_per_worker"]): r["frames_per_second"] for r in results if r["threads"] == 1}
    lines = [f"cores: {cores}; bare emulator (ALE, frame skip {frame_skip}, random actions): {emu:,.0f} frames/s",
             "", "| algo | workers | games per worker | frames/s | agent steps/s | frames/s per worker | "
             "updates/s per worker | scaling efficiency | per worker / emulator |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        key = (r["algo"], r["envs_per_worker"])
        eff = r["frames_per_second"] / (r["threads"] * one[key]) if key in one else None
        per = r["frames_per_second"] / r["threads"]
        lines.append(f"| {r['algo']} | {r['threads']} | {r['envs_per_worker']} | {r['frames_per_second']:,.0f} | "
                     f"{r['agent_steps_per_second']:,.0f} | {per:,.0f} | "
                     f"{r['updates_per_second'] / r['threads']:,.0f} | {'—' if eff is None else f'{eff:.2f}'} | "
                     f"{per / emu:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hogwild_dqn.bench", description=__doc__.splitlines()[0])
    p.add_argument("--game", default="Pong")
    p.add_argument("--algos", nargs="+", default=list(ALGORITHMS), choices=list(ALGORITHMS))
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2], help="worker counts to measure")
    p.add_argument("--envs", nargs="+", type=int, default=[1],
                   help="games per worker to measure (--envs-per-worker of train.py)")
    p.add_argument("--seconds", type=float, default=6.0, help="measured seconds per point")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds after start-up before measuring")
    p.add_argument("--repeats", type=int, default=3, help="repeats of every point (medians are reported)")
    p.add_argument("--out", default=None, help="folder for bench.md and bench.json (default runs/bench-<time>)")
    args = p.parse_args(argv)
    if min(args.threads) < 1 or min(args.envs) < 1 or args.repeats < 1 or args.seconds <= 0:
        p.error("--threads, --envs, --repeats and --seconds must be positive")
    torch.set_num_threads(1)
    out = Path(args.out or f"runs/bench-{datetime.now():%Y%m%d-%H%M%S}")
    out.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    print(f"benchmark on {cores} cores: {args.game}, {args.repeats} repeats of {args.seconds:g} s per point")
    base = Config(game=args.game, frames=10**12, progress=False, video_steps=0)
    emu, samples = [], {(a, e, n): [] for a in args.algos for e in args.envs for n in args.threads
                        if e == 1 or not ALGORITHMS[a].replay}
    for rep in range(args.repeats):
        emu.append(emulator_fps(base, args.seconds))
        for algo, e, n in samples:
            fps, ups = workers_fps(point_config(base, algo, e), n, args.warmup, args.seconds)
            samples[(algo, e, n)].append((fps, ups))
            print(f"  repeat {rep + 1}: {algo} x{n}, {e} games each: {fps:,.0f} frames/s, {ups:,.1f} updates/s",
                  flush=True)
    emu_med = statistics.median(emu)
    results = []
    for (a, e, n), v in samples.items():
        fps = statistics.median(f for f, _ in v)
        results.append({"algo": a, "threads": n, "envs_per_worker": e, "frames_per_second": fps,
                        "agent_steps_per_second": fps / base.frame_skip,
                        "updates_per_second": statistics.median(u for _, u in v), "repeats": len(v),
                        "samples": [f for f, _ in v], "update_samples": [u for _, u in v]})
    md = table(cores, emu_med, results, base.frame_skip)
    print(md)
    (out / "bench.md").write_text(md + "\n")
    (out / "bench.json").write_text(json.dumps({"cores": cores, "game": args.game, "emulator_frames_per_second":
                                                emu_med, "emulator_samples": emu, "results": results}, indent=2))
    print(f"wrote {out / 'bench.md'} and {out / 'bench.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
