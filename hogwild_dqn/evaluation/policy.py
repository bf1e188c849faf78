"""The evaluation policy: used by the evaluator, the cluster's evaluator, `play`, and by anyone who loads a trained
agent with `load_policy(run_dir)`. Playing whole games with it is games.py's."""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import torch

from hogwild_dqn.acting import act_many
from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.checkpoint import read_checkpoint
from hogwild_dqn.config import Config, ConfigError, first_line, saved_values
from hogwild_dqn.distributions import gaussian, most_likely, sample
from hogwild_dqn.envs import action_count
from hogwild_dqn.networks import is_recurrent, network_for

EVAL_SEED_OFFSET = 10_000  # evaluation games never share seeds with the workers'


class Policy:
    """Acts as the evaluator does: A3C samples its policy (softmax or Gaussian), or with `deterministic` takes
    its most likely action (the Gaussian's mean); the Q methods are epsilon-greedy (eval_epsilon). With --net
    lstm it carries the network's state from step to step of a game: call `reset()` when a new game starts
    (play_games does)."""

    def __init__(self, net: torch.nn.Module, cfg: Config, device: torch.device | str = "cpu", seed: int = 0,
                 deterministic: bool | None = None):
        """`deterministic`: None takes the run's --deterministic-eval."""
        self.cfg, self.device = cfg, torch.device(device)
        self.deterministic = cfg.deterministic_eval if deterministic is None else deterministic
        self.net = net.to(self.device).eval()
        self.actor_critic = ALGORITHMS[cfg.algo].actor_critic
        self.recurrent = is_recurrent(self.net)
        self.seed(seed)
        self.reset()
        self.source, self.frames, self.best_eval_return = None, 0, -math.inf  # set by load_policy
        self.spec = None  # load_policy: the checkpoint's observation shape and action count

    def reset(self, rows: int = 1) -> None:
        """New games on `rows` rows (play_games plays several side by side): the recurrent state (if any) starts
        from zeros."""
        self.state = tuple(t.to(self.device) for t in self.net.initial_state(rows)) if self.recurrent else None

    def reset_row(self, row: int) -> None:
        """A new game on one row: its recurrent state (if any) starts from zeros, the other rows' stay."""
        for t in self.state or ():
            t[row] = 0

    def seed(self, seed: int) -> None:
        """Seed the policy's own draws (exploration, sampling); the global RNGs are left alone."""
        self.rng = np.random.default_rng(seed)

    def act(self, observation):
        """The action for one observation, as the env returns it: an int, or for continuous actions a float
        vector drawn from the Gaussian policy (unclipped: the env from make_env clips it to its bounds). The
        choice itself is acting.py's, as in training."""
        return self.act_rows([observation], [0])[0]

    def act_rows(self, observations: list, rows: list[int]) -> list:
        """One action (as `act` gives it) for each of several games' observations, in one forward; `rows`: the
        games' rows of the recurrent state (see reset)."""
        obs = torch.as_tensor(np.stack([np.asarray(o) for o in observations]), device=self.device)
        if self.spec is not None and tuple(obs.shape[1:]) != self.spec.obs_shape:  # a caller's env of another game
            raise ConfigError(f"an observation of shape {tuple(obs.shape[1:])}; {self.cfg.game}'s network takes "
                              f"{self.spec.obs_shape} (the env make_env(policy.cfg, ...) builds)")
        if not self.actor_critic:
            return [int(a) for a in act_many(self.net, obs, self.cfg.eval_epsilon, False, self.rng)]
        with torch.inference_mode():
            if self.recurrent:
                index = torch.as_tensor(rows, device=self.device)
                *out, state = self.net(obs, tuple(t[index] for t in self.state))
                for t, new in zip(self.state, state, strict=True):
                    t[index] = new
            else:
                out = self.net(obs)
        policy = out[0].float().cpu()
        actions = most_likely(policy) if self.deterministic else sample(policy, self.rng)
        return list(actions) if gaussian(policy) is not None else [int(a) for a in actions]


def policy_file(run_dir: Path, best: bool = False) -> Path:
    """checkpoint.pt of a run, its last weights (the run's score is theirs); with `best`, best.pt, the weights of
    its best periodic evaluation (the maximum of noisy few-game evaluations: selection-biased). A one-line
    ConfigError when the dir has no such file."""
    if not isinstance(run_dir, (str, os.PathLike)):
        raise ConfigError(f"a run dir is a path, got {run_dir!r:.60}")
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ConfigError(f"run dir {run_dir} {'is not a directory' if run_dir.exists() else 'does not exist'}")
    name = "best.pt" if best else "checkpoint.pt"
    if (run_dir / name).is_file():
        return run_dir / name
    raise ConfigError(f"{run_dir} holds no {name}; is it a hogwild_dqn run dir?"
                      + ("" if best or not (run_dir / "best.pt").is_file() else " (it has best.pt: --best plays it)"))


def _shown(v) -> str:
    """A number as its flag would have it, anything else as Python writes it."""
    return str(v) if isinstance(v, (int, float, np.number)) and not isinstance(v, bool) else repr(v)


def check_arguments(device="cpu", seed: int | None = 0, epsilon: float | None = None, best: bool = False,
                    last: bool | None = None, deterministic: bool | None = None) -> None:
    """load_policy's and play's arguments, with the flags' names: a ConfigError of one line for a bad one."""
    for name, v in (("best", best), ("last", last), ("deterministic", deterministic)):
        if not (isinstance(v, bool) or (name != "best" and v is None)):
            raise ConfigError(f"--{name} is true or false, got {v!r}")
    if best and last:
        raise ConfigError("--best and --last name two different files; choose one")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise ConfigError(f"--seed must be an integer >= 0, got {_shown(seed)}")
    if epsilon is not None and (isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.number))
                                or not 0 <= epsilon <= 1):
        raise ConfigError(f"--epsilon must be in [0, 1], got {_shown(epsilon)}")
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        raise ConfigError(f"--device must be cpu or cuda, got {device!r}") from None
    if kind not in ("cpu", "cuda"):
        raise ConfigError(f"--device must be cpu or cuda, got {device!r}")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"--device {device}: no CUDA device is available here")


def load_policy(run_dir: str | Path, device: str = "cpu", seed: int = 0, deterministic: bool | None = None,
                best: bool = False, epsilon: float | None = None, last: bool | None = None) -> Policy:
    """The trained agent of a run dir: its last weights (checkpoint.pt, which its score is about), or with
    `best` those of its best periodic evaluation (best.pt, a curve's maximum: selection-biased), ready for
    `policy.act(observation)` on the env that `make_env(policy.cfg, seed, for_eval=True)` builds. The file used
    and its frames: policy.source, policy.frames, policy.best_eval_return. `deterministic` (A3C): take the most
    likely action (the Gaussian's mean) rather than sample; None: the Gaussian's mean for continuous actions,
    else as the run evaluated (--deterministic-eval). `epsilon` (Q methods): the random-action probability in
    place of the run's --eval-epsilon. `last`: the default now, kept for earlier callers (last=False: best).
    Raises ConfigError, one line, for a bad argument, a missing file, or a checkpoint that is not one of a run."""
    check_arguments(device, seed, epsilon, best, last, deterministic)
    best = best or last is False
    path = policy_file(run_dir, best)
    ckpt = read_checkpoint(path)
    saved = ckpt.get("config")
    if not isinstance(saved, dict) or "obs_shape" not in ckpt or "n_actions" not in ckpt:
        raise ConfigError(f"checkpoint {path} is not a hogwild_dqn checkpoint (no config or env shapes)")
    if saved.get("algo") not in ALGORITHMS:
        raise ConfigError(f"checkpoint {path} is of the algorithm {saved.get('algo')!r:.40}, which this version "
                          f"does not have ({', '.join(ALGORITHMS)})")
    kind = ALGORITHMS[saved["algo"]]
    values = saved_values(saved, f"checkpoint {path} is damaged: its config's")
    try:  # a checkpoint edited by hand, or of a version with other values, is one line, not a traceback
        cfg = dataclasses.replace(Config(), **values)
        spec = SimpleNamespace(obs_shape=tuple(int(n) for n in ckpt["obs_shape"]), n_actions=int(ckpt["n_actions"]),
                               continuous=bool(ckpt.get("continuous", False)))
        frames, best_return = int(ckpt["frames"]), float(ckpt.get("best_eval_return", -math.inf))
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"checkpoint {path} is not a hogwild_dqn checkpoint ({first_line(e)[:160]})") from None
    if epsilon is not None:
        if kind.actor_critic:
            raise ConfigError(f"--epsilon is for the Q methods; {run_dir} is a {cfg.algo} run (A3C samples its "
                              "policy, or takes its most likely action with --deterministic)")
        cfg = dataclasses.replace(cfg, eval_epsilon=epsilon)
    try:
        net = network_for(cfg, spec)
        net.load_state_dict(ckpt["model"])
    except (RuntimeError, KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"checkpoint {path}: its weights and values do not build its network here "
                          f"({first_line(e)[:120]})") from None
    if deterministic is None and spec.continuous:  # a trained controller is judged by its mean action
        deterministic = True
    policy = Policy(net, cfg, device, seed, deterministic)
    policy.source, policy.frames, policy.best_eval_return = path, frames, best_return
    policy.spec = spec
    return policy


def check_fits(policy: Policy, env) -> None:
    """That `env` (make_env of policy.cfg) has the observations and actions the checkpoint's network was built
    for: a checkpoint whose game was edited to another one is a ConfigError line, not a matrix-shape traceback."""
    continuous = isinstance(env.action_space, gym.spaces.Box)
    env_shapes = (tuple(env.observation_space.shape or ()), action_count(env.action_space), continuous)
    net_shapes = (policy.spec.obs_shape, policy.spec.n_actions, policy.spec.continuous)
    if env_shapes != net_shapes:
        def kind(shapes):
            return f"{shapes[1]} {'continuous' if shapes[2] else 'discrete'} actions"

        raise ConfigError(f"checkpoint {policy.source} does not fit {policy.cfg.game}: its network takes observations "
                          f"of shape {net_shapes[0]} and {kind(net_shapes)}, the game has {env_shapes[0]} and "
                          f"{kind(env_shapes)}")
