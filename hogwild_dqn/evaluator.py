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
from hogwild_dqn.shared import WORKERS_DONE, NonFinite, SharedState, all_finite, run_child

EVAL_SEED_OFFSET = 10_000  # evaluation games never share seeds with the workers'


def evaluator_process(cfg: Config, spec: EnvSpec, shared: SharedState, run_dir: str, best: float,
                      start_time: float, report) -> None:
    """Process entry point (spawn). CUDA is first touched here, in the child, never in the parent."""
    run_child("evaluator", report, run_evaluator, cfg, spec, shared, Path(run_dir), report, best, start_time)


def snapshot(shared: SharedState, frames: int, best: float, cfg: Config, spec: EnvSpec) -> dict:
    """A copy (never a live view) of everything needed to continue or to play the agent."""
    return checkpoint_state(shared.model, shared.target, cfg, spec, frames=frames, best=best,
                            optimizer=shared.optimizer.state_dict(), target_epoch=int(shared.target_epoch[0]),
                            worker_eps=shared.worker_eps, worker_seed=shared.worker_seed)


def play_episode(net: torch.nn.Module, env, actor_critic: bool, eps: float, device: torch.device,
                 rng: np.random.Generator, record_steps: int = 0) -> tuple[float, list[np.ndarray]]:
    """One whole game with its raw score: A3C samples its policy, Q methods act epsilon-greedily.

    With `record_steps`, the screens of the first that many steps come back too (halved if over 300 wide).
    """
    obs, _ = env.reset()
    screens = []
    while True:
        if len(screens) < record_steps:
            screen = env.render()
            screens.append(screen[::2, ::2] if screen.shape[1] > 300 else screen)
        if not actor_critic and rng.random() < eps:
            a = int(rng.integers(env.action_space.n))
        else:
            with torch.inference_mode():
                out = net(torch.as_tensor(np.asarray(obs), device=device).unsqueeze(0))
            if actor_critic:
                a = int(torch.distributions.Categorical(logits=out[0][0]).sample())
            else:
                a = int(out[0].argmax())
        obs, _, term, trunc, info = env.step(a)
        if term or trunc:
            return float(info["episode"]["r"]), screens


def record_best(net, cfg: Config, actor_critic: bool, device, rng, run_dir: Path, writer, frames: int) -> None:
    """Play one more game on a rendering env; save it as best_episode.gif and log it to tensorboard."""
    env = make_env(cfg, cfg.seed + EVAL_SEED_OFFSET + frames, for_eval=True, render=True)
    try:
        _, screens = play_episode(net, env, actor_critic, cfg.eval_epsilon, device, rng, cfg.video_steps)
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
    actor_critic = cfg.algo == "a3c"
    net = network_for(cfg, spec).to(device)
    env = make_env(cfg, cfg.seed + EVAL_SEED_OFFSET, for_eval=True)
    rng = np.random.default_rng(cfg.seed + EVAL_SEED_OFFSET)
    torch.manual_seed(cfg.seed + EVAL_SEED_OFFSET)
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
        net.load_state_dict(state["model"])
        t0 = time.time()
        returns = [play_episode(net, env, actor_critic, cfg.eval_epsilon, device, rng)[0]
                   for _ in range(cfg.eval_episodes)]
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
                record_best(net, cfg, actor_critic, device, rng, run_dir, writer, frames)
        if not final:  # the runner writes the final checkpoint itself, after every process is gone
            atomic_save(state, run_dir / "checkpoint.pt")
        next_eval = (frames // cfg.eval_every + 1) * cfg.eval_every
        last_frames = frames
        if final:
            break
    writer.close()
    env.close()
    del net  # release GPU memory before the process exits
    if device.type == "cuda":
        torch.cuda.empty_cache()
