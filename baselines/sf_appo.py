"""The peer: Sample Factory's APPO (a fast public asynchronous PPO) on an Atari game with its own Atari
defaults, measured as our runs are. It runs in a venv of its own (Sample Factory pins gymnasium 0.29 and
ale-py 0.9, which ours does not use):

    make install-sf                                  (.venv-sf from requirements-sf.txt)
    .venv-sf/bin/python baselines/sf_appo.py --game Breakout --seed 1 --seconds 3600 --run-dir runs/peer/sf-breakout

Training is Sample Factory's own Atari entry point (`sf_examples.atari.train_atari`'s main, run through this
file so that its spawned processes import ale-py) with nothing changed but the experiment's place, the seed,
the device (cpu) and the budget: `--train_for_env_steps` (--frames, 10M; Sample Factory counts them with the
frame skip, as our --frames counts emulator frames) and --seconds, the wall budget of ours beside it (kept
here: Sample Factory 2.1.1's own `--train_for_seconds` never fires; at the budget its processes get SIGINT, its
learner saves a checkpoint, and summary.json says "stopped_by": "seconds"). Its Atari defaults
(sf_examples/atari/atari_params.py): 8 rollout workers x 1 env, rollouts of 128 steps, batches of 256, 4 epochs
x 4 batches, clip 0.1, Adam 2.5e-4 linearly decayed (eps 1e-5), GAE 0.95, normalized inputs and returns; its
env: NoFrameskip-v4 (no sticky actions), up to 30 no-op starts, frame skip 4 with max-pooling, life-loss
terminals, FIRE reset, clipped rewards, 84x84 grey, 4 stacked frames.

Then its last weights (the newest checkpoint) play --episodes (30) whole games as our final evaluation plays
them: the policy sampled, raw scores (RecordEpisodeStatistics of the unclipped game), every life of a game in
one episode (a lost life presses FIRE and goes on, as in training), a game cut at 108,000 frames. The run dir
gets summary.json in our format (game, seed, frames, wall_seconds, frames_per_second, final_eval) beside
Sample Factory's own experiment dir (its tensorboard files and checkpoints).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# ale-py 0.9 registers its envs (BreakoutNoFrameskip-v4, ...) with gymnasium 0.29 when imported, and Sample
# Factory's processes are spawned: each one imports this file again, so the import stands at its top.
import ale_py  # noqa: F401

EXPERIMENT = "sf"
SF_TRAIN = "sf-train"  # first argument of the training child: Sample Factory's own Atari entry point
STOP_GRACE_SECONDS = 120  # time for its learner to save a checkpoint at the wall budget (5 s seen)


def train(args: argparse.Namespace) -> tuple[int, float, str]:
    """Sample Factory's own Atari training, in a child process; returns its exit status, its wall seconds and which
    budget ended it ("frames" or "seconds")."""
    cmd = [sys.executable, __file__, SF_TRAIN, f"--env=atari_{args.game.lower()}",
           f"--experiment={EXPERIMENT}", f"--train_dir={args.run_dir}", f"--seed={args.seed}", "--device=cpu",
           f"--train_for_env_steps={args.frames}", f"--train_for_seconds={args.seconds}"]
    print(" ".join(cmd), flush=True)
    start = time.monotonic()
    # A session of its own, so that the stop below reaches all of Sample Factory's processes and nothing else.
    child = subprocess.Popen(cmd, start_new_session=True)
    try:
        child.wait(timeout=args.seconds)
        return child.returncode, time.monotonic() - start, "frames"
    except subprocess.TimeoutExpired:
        # Sample Factory 2.1.1 never advances the clock its --train_for_seconds reads (Runner.total_train_seconds
        # stays 0), so the wall budget is kept here. On SIGINT its learner saves a checkpoint and every process
        # ends, as after a Ctrl-C.
        stop(child)
        return 0, time.monotonic() - start, "seconds"
    except BaseException:  # Ctrl-C (the child, in its own session, did not get it) or an error here
        stop(child)
        raise


def stop(child: subprocess.Popen) -> None:
    """SIGINT to the child's session, then, after STOP_GRACE_SECONDS, SIGKILL."""
    for sig, grace in ((signal.SIGINT, STOP_GRACE_SECONDS), (signal.SIGKILL, None)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            pass


def evaluate(args: argparse.Namespace) -> tuple[dict, int]:
    """The newest checkpoint over --episodes whole games; returns the final evaluation and its frames."""
    import numpy as np
    import torch
    from sample_factory.algo.learning.learner import Learner
    from sample_factory.algo.sampling.batched_sampling import preprocess_actions
    from sample_factory.algo.utils.env_info import extract_env_info
    from sample_factory.algo.utils.make_env import make_env_func_batched
    from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs
    from sample_factory.cfg.arguments import load_from_checkpoint
    from sample_factory.model.actor_critic import create_actor_critic
    from sample_factory.model.model_utils import get_rnn_size
    from sample_factory.utils.attr_dict import AttrDict
    from sf_examples.atari.train_atari import parse_atari_args, register_atari_components

    register_atari_components()
    cfg = parse_atari_args([f"--env=atari_{args.game.lower()}", f"--experiment={EXPERIMENT}",
                            f"--train_dir={args.run_dir}", "--device=cpu", "--no_render"], evaluation=True)
    cfg = load_from_checkpoint(cfg)
    cfg.num_envs = 1
    torch.manual_seed(args.seed + 10_000)
    np.random.seed(args.seed + 10_000)
    env = make_env_func_batched(cfg, env_config=AttrDict(worker_index=0, vector_index=0, env_id=0))
    env_info = extract_env_info(env, cfg)
    model = create_actor_critic(cfg, env.observation_space, env.action_space)
    model.eval()
    checkpoints = Learner.get_checkpoints(Learner.checkpoint_dir(cfg, 0), "checkpoint_*")
    if not checkpoints:
        raise SystemExit(f"baselines/sf_appo.py: error: no checkpoint under {args.run_dir / EXPERIMENT}")
    # Not Learner.load_checkpoint: its torch.load reads weights only (torch 2.6's default), and once a run has
    # scored its first best, Sample Factory writes that score as a numpy scalar into every checkpoint.
    state = torch.load(checkpoints[-1], map_location="cpu", weights_only=False)
    model.load_state_dict(state["model"])
    frames_per_step = cfg.env_frameskip
    returns, lengths = [], []
    obs, _ = env.reset()
    rnn = torch.zeros([1, get_rnn_size(cfg)])
    with torch.no_grad():
        while len(returns) < args.episodes:
            game_return, steps = None, 0
            while game_return is None:
                out = model(prepare_and_normalize_obs(model, obs), rnn)
                actions = out["actions"]
                actions = preprocess_actions(env_info, actions.unsqueeze(-1) if actions.ndim == 1 else actions)
                rnn = out["new_rnn_states"]
                obs, reward, terminated, truncated, infos = env.step(actions)
                steps += 1
                info = infos[0] if isinstance(infos, (list, tuple)) else infos
                if "episode" in info:  # the whole game's unclipped return and frames (RecordEpisodeStatistics)
                    game_return = float(np.asarray(info["episode"]["r"]).reshape(-1)[0])
                    lengths.append(int(np.asarray(info["episode"]["l"]).reshape(-1)[0]))
                elif steps * frames_per_step >= args.max_episode_frames:  # our cap: the game so far is its score
                    game_return = float(np.asarray(wrapper(env, "episode_returns").episode_returns).reshape(-1)[0])
                    lengths.append(steps * frames_per_step)
                    wrapper(env, "was_real_done").was_real_done = True  # a new game, not the next life
                    obs, _ = env.reset()
            returns.append(game_return)
            print(f"game {len(returns)}: {game_return:g}", flush=True)
    r = np.array(returns)
    return ({"frames": int(state["env_steps"]), "mean_return": float(r.mean()), "std_return": float(r.std()),
             "episodes": len(r), "returns": returns, "lengths": lengths}, int(state["env_steps"]))


def wrapper(env, attribute: str):
    """The wrapper in env's chain that holds `attribute` (Sample Factory's batched env over one gymnasium env)."""
    inner = env
    while attribute not in vars(inner):  # not hasattr: gymnasium 0.29's wrappers forward unknown names inward
        inner = inner.env if "env" in vars(inner) else inner.envs[0]
    return inner


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit 2, as ours, without the usage dump
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [SF_TRAIN]:
        from sf_examples.atari.train_atari import main as sf_main

        sys.argv = [sys.argv[0], *argv[1:]]
        return sf_main()
    p = Parser(prog="baselines/sf_appo.py", description=__doc__.splitlines()[0])
    p.add_argument("--game", required=True, help="an ALE game as ours names it: Breakout, Qbert, ...")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--frames", type=int, default=10_000_000, help="emulator frames (with the frame skip)")
    p.add_argument("--seconds", type=int, default=3600, help="wall budget of the training")
    p.add_argument("--episodes", type=int, default=30, help="games of the final evaluation")
    p.add_argument("--max-episode-frames", type=int, default=108_000,
                   help="a game is cut here and scored as it stands (our protocol's cap, configs/atari.yaml)")
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--eval-only", action="store_true", help="evaluate the run dir's newest checkpoint; no training")
    args = p.parse_args(argv)
    from sf_examples.atari.atari_utils import ATARI_ENVS

    if f"atari_{args.game.lower()}" not in {spec.name for spec in ATARI_ENVS}:
        p.error(f"--game {args.game!r}: not one of Sample Factory's Atari games (Breakout, Qbert, ...)")
    if min(args.frames, args.seconds, args.episodes, args.max_episode_frames) < 1:
        p.error("--frames, --seconds, --episodes and --max-episode-frames must be positive")
    if args.eval_only and not (args.run_dir / EXPERIMENT / "config.json").is_file():
        p.error(f"--eval-only: no Sample Factory experiment in {args.run_dir} (its {EXPERIMENT}/config.json)")
    args.run_dir.mkdir(parents=True, exist_ok=True)
    summary_path = args.run_dir / "summary.json"
    summary = {"game": args.game, "algo": "sf_appo", "seed": args.seed}
    if args.eval_only and summary_path.exists():  # a new training starts its summary afresh
        summary.update(json.loads(summary_path.read_text()))
    if not args.eval_only:
        try:
            rc, wall, stopped_by = train(args)
        except KeyboardInterrupt:
            print("sf_appo: stopped; Sample Factory's checkpoints stay in the run dir (--eval-only scores the "
                  "newest)", file=sys.stderr)
            return 130
        if rc != 0:
            print(f"sf_appo: Sample Factory's training exited with {rc}", file=sys.stderr)
            return 1
        summary.update({"threads": 8, "wall_seconds": wall, "budget": {"frames": args.frames, "seconds": args.seconds},
                        "stopped_by": stopped_by})
    final, frames = evaluate(args)
    summary.update({"frames": frames, "final_eval": final, "status": "finished"})
    if summary.get("wall_seconds"):
        summary["frames_per_second"] = frames / summary["wall_seconds"]
    summary_path.write_text(json.dumps(summary, indent=1))
    print(f"sf_appo: {args.game} seed {args.seed}: {frames:,} frames in {summary.get('wall_seconds', 0):.0f} s, "
          f"final {final['mean_return']:.1f} ± {final['std_return']:.1f} over {final['episodes']} games")
    return 0


if __name__ == "__main__":
    sys.exit(main())
