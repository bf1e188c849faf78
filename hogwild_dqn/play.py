"""Watch a trained agent: play whole evaluation games from a run dir and record the first as a video.

    python -m hogwild_dqn.play RUN_DIR [--episodes 10] [--best] [--device cuda] [--seed S] [--epsilon E] [--no-video]
    (or: make play RUN=RUN_DIR EPISODES=10)

Loads checkpoint.pt, the run's last weights (--best: best.pt, the best periodic evaluation's), plays with the
evaluator's policy and env (no-op starts, FIRE reset where the game has it, raw scores), prints each score and
mean ± std, min and max, and writes play.mp4 of the first game next to the checkpoint.
"""

from __future__ import annotations

import argparse
import errno
import math
import shutil
import sys
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path

import numpy as np

from hogwild_dqn.commands import command
from hogwild_dqn.config import ConfigError, Parser
from hogwild_dqn.console import catch_stop_signals
from hogwild_dqn.envs import make_env, protocol, render_problem, resolve
from hogwild_dqn.evaluation.games import play_episode
from hogwild_dqn.evaluation.policy import EVAL_SEED_OFFSET, check_arguments, check_fits, load_policy
from hogwild_dqn.files import write_failed

PLAY_SEED_OFFSET = 2 * EVAL_SEED_OFFSET  # games the evaluator did not play


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = Parser(prog="python -m hogwild_dqn.play", description="Play a trained agent and record a video.")
    p.add_argument("run_dir", type=Path, help="a run dir holding checkpoint.pt (and best.pt)")
    p.add_argument("--episodes", type=int, default=10, help="whole games to play (default 10)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where the network runs")
    p.add_argument("--seed", type=int, default=None, help="seed of the games and the policy's draws "
                                                          "(default: the run's seed + 20000)")
    p.add_argument("--deterministic", action=argparse.BooleanOptionalAction, default=None,
                   help="A3C: take the policy's most likely action (a Gaussian's mean) rather than sample it "
                        "(default: the mean for continuous actions, else as the run evaluated, its "
                        "--deterministic-eval)")
    p.add_argument("--best", action="store_true",
                   help="play the weights of the run's best periodic evaluation (best.pt: the maximum of noisy "
                        "few-game evaluations, so selection-biased) rather than its last weights (checkpoint.pt, "
                        "which its score is about)")
    p.add_argument("--last", action="store_true", help="the last weights: the default (kept for older commands)")
    p.add_argument("--epsilon", type=float, default=None,
                   help="Q methods: the random-action probability of the games (default: the run's --eval-epsilon)")
    p.add_argument("--video", action=argparse.BooleanOptionalAction, default=True,
                   help="record the first game as play.mp4 next to the checkpoint (default: on)")
    args = p.parse_args(argv)
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be a positive integer, got {args.episodes}")
    check_arguments(args.device, args.seed, args.epsilon, args.best, args.last)  # before the checkpoint is read
    return args


class VideoWriter:
    """Streams screens into an H.264 MP4 (imageio-ffmpeg), so a long game never sits in memory; written to a
    temporary file and renamed at the end, so a failure (a full disk: WriteFailed) leaves play.mp4 as it was."""

    def __init__(self, path: Path, fps: float):
        import imageio.v2 as imageio  # only when a video is asked for

        self.path, self.tmp = path, path.with_name(f".{path.name}.tmp.mp4")
        with self._failing():
            # ffmpeg opens the file only at the first frame and then says "Broken pipe": ask the OS first, with a
            # file that has no name (so none is left behind, whatever stops play)
            tempfile.TemporaryFile(dir=self.tmp.parent).close()
            self.writer = imageio.get_writer(self.tmp, fps=fps, codec="libx264", macro_block_size=2,
                                             ffmpeg_log_level="quiet")  # its failures: ours

    @contextmanager
    def _failing(self):
        try:
            yield
        except (OSError, RuntimeError) as e:  # ffmpeg, unable to write, ends; imageio says so in its own words
            with suppress(OSError):  # a read-only folder refuses the unlink too
                self.tmp.unlink(missing_ok=True)
            if _disk_full(self.tmp.parent) or not isinstance(e, OSError):
                e = OSError(errno.ENOSPC if _disk_full(self.tmp.parent) else errno.EIO, None)
            raise write_failed(self.path, e) from None

    def __call__(self, screen: np.ndarray) -> None:
        with self._failing():
            self.writer.append_data(screen)

    def close(self) -> None:
        with self._failing():
            self.writer.close()
            self.tmp.replace(self.path)

    def abandon(self) -> None:
        """A game cut short (Ctrl-C, an error): its part of a video is dropped, play.mp4 stays as it was."""
        try:
            self.writer.close()
        except (OSError, RuntimeError):
            pass  # ffmpeg already gone: the part-video is dropped all the same
        self.tmp.unlink(missing_ok=True)


def _disk_full(folder: Path) -> bool:
    """Whether the filesystem of `folder` has no room left (ffmpeg's own error does not reach us as an errno)."""
    return shutil.disk_usage(folder).free < 1 << 16


def play(run_dir: Path, episodes: int, device: str, seed: int | None, video: bool,
         deterministic: bool | None = None, best: bool = False, epsilon: float | None = None) -> dict:
    """Play `episodes` games; return their scores and where the video went. `epsilon` overrides the run's
    evaluation epsilon (Q methods)."""
    policy = load_policy(run_dir, device, deterministic=deterministic, best=best, epsilon=epsilon)
    cfg = policy.cfg
    seed = cfg.seed + PLAY_SEED_OFFSET if seed is None else seed
    policy.seed(seed)
    is_atari, _ = resolve(cfg.game)
    problem = render_problem(cfg) if video else None
    if problem:
        print(f"play: no video: {cfg.game} cannot draw its screens on this machine ({problem})", flush=True)
        video = False
    env = make_env(cfg, seed, for_eval=True, render=video)
    scores, out = [], None
    try:  # the env is closed however play ends, a checkpoint that does not fit the game included
        check_fits(policy, env)
        acting = (f"epsilon-greedy (epsilon {cfg.eval_epsilon:g})" if not policy.actor_critic
                  else ("the Gaussian's mean (--no-deterministic samples)" if policy.spec.continuous
                        else "the policy's most likely action") if policy.deterministic
                  else "actions sampled from the policy")
        which = ("the best periodic evaluation's weights (selection-biased; checkpoint.pt holds the last)" if best
                 else "the last weights")
        peak = (f"evaluator's best {policy.best_eval_return:g}" if math.isfinite(policy.best_eval_return)
                else "no periodic evaluation")
        print(f"{policy.source}: {which}, {cfg.variant()} on {protocol(cfg)} after {policy.frames:,} frames "
              f"({peak}); {episodes} games on {device}, {acting}", flush=True)
        for i in range(episodes):
            recorder = None
            if video and i == 0:
                fps = 60 / cfg.frame_skip if is_atari else env.metadata.get("render_fps", 30)
                recorder = VideoWriter(policy.source.parent / "play.mp4", fps)
            try:
                scores.append(play_episode(policy, env, recorder))
                if recorder is not None:
                    recorder.close()
                    out = recorder.path
            except BaseException:  # a signal during the closing too: no part-video left behind
                if recorder is not None:
                    recorder.abandon()
                raise
            print(f"game {i + 1}: {scores[-1]:g}", flush=True)
    finally:
        env.close()
    return {"scores": scores, "mean": float(np.mean(scores)), "std": float(np.std(scores)),
            "min": float(np.min(scores)), "max": float(np.max(scores)), "video": out}


@command("play")
def main(argv: list[str] | None = None) -> int:
    catch_stop_signals()
    args = parse(argv)
    r = play(args.run_dir, args.episodes, args.device, args.seed, args.video, args.deterministic, args.best,
             args.epsilon)
    print(f"mean {r['mean']:g} ± {r['std']:.1f} over {len(r['scores'])} games, min {r['min']:g}, "
          f"max {r['max']:g}" + (f"; video {r['video']}" if r["video"] else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
