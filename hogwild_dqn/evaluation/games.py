"""Playing evaluation games: the evaluator's player (device, policy, env), whole games from the current weights,
the best episode's GIF, and what a finished evaluation does (Recorder). Used by the evaluator process
(evaluator.py), on a cluster the Ray evaluator actor and the parameter holder, `hogwild-play` (play_episode) and
`bench --evaluator`."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from hogwild_dqn import metrics
from hogwild_dqn.checkpoint import atomic_save
from hogwild_dqn.config import Config
from hogwild_dqn.envs import make_env, render_problem
from hogwild_dqn.evaluation.policy import EVAL_SEED_OFFSET, Policy
from hogwild_dqn.evaluation.scores import is_periodic
from hogwild_dqn.files import atomic_bytes
from hogwild_dqn.networks import network_for
from hogwild_dqn.seeding import evaluation_seeds


def evaluation_player(cfg: Config, spec) -> tuple[torch.device, Policy, list]:
    """What an evaluator plays with, on one machine or a cluster: the device (CUDA where there is one: touched
    here, in the evaluator's own process), a policy on the run's network seeded apart from the workers, and
    --eval-envs evaluation envs (raw rewards, whole games; no more than an evaluation's games), each seeded apart."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    policy = Policy(network_for(cfg, spec), cfg, device, cfg.seed + EVAL_SEED_OFFSET)
    count = min(cfg.eval_envs, max(cfg.eval_episodes, cfg.final_eval_episodes))
    return device, policy, [make_env(cfg, seed, for_eval=True) for seed in evaluation_seeds(cfg.seed, count)]


class Orphaned(Exception):
    """The process that asked for the games is gone (see play_games's `alive`)."""


def play_games(policy: Policy, envs: list, episodes: int, alive: Callable[[], bool] | None = None,
               on_screen: Callable[[np.ndarray], None] | None = None) -> dict:
    """`episodes` whole evaluation games from the policy's current weights, played side by side on `envs` with one
    forward a step for all the games in play (a batch-1 forward cost more than the emulator's step); their raw
    scores (in the order the games started), mean, spread and agent steps. Every game started is played to its end
    and no more are started than asked for, so that short games are not favoured. `alive` is asked as each game
    starts and every 100 steps (a game can last minutes; games shorter than 100 steps are asked once each); its
    False raises Orphaned. `on_screen` sees every screen (env.render()) of the games in play before the agent
    acts: give it one env (play_episode)."""
    t0 = time.time()
    returns: list[float] = []
    playing: dict[int, int] = {}  # env's index -> its game's index in returns
    obs: list = [None] * len(envs)
    policy.reset(len(envs))
    played, ask_in = 0, 100

    def start(i: int) -> None:
        if alive is not None and not alive():
            raise Orphaned()
        obs[i], _ = envs[i].reset()
        policy.reset_row(i)
        playing[i] = len(returns)
        returns.append(math.nan)

    for i in range(min(len(envs), episodes)):
        start(i)
    while playing:
        rows = list(playing)
        ask_in -= len(rows)  # every 100 steps of the games in play
        if ask_in <= 0:
            ask_in = 100
            if alive is not None and not alive():
                raise Orphaned()
        if on_screen is not None:
            for i in rows:
                on_screen(envs[i].render())
        for i, action in zip(rows, policy.act_rows([obs[i] for i in rows], rows), strict=True):
            obs[i], _, term, trunc, info = envs[i].step(action)
            if term or trunc:
                returns[playing.pop(i)] = float(info["episode"]["r"])
                played += int(info["episode"]["l"])
                if len(returns) < episodes:
                    start(i)
    return {"mean_return": float(np.mean(returns)), "std_return": float(np.std(returns)),
            "episodes": len(returns), "returns": returns, "steps": played, "seconds": time.time() - t0}


def play_episode(policy: Policy, env, on_screen: Callable[[np.ndarray], None] | None = None,
                 alive: Callable[[], bool] | None = None) -> float:
    """One whole game on `env`; its raw score. `on_screen`, `alive`: see play_games."""
    return play_games(policy, [env], 1, alive, on_screen)["returns"][0]


_RENDERS: dict[str, bool] = {}  # game -> whether this process can draw its screens


def _cannot_render(cfg: Config) -> bool:
    """Checked once per process and game, which says why on stderr, once."""
    if cfg.game not in _RENDERS:
        problem = render_problem(cfg)
        _RENDERS[cfg.game] = problem is None
        if problem:
            print(f"evaluator: no best-episode GIFs: {cfg.game} cannot draw its screens on this machine "
                  f"({problem})", file=sys.stderr, flush=True)
    return not _RENDERS[cfg.game]


def best_episode_gif(policy: Policy, cfg: Config, frames: int, alive=None) -> bytes | None:
    """One more game on a rendering env; its first --video-steps screens as an animated GIF (screens over 300
    wide are halved). None where the game cannot be drawn here (MuJoCo without OpenGL). `alive`: see
    play_games."""
    if _cannot_render(cfg):
        return None
    env = make_env(cfg, cfg.seed + EVAL_SEED_OFFSET + frames, for_eval=True, render=True)
    screens = []

    def keep(screen):
        if len(screens) < cfg.video_steps:
            screens.append(screen[::2, ::2] if screen.shape[1] > 300 else screen)

    try:
        play_episode(policy, env, keep, alive)
    finally:
        env.close()
    return metrics.encode_gif(screens)


class Recorder:
    """Where a finished evaluation goes: tensorboard (eval/*, perf/eval_seconds), best.pt and best_episode.gif
    at a new best. `best` is the best mean so far (earlier sessions of a resumed run included)."""

    def __init__(self, run_dir: Path, writer, best: float):
        self.run_dir, self.writer, self.best = Path(run_dir), writer, best

    def is_new_best(self, result: dict) -> bool:
        return is_periodic(result) and result["mean_return"] > self.best

    def record(self, result: dict, frames: int, state: Callable[[float], dict], gif: bytes | None = None) -> None:
        """Log `result` (an evaluation at global `frames`); at a new best save best.pt from `state(best)` (the
        weights that were played) and the GIF of one of their games, if given."""
        if result.get("confirmation"):  # a curve of its own: the periodic curve stays a few games a point
            self.writer.add_scalar(metrics.CONFIRM_MEAN, result["mean_return"], frames)
            self.writer.add_scalar(metrics.CONFIRM_STD, result["std_return"], frames)
        else:
            for tag, key in ((metrics.EVAL_MEAN, "mean_return"), (metrics.EVAL_STD, "std_return"),
                             (metrics.EVAL_SECONDS, "seconds")):
                self.writer.add_scalar(tag, result[key], frames)
        if result.get("final"):  # the run's score; best.pt stays the best periodic evaluation's
            self.writer.add_scalar(metrics.FINAL_MEAN, result["mean_return"], frames)
            self.writer.add_scalar(metrics.FINAL_STD, result["std_return"], frames)
            self.writer.flush()
            return
        self.writer.flush()
        if not self.is_new_best(result):  # a confirmation's weights are a periodic evaluation's, already judged
            return
        self.best = result["mean_return"]
        atomic_save(state(self.best), self.run_dir / "best.pt")
        self.keep_gif(gif, frames)

    def keep_gif(self, gif: bytes | None, frames: int) -> None:
        """best_episode.gif and its tensorboard image: one game of the best weights, if one was filmed."""
        if gif:
            atomic_bytes(gif, self.run_dir / "best_episode.gif")
            metrics.write_gif(self.writer, metrics.BEST_EPISODE, gif, frames)
