"""The bench's --evaluator mode: the evaluation player a run's evaluator uses (real ALE, one torch thread, this
process) plays whole games from an untrained preset network, each --with row interleaved with the plain one;
frames/s of the games and each row's ratio to the plain row's."""

from __future__ import annotations

import json
import os
import statistics
import time

import torch

from hogwild_dqn.config import Config
from hogwild_dqn.envs import emulator_fps, env_spec
from hogwild_dqn.evaluation.games import evaluation_player, play_games
from hogwild_dqn.tools.bench_points import bench_config, out_folder
from hogwild_dqn.tools.output import write_text


def evaluator_fps(cfg: Config, seconds: float) -> tuple[float, float, int]:
    """Frames/s, games/s and the games played by the evaluation player (evaluation_player, play_games): rounds
    of --final-eval-episodes whole games for at least `seconds`."""
    torch.manual_seed(cfg.seed)
    _, policy, envs = evaluation_player(cfg, env_spec(cfg))
    steps = games = 0
    t0 = time.perf_counter()
    try:
        while time.perf_counter() - t0 < seconds:
            played = play_games(policy, envs, cfg.final_eval_episodes)
            steps, games = steps + played["steps"], games + played["episodes"]
    finally:
        for env in envs:
            env.close()
    took = time.perf_counter() - t0
    return steps * cfg.frame_skip / took, games / took, games


def measure_evaluator(args) -> int:
    """The evaluator's rows (--evaluator) over the repeats, interleaved; the table and files."""
    out = out_folder(args)
    algo, envs = args.algos[0], args.envs[0]
    rows = [("plain", {})] + list(args.variants)  # plain: the preset's --eval-envs
    print(f"evaluator benchmark: {args.game}, {algo}'s preset, {args.repeats} repeats of {args.seconds:g} s per row")
    base = bench_config(args.game, algo, envs, {})
    emu, samples = [], {label: [] for label, _ in rows}
    for rep in range(args.repeats):
        emu.append(emulator_fps(base, args.seconds))
        for label, values in (rows if rep % 2 == 0 else rows[::-1]):
            fps, gps, games = evaluator_fps(bench_config(args.game, algo, envs, values), args.seconds)
            samples[label].append((fps, gps, games))
            print(f"  repeat {rep + 1}: {label}: {fps:,.0f} frames/s, {gps * 60:,.1f} games/min", flush=True)
    plain = statistics.median(s[0] for s in samples["plain"])
    lines = [f"cores: {os.cpu_count() or 1}; bare emulator (ALE, frame skip {base.frame_skip}, random actions): "
             f"{statistics.median(emu):,.0f} frames/s; the evaluator's games, {algo}'s preset network untrained, "
             f"{base.final_eval_episodes} games a round", "",
             "| evaluator | frames/s | games/min | ratio to plain |", "| --- | --- | --- | --- |"]
    results = []
    for label, v in samples.items():
        fps, gps = statistics.median(s[0] for s in v), statistics.median(s[1] for s in v)
        name = f"the preset (--eval-envs {base.eval_envs})" if label == "plain" else label
        lines.append(f"| {name} | {fps:,.0f} | {gps * 60:,.1f} | {fps / plain:.2f} |")
        results.append({"row": label, "frames_per_second": fps, "games_per_second": gps, "ratio_to_plain": fps / plain,
                        "samples": [s[0] for s in v], "games": [s[2] for s in v]})
    md = "\n".join(lines)
    print(md)
    write_text(out / "bench.md", md + "\n")
    write_text(out / "bench.json", json.dumps({"game": args.game, "algo": algo, "evaluator": True,
                                              "emulator_frames_per_second": statistics.median(emu),
                                              "emulator_samples": emu, "results": results}, indent=2))
    print(f"wrote {out / 'bench.md'} and {out / 'bench.json'}")
    return 0


if __name__ == "__main__":
    import sys

    from hogwild_dqn.commands import not_a_command

    sys.exit(not_a_command(__spec__.name, "`python -m hogwild_dqn.tools.bench --evaluator`"))
