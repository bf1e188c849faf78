"""The evaluator: snapshot the shared weights, play whole games (CUDA if present), keep best.pt and checkpoint.pt."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import torch

from hogwild_dqn import metrics
from hogwild_dqn.checkpoint import atomic_save, checkpoint_state
from hogwild_dqn.config import Config
from hogwild_dqn.envs import EnvSpec, make_env
from hogwild_dqn.networks import network_for
from hogwild_dqn.policy import EVAL_SEED_OFFSET, Policy, play_episode
from hogwild_dqn.shared import WORKERS_DONE, NonFinite, SharedState, all_finite, run_child


def evaluator_process(cfg: Config, spec: EnvSpec, shared: SharedState, run_dir: str, best: float,
                      start_time: float, report) -> None:
    """Process entry point (spawn). CUDA is first touched here, in the child, never in the parent."""
    run_child("evaluator", report, run_evaluator, cfg, spec, shared, Path(run_dir), report, best, start_time)


def snapshot(shared: SharedState, frames: int, best: float, cfg: Config, spec: EnvSpec) -> dict:
    """A copy (never a live view) of everything needed to continue or to play the agent."""
    return checkpoint_state(shared.model, shared.target, cfg, spec, frames=frames, best=best,
                            optimizer=shared.optimizer.state_dict(), target_epoch=int(shared.target_epoch[0]),
                            worker_eps=shared.worker_eps, worker_seed=shared.worker_seed)


def record_best(policy: Policy, cfg: Config, run_dir: Path, writer, frames: int) -> None:
    """Play one more game on a rendering env; save its first video_steps screens as best_episode.gif and log
    it to tensorboard (screens over 300 wide are halved)."""
    env = make_env(cfg, cfg.seed + EVAL_SEED_OFFSET + frames, for_eval=True, render=True)
    screens = []

    def keep(screen):
        if len(screens) < cfg.video_steps:
            screens.append(screen[::2, ::2] if screen.shape[1] > 300 else screen)

    try:
        play_episode(policy, env, keep)
    finally:
        env.close()
    gif = metrics.encode_gif(screens)
    tmp = run_dir / ".best_episode.gif.tmp"
    tmp.write_bytes(gif)
    tmp.replace(run_dir / "best_episode.gif")
    metrics.write_gif(writer, metrics.BEST_EPISODE, gif, *screens[0].shape[:2], frames)


def run_evaluator(cfg: Config, spec: EnvSpec, shared: SharedState, run_dir: Path, report, best: float,
                  start_time: float) -> None:
    """Evaluate every eval_every global frames and once more after the workers finish; then exit."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    policy = Policy(network_for(cfg, spec), cfg, device, cfg.seed + EVAL_SEED_OFFSET)
    env = make_env(cfg, cfg.seed + EVAL_SEED_OFFSET, for_eval=True)
    writer = metrics.make_writer(run_dir, "evaluator")
    next_eval = (shared.frames() // cfg.eval_every + 1) * cfg.eval_every
    last_frames, parent = -1, os.getppid()
    while os.getppid() == parent:  # an orphan (runner killed outright) stops by itself
        final = shared.is_set(WORKERS_DONE)
        frames = shared.frames()
        if final and frames == last_frames:
            break  # the final weights were evaluated already
        if not final and frames < next_eval:
            time.sleep(0.2)
            continue
        state = snapshot(shared, frames, best, cfg, spec)
        if not all_finite(state["model"].values()):  # never evaluate, let alone save, broken weights
            raise NonFinite(f"non-finite shared parameters at global frame {frames}")
        policy.net.load_state_dict(state["model"])
        t0 = time.time()
        returns = [play_episode(policy, env) for _ in range(cfg.eval_episodes)]
        mean, std = float(np.mean(returns)), float(np.std(returns))
        writer.add_scalar(metrics.EVAL_MEAN, mean, frames)
        writer.add_scalar(metrics.EVAL_STD, std, frames)
        writer.add_scalar(metrics.EVAL_SECONDS, time.time() - t0, frames)
        writer.flush()
        report.send(("eval", {"frames": frames, "wall_seconds": round(time.time() - start_time, 2),
                              "mean_return": mean, "std_return": std, "episodes": len(returns),
                              "device": device.type}))
        if mean > best:
            best = state["best_eval_return"] = mean
            atomic_save(state, run_dir / "best.pt")
            if cfg.video_steps:
                record_best(policy, cfg, run_dir, writer, frames)
        if not final:  # the runner writes the final checkpoint itself, after every process is gone
            atomic_save(state, run_dir / "checkpoint.pt")
        next_eval = (frames // cfg.eval_every + 1) * cfg.eval_every
        last_frames = frames
        if final:
            break
    writer.close()
    env.close()
    del policy  # release GPU memory before the process exits
    if device.type == "cuda":
        torch.cuda.empty_cache()
