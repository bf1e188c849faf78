"""The alternative a user would pick: Stable-Baselines3 A2C on an Atari game or a MuJoCo task, measured as our
runs are.

    pip install -r requirements-baselines.txt      (or: make install-baselines)
    python baselines/sb3_a2c.py --game Breakout --frames 10000000 --seed 1 --run-dir runs/sb3-breakout
    python baselines/sb3_a2c.py --game HalfCheetah-v5 --frames 1000000 --seed 1 --run-dir runs/sb3-cheetah

rl-zoo's Atari hyperparameters for A2C (hyperparams/a2c.yml): SB3's AtariWrapper (no-op starts, frame skip 4,
life-loss terminals, reward clipping, 84x84 grey; it also presses FIRE at reset, which ours does not),
4 stacked frames, CnnPolicy, 16 envs in one process, ent_coef 0.01, vf_coef 0.25, RMSpropTFLike eps 1e-5, and
SB3's defaults otherwise (lr 7e-4 constant, n_steps 5, gamma 0.99, max_grad_norm 0.5). `--frames` counts
emulator frames (4 per env step) as our --frames does; the zoo's 1e7 timesteps are 4e7 frames.

A gymnasium id (HalfCheetah-v5, ...; `make install-mujoco` for MuJoCo): rl-zoo's MuJoCo hyperparameters for
A2C (hyperparams/a2c.yml's mujoco-defaults, the same for HalfCheetah, Ant, Hopper and Walker2d): MlpPolicy,
`normalize: true`, which rl-zoo's ExperimentManager turns into VecNormalize's defaults on the training env
(observations and rewards, gamma 0.99) and observations only, statistics frozen, on the evaluation env; SB3's
defaults otherwise: 1 env, n_steps 5, lr 7e-4, RMSprop. `--frames` counts env steps there (no frame skip), as
ours does; `--n-envs` defaults to 1.

Evaluation as our evaluator's: every --eval-every frames, --eval-episodes whole games (no life-loss terminal,
raw scores, no-op starts) on an env seeded apart from training; Atari samples the policy, continuous tasks take
its mean (deterministic=True, as rl-zoo evaluates them). A run that trains all its frames ends with a final
evaluation of its last weights over --final-eval-episodes (30) games, its score. The run dir gets a config.yaml
and a summary.json in our format (rewritten at every evaluation, so a run cut short keeps its curve), which
`make report` and `make benchmark` read beside our runs. Ctrl-C (SIGINT, also in a background job) or SIGTERM
stops a run as it stops ours: summary "interrupted (SIGINT)" or "terminated (SIGTERM)", the model saved, exit 130
or 143.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
import yaml

FRAME_SKIP = 4
EVAL_SEED_OFFSET = 10_000


class Terminated(Exception):
    """SIGTERM, raised in the training loop as KeyboardInterrupt is for SIGINT."""


def _terminate(signum, frame):
    raise Terminated()


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--game", default="Breakout", help="ALE game name (Breakout, Pong, ...) or a gymnasium id "
                                                      "(HalfCheetah-v5, ...)")
    p.add_argument("--frames", type=int, default=10_000_000, help="emulator frames (Atari) or env steps, all envs "
                                                                  "together")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--n-envs", type=int, default=None, help="rl-zoo: 16 on Atari, 1 on MuJoCo")
    p.add_argument("--torch-threads", type=int, default=None,
                   help="torch threads; default 2 on Atari (the whole 2-core machine), 1 on MuJoCo (a 64-unit MLP "
                        "gains nothing from a second thread; two ran 4x slower beside another process here)")
    p.add_argument("--eval-every", type=int, default=500_000, help="frames between evaluations")
    p.add_argument("--eval-episodes", type=int, default=5)
    p.add_argument("--final-eval-episodes", type=int, default=30, help="games of the last weights' evaluation")
    p.add_argument("--run-dir", type=Path, required=True, help="a new or empty directory")
    args = p.parse_args(argv)
    args.atari = "-v" not in args.game or args.game.startswith("ALE/")
    if args.n_envs is None:
        args.n_envs = 16 if args.atari else 1
    if args.torch_threads is None:
        args.torch_threads = 2 if args.atari else 1
    if min(args.frames, args.n_envs, args.torch_threads, args.eval_every, args.eval_episodes,
           args.final_eval_episodes) < 1:
        p.error("--frames, --n-envs, --torch-threads, --eval-every, --eval-episodes and --final-eval-episodes must "
                "be positive")
    if args.run_dir.exists() and (not args.run_dir.is_dir() or any(args.run_dir.iterdir())):
        p.error(f"run dir {args.run_dir} already exists and is not empty")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    import ale_py
    import gymnasium as gym
    from stable_baselines3 import A2C
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike
    from stable_baselines3.common.vec_env import VecFrameStack, VecNormalize

    gym.register_envs(ale_py)
    torch.set_num_threads(args.torch_threads)
    skip = FRAME_SKIP if args.atari else 1
    # Atari: no sticky actions, 108k-frame limit, as our AtariGame
    name = args.game[4:].rsplit("-v", 1)[0] if args.game.startswith("ALE/") else args.game  # ALE/Pong-v5 -> Pong
    env_id = f"{name}NoFrameskip-v4" if args.atari else args.game
    run_dir = args.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {"game": args.game, "algo": "sb3_a2c", "threads": 1, "seed": args.seed, "frames": args.frames,
              "n_envs": args.n_envs, "torch_threads": args.torch_threads, "env_id": env_id,
              "eval_every": args.eval_every, "eval_episodes": args.eval_episodes,
              "hyperparameters": "rl-zoo a2c.yml atari: ent_coef 0.01, vf_coef 0.25, RMSpropTFLike eps 1e-5"
              if args.atari else "rl-zoo a2c.yml mujoco-defaults: MlpPolicy, VecNormalize(norm_obs, norm_reward)"}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    if args.atari:
        env = VecFrameStack(make_atari_env(env_id, n_envs=args.n_envs, seed=args.seed), n_stack=4)
        eval_env = VecFrameStack(make_atari_env(env_id, n_envs=1, seed=args.seed + EVAL_SEED_OFFSET,
                                                wrapper_kwargs={"clip_reward": False,
                                                                "terminal_on_life_loss": False}), n_stack=4)
        model = A2C("CnnPolicy", env, ent_coef=0.01, vf_coef=0.25, seed=args.seed, device="cpu", verbose=0,
                    policy_kwargs={"optimizer_class": RMSpropTFLike, "optimizer_kwargs": {"eps": 1e-5}})
    else:
        env = VecNormalize(make_vec_env(env_id, n_envs=args.n_envs, seed=args.seed), norm_obs=True,
                           norm_reward=True)  # rl-zoo's `normalize: true`; the Monitor inside keeps raw returns
        # the evaluation env sees observations through the training statistics, frozen (as rl-zoo evaluates)
        eval_env = VecNormalize(make_vec_env(env_id, n_envs=1, seed=args.seed + EVAL_SEED_OFFSET), norm_obs=True,
                                norm_reward=False, training=False)
        model = A2C("MlpPolicy", env, seed=args.seed, device="cpu", verbose=0)
    start, evals, final = time.time(), [], {}

    def write_summary(status: str, frames: int) -> None:
        wall = time.time() - start
        summary = {"game": args.game, "algo": "sb3_a2c", "threads": 1, "seed": args.seed, "status": status,
                   "frames": frames, "wall_seconds": round(wall, 2),
                   "frames_per_second": round(frames / max(wall, 1e-9), 1),
                   "final_eval": final or None,
                   "best_eval_return": max((e["mean_return"] for e in evals if not e["final"]), default=None),
                   "evaluator_device": "cpu", "evals": evals}
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))

    def evaluate(frames: int, episodes: int, last: bool = False) -> None:
        t0 = time.time()
        if not args.atari:
            eval_env.obs_rms = env.obs_rms.copy()
        returns, _ = evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=not args.atari,
                                     return_episode_rewards=True)
        evals.append({"frames": frames, "wall_seconds": round(t0 - start, 2), "mean_return": float(np.mean(returns)),
                      "std_return": float(np.std(returns)), "episodes": len(returns), "final": last})
        if last:
            final.update({k: evals[-1][k] for k in ("frames", "mean_return", "std_return", "episodes")},
                         returns=[float(r) for r in returns])
        print(f"{frames:,} frames, {t0 - start:.0f}s: {'final ' if last else ''}eval mean "
              f"{evals[-1]['mean_return']:g} ± {evals[-1]['std_return']:.1f} over {len(returns)} games", flush=True)
        write_summary("running", frames)

    class Every(BaseCallback):
        def __init__(self):
            super().__init__()
            self.next = args.eval_every

        def _on_step(self) -> bool:
            frames = self.num_timesteps * skip
            if frames >= self.next and frames < args.frames:  # the last frames get the final evaluation
                evaluate(frames, args.eval_episodes)
                self.next = (frames // args.eval_every + 1) * args.eval_every
            return True

    # a background job of a script starts with SIGINT ignored: Ctrl-C, `kill -INT` and the suite's pause must
    # still stop the run with its summary and model written
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)
    status, rc = "finished", 0
    try:
        model.learn(total_timesteps=args.frames // skip, callback=Every())
        evaluate(model.num_timesteps * skip, args.final_eval_episodes, last=True)
    except KeyboardInterrupt:
        status, rc = "interrupted (SIGINT)", 130
    except Terminated:
        status, rc = "terminated (SIGTERM)", 143
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what was trained is written whatever comes next
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    frames = model.num_timesteps * skip
    write_summary(status, frames)
    model.save(run_dir / "model.zip")
    if not args.atari:
        env.save(str(run_dir / "vecnormalize.pkl"))  # the observation statistics the model acts through
    said = (f"final eval {final['mean_return']:g} ± {final['std_return']:.1f} over {final['episodes']} games"
            if final else "no final evaluation")
    print(f"{status}: {frames} frames in {time.time() - start:.0f}s, {said}, run dir {run_dir}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
