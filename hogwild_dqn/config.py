"""One config: dataclass defaults < configs/*.yaml preset < command line. All checks live in validate()."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

import yaml

from hogwild_dqn.algorithms import ALGORITHMS, unable
from hogwild_dqn.files import atomic_bytes

# The presets: a checkout's configs/ (where users read and copy them); an installed package carries a copy.
_PACKAGED = files("hogwild_dqn") / "configs"
CONFIG_DIR = Path(str(_PACKAGED)) if _PACKAGED.is_dir() else Path(__file__).resolve().parent.parent / "configs"
OPTIMIZERS = ("rmsprop", "adam", "radam")
INITS = ("torch", "orthogonal")
# Atari torsos' convolutions (networks.AtariTorso), (filters, kernel, stride) each: the A3C paper's, and the DQN
# Nature paper's that PPO's Atari runs use (baselines' nature_cnn, CleanRL, Sample Factory's convnet_atari).
CONVOLUTIONS = {"paper": ((16, 8, 4), (32, 4, 2)), "nature": ((32, 8, 4), (64, 4, 2), (64, 3, 1))}
ALE_SCREEN = (210, 160)  # the emulator's screen, height x width
NETS = tuple(dict.fromkeys(n for a in ALGORITHMS.values() for n in a.networks))  # ff, lstm: the table's


def smallest_screen(torso: str) -> int:
    """The least --screen-size the torso's unpadded convolutions leave a pixel of (each layer needs
    (out - 1) x stride + kernel in)."""
    size = 1
    for _, kernel, stride in reversed(CONVOLUTIONS[torso]):
        size = (size - 1) * stride + kernel
    return size


class ConfigError(ValueError):
    """A bad user input; its message is printed as one line and the process exits 2."""


def first_line(e: Exception) -> str:
    """An exception's message in one line (its type's name when it has none), for a ConfigError naming it."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _f(default, doc: str, kind: type | None = None):
    """A dataclass field with its documentation (shown in --help) and its value type."""
    meta = {"doc": doc, "type": kind or type(default)}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class Config:
    # what to train
    game: str = _f("Pong", "ALE game name (Pong, Breakout, ...) or any gymnasium id (CartPole-v1)")
    algo: str = _f("a3c", "; ".join(f"{k}: {a.summary}" for k, a in ALGORITHMS.items()))
    threads: int | None = _f(None, "worker processes; empty (null) means one per CPU core", int)
    frames: int = _f(10_000_000, "total environment frames, all workers together")
    seed: int = _f(1, "base seed: every worker's and game's random stream is spawned from it (numpy SeedSequence)")
    # where results go
    logdir: str = _f("runs", "log root under which the run dir is created")
    run_dir: str = _f("", "run directory; empty means <logdir>/<game>-<algo>-t<threads>-s<seed>-<timestamp>")
    # network
    net: str = _f("ff", "ff: the paper's feed-forward network; lstm: 256 LSTM cells after the torso, whose state "
                        "each game carries across steps (a3c only; the paper's A3C LSTM)")
    lstm_norm: bool = _f(False, "--net lstm: the torso's features layer-normalized (over the units, no "
                                "parameters) before the cells, so that a constant growing in them cannot saturate "
                                "the gates and cut the torso's gradient (docs/notebook/a3c-lstm.md)")
    lstm_norm_eps: float = _f(1e-5, "--lstm-norm: added to the features' variance before dividing; a larger one "
                                    "stops amplifying features with a standard deviation below its square root, "
                                    "so that they cannot shrink into an ever larger effective step")
    hidden: int = _f(256, "width of the fully connected layer(s)")
    torso: str = _f("paper", "Atari frames' convolutions: paper (the A3C paper's: 16 8x8 stride 4, 32 4x4 stride 2) "
                             "or nature (DQN's Nature network, which PPO's Atari runs use: 32 8x8/4, 64 4x4/2, "
                             "64 3x3/1; with --hidden 512)")
    init: str = _f("torch", "initial weights: torch (PyTorch's layer defaults) or orthogonal (PPO's "
                            "implementations': orthogonal, gain sqrt(2), the policy's output 0.01, the value's 1)")
    mlp_layers: int = _f(2, "hidden layers of the MLP torso used for vector observations")
    obs_standardize: bool = _f(False, "Atari: the network sees each observation at mean 0, std 1 rather than "
                                      "pixels/255 (keeps conv1 alive under Adam; docs/notebook/atari-preset.md)")
    obs_normalize: bool = _f(False, "the network sees observations (vectors, or Atari frames pixel by pixel) "
                                    "standardized by the running mean and variance of all workers' observations "
                                    "(kept in the model; not with a replay algorithm)")
    # optimisation (paper defaults: shared RMSProp, alpha 0.99, eps 0.1, lr 7e-4 annealed to 0)
    optimizer: str = _f("rmsprop", "shared optimizer: rmsprop (one shared g, as in the paper), adam, or radam (Adam "
                                   "whose step is rectified while its second moment rests on few updates: PQN's)")
    lr: float = _f(7e-4, "initial learning rate")
    lr_anneal: bool = _f(True, "anneal the learning rate linearly to 0 over --frames")
    rms_alpha: float = _f(0.99, "RMSProp decay of the shared squared-gradient average")
    rms_eps: float = _f(0.1, "RMSProp epsilon (inside the square root, as in the paper)")
    adam_betas: list = _f([0.9, 0.999], "Adam betas")
    adam_eps: float = _f(1e-8, "Adam epsilon")
    grad_clip: float = _f(40.0, "global gradient-norm clip before the shared step; 0 disables")
    gamma: float = _f(0.99, "discount")
    t_max: int = _f(5, "steps a worker accumulates before pushing gradients (I_AsyncUpdate / t_max)")
    envs_per_worker: int = _f(1, "games each worker plays side by side (batched forwards); its update is the mean "
                                 "of their t_max-step losses. 1: the paper's one game per actor-learner")
    # a3c
    entropy_beta: float = _f(0.01, "A3C entropy bonus")
    policy_std_max: float = _f(0.0, "continuous actions: the Gaussian's standard deviation is at most this (its "
                                    "variance a sigmoid of the head's output times its square); 0: unbounded "
                                    "(a softplus, the paper's)")
    policy_std_init: float = _f(0.0, "continuous actions: the Gaussian's standard deviation is one learned "
                                     "parameter per action component, the same in every state, starting at this "
                                     "(SB3's and PPO's Gaussian); 0: the head's output (the paper's)")
    value_coef: float = _f(0.5, "A3C and PPO value-loss weight")
    gae_lambda: float = _f(1.0, "a3c and ppo: lambda of the generalized advantage estimates (1: the n-step "
                                "advantage, the paper's A3C; 0.95: PPO's)")
    # rollouts with minibatches, ppo and pqn (a rollout: --t-max steps of each of the worker's --envs-per-worker games)
    epochs: int = _f(4, "ppo and pqn: passes over each rollout")
    minibatches: int = _f(4, "ppo and pqn: minibatches per pass, each one gradient step into the shared model")
    # ppo
    ppo_clip: float = _f(0.1, "ppo: the probability ratio's clip range (1 - clip, 1 + clip); also the value's "
                              "with --value-clip")
    value_clip: bool = _f(True, "ppo: clip the value's change from the behaviour weights' (PPO2's value loss)")
    value_normalize: bool = _f(False, "ppo: the value head learns returns standardized by the running mean and "
                                      "deviation of all workers' returns (Sample Factory's normalize_returns)")
    # value-based methods
    q_lambda: float = _f(0.95, "pqn: lambda of the Q(lambda) targets (0: one-step Q-learning's; 1: the rollout's "
                               "discounted returns, bootstrapped from max Q where it is cut)")
    layer_norm: bool = _f(False, "Q methods: LayerNorm after each hidden layer of the network (over each "
                                 "convolution's whole output, per-channel scale and shift; over the features of "
                                 "each fully connected layer), which PQN needs without a target network")
    target_update: int = _f(40_000, "global frames between target-network copies")
    eps_start: float = _f(1.0, "initial exploration epsilon")
    eps_finals: list = _f([0.1, 0.01, 0.5], "final epsilons a worker draws from")
    eps_probs: list = _f([0.4, 0.3, 0.3], "probabilities of eps_finals")
    eps_anneal_frames: int = _f(4_000_000, "global frames over which epsilon anneals")
    # replay methods (dqn)
    replay_size: int = _f(100_000, "dqn: transitions each worker's replay memory holds (Atari: about 7 KB each, "
                                   "frames stored once as uint8)")
    learning_starts: int = _f(50_000, "dqn: frames of play before learning starts, counted in each worker's own "
                                      "memory (its share: this / --threads), so a resumed or restarted worker "
                                      "refills its empty memory first")
    batch_size: int = _f(32, "dqn: transitions per minibatch")
    train_every: int = _f(4, "dqn: a worker learns from one minibatch every this many of its agent steps")
    double: bool = _f(False, "dqn: Double DQN targets (the online network picks the action, the target rates it)")
    n_step: int = _f(1, "dqn: steps folded into each replayed return (never across an episode's end)")
    replay: bool = _f(True, "dqn: sample minibatches from the replay memory; --no-replay learns from the newest "
                            "--batch-size transitions only (the ablation)")
    target: bool = _f(True, "dqn: bootstrap from the target network; --no-target from the online one (ablation)")
    # evaluation
    eval_every: int = _f(250_000, "global frames between evaluations")
    eval_episodes: int = _f(5, "episodes per evaluation")
    eval_envs: int = _f(16, "evaluation games played side by side, one forward a step for all of them (a batch-1 "
                            "forward costs more than the emulator's step); 1 plays them one at a time")
    eval_epsilon: float = _f(0.05, "epsilon of evaluation for Q methods (A3C samples its policy)")
    final_eval_episodes: int = _f(30, "whole games the last weights play when a run ends: the run's score "
                                      "(summary.json final_eval), where periodic evaluations are curve points")
    final_eval_seconds: int = _f(1800, "the final evaluation may take this long, then is cut: the run ends "
                                       "unscored (exit 4), and --resume plays it")
    deterministic_eval: bool = _f(False, "A3C evaluation and play take the policy's most likely action (the "
                                         "mean of a Gaussian) rather than sampling it")
    stop_return: float | None = _f(None, "stop the run once a periodic evaluation's mean return reaches this "
                                         "(Pong: 18) and the same weights confirm it over --final-eval-episodes "
                                         "games (else training goes on); empty (null): train all --frames", float)
    video_steps: int = _f(500, "at each new best, record this many agent steps of one game as a GIF; 0: none")
    # environment
    frame_skip: int = _f(4, "Atari: frames per agent step (max-pool of the last two)")
    frame_stack: int = _f(4, "Atari: stacked frames")
    screen_size: int = _f(84, "Atari: observation width and height")
    noop_max: int = _f(30, "Atari: up to this many no-ops at reset")
    sticky_actions: float = _f(0.0, "Atari: the probability that the emulator repeats the previous action instead "
                                    "of the chosen one, each frame (ALE's repeat_action_probability; 0: the A3C "
                                    "paper's protocol; 0.25: Machado et al. 2018, the ALE v5 default)")
    fire_reset: bool = _f(True, "Atari: press FIRE at a game's start and after a lost life, in games whose "
                                "actions include it (training and evaluation; SB3's FireResetEnv)")
    max_episode_frames: int = _f(108_000, "Atari: frames after which an episode is truncated")
    clip_rewards: bool = _f(True, "Atari, training only: clip rewards to [-1, 1]")
    reward_scale: float = _f(1.0, "training only: rewards are multiplied by this (after Atari's clipping)")
    reward_normalize: bool = _f(False, "vector tasks, training only: each game's rewards divided by a running "
                                       "estimate of its discounted return's deviation (gymnasium's NormalizeReward, "
                                       "as SB3's VecNormalize), before --reward-scale")
    life_loss_terminal: bool = _f(True, "Atari, training only: a lost life is a terminal for the return maths")
    # several machines (Ray; docs/cluster.md)
    cluster: str = _f("", "Ray cluster to train on: auto, or the head's host:port; empty: this machine only, "
                          "Ray is not imported")
    sync_seconds: float = _f(1.0, "cluster: seconds between a machine's exchanges with the parameter holder")
    # faults
    max_restarts: int = _f(3, "crashed, killed or hung workers are restarted this many times in all; then the run "
                              "stops")
    hang_seconds: float = _f(120.0, "a child (worker or evaluator) that marks no progress for this long is hung: it "
                                    "is killed and restarted as a dead one is. Every step of a game or an update, "
                                    "an evaluation game's every 100 steps and a checkpoint write mark progress; "
                                    "the longest gap measured was a start-up's (docs/usage.md, faults)")
    force: bool = _f(False, "start even when the workers' expected memory (preflight.py) exceeds what the machine "
                            "has available; without it such a run is refused, saying how many workers fit")
    # console and logging
    progress: bool = _f(True, "show a console progress line")
    log_every: int = _f(50, "a worker logs losses every this many updates")

    def validate(self) -> None:
        """Check every value once; raise ConfigError with a one-line message."""
        self._check_finite()
        self._check_choices()
        self._check_numbers()
        self._check_combinations()

    def _positive(self, name: str, integer: bool, zero: bool = False) -> None:
        """`name` is a finite number above 0 (with `zero`: at least 0), an int if `integer`."""
        v = getattr(self, name)
        kind = int if integer else (int, float)
        if isinstance(v, bool) or not isinstance(v, kind) or not ((0 <= v) if zero else (0 < v)) or not v < math.inf:
            what = (("an integer" if integer else "a number") + " >= 0" if zero
                    else "a positive integer" if integer else "a positive number")
            raise ConfigError(f"--{_flag(name)} must be {what}, got {v!r}")

    def _check_finite(self) -> None:
        """Every number of a float setting (and of a list of them) is finite: nan and inf are refused alike."""
        for name in FIELDS:
            v = getattr(self, name)
            for x in v if isinstance(v, list) else [v]:
                if isinstance(x, float) and not math.isfinite(x):
                    raise ConfigError(f"--{_flag(name)} must be a finite number, got {x!r}")

    def _check_choices(self) -> None:
        """The named choices: algorithm, network, torso, initialization, optimizer, cluster address."""
        if self.algo not in ALGORITHMS:
            raise ConfigError(f"--algo {self.algo!r} is unknown; choose one of {', '.join(ALGORITHMS)}")
        if self.net not in NETS:
            raise ConfigError(f"--net {self.net!r} is unknown; choose one of {', '.join(NETS)}")
        if self.net not in ALGORITHMS[self.algo].networks:
            able = [k for k, a in ALGORITHMS.items() if self.net in a.networks]
            raise ConfigError(f"--net {self.net} needs {' or '.join(able)}; --algo {self.algo} trains "
                              f"{', '.join(ALGORITHMS[self.algo].networks)} networks only")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"--optimizer {self.optimizer!r} is unknown; choose one of {', '.join(OPTIMIZERS)}")
        if self.torso not in CONVOLUTIONS:
            raise ConfigError(f"--torso {self.torso!r} is unknown; choose one of {', '.join(CONVOLUTIONS)}")
        if self.init not in INITS:
            raise ConfigError(f"--init {self.init!r} is unknown; choose one of {', '.join(INITS)}")
        if self.cluster and self.cluster != "auto" and not re.fullmatch(r"[\w.\-]+:\d{1,5}|\[[0-9a-fA-F:]+\]:\d{1,5}",
                                                                      self.cluster):
            raise ConfigError(f"--cluster must be auto or the Ray head's host:port, got {self.cluster!r}")
        if self.cluster and self.cluster != "auto" and not 1 <= int(self.cluster.rsplit(":", 1)[1]) <= 65535:
            raise ConfigError(f"--cluster's port must be 1-65535, got {self.cluster!r}")

    def _check_numbers(self) -> None:
        """Each number on its own: positive, in its range."""
        positive = self._positive
        if self.threads is not None:
            positive("threads", integer=True)
        for name in ("frames", "t_max", "envs_per_worker", "target_update", "eval_every", "eval_episodes",
                     "eval_envs", "final_eval_episodes", "final_eval_seconds", "hidden",
                     "mlp_layers", "frame_skip", "frame_stack", "screen_size", "max_episode_frames", "log_every",
                     "replay_size", "batch_size", "train_every", "n_step"):
            positive(name, integer=True)
        for name in ("lr", "rms_alpha", "rms_eps", "adam_eps", "gamma", "reward_scale", "sync_seconds",
                     "lstm_norm_eps"):
            positive(name, integer=False)
        positive("epochs", integer=True)
        positive("minibatches", integer=True)
        positive("ppo_clip", integer=False)
        for name in ("gae_lambda", "q_lambda"):
            v = getattr(self, name)
            if isinstance(v, bool) or not 0 <= v <= 1:
                raise ConfigError(f"--{_flag(name)} must lie in [0, 1], got {v!r}")
        if not 0 < self.gamma <= 1 or not 0 < self.rms_alpha < 1:
            raise ConfigError("--gamma must be in (0, 1] and --rms-alpha in (0, 1)")
        if isinstance(self.sticky_actions, bool) or not 0 <= self.sticky_actions < 1:
            raise ConfigError(f"--sticky-actions must be a probability in [0, 1), got {self.sticky_actions!r}")
        for name, values in (("eps_start", [self.eps_start]), ("eval_epsilon", [self.eval_epsilon]),
                             ("eps_finals", self.eps_finals)):
            if not all(0 <= e <= 1 for e in values):
                raise ConfigError(f"--{_flag(name)} must lie in [0, 1], got {getattr(self, name)!r}")
        if any(e > self.eps_start for e in self.eps_finals):
            raise ConfigError(f"--eps-finals {self.eps_finals} must not lie above --eps-start {self.eps_start}: "
                              "epsilon anneals down to them")
        if isinstance(self.max_restarts, bool) or self.max_restarts < 0:
            raise ConfigError(f"--max-restarts must be an integer >= 0, got {self.max_restarts!r}")
        positive("seed", integer=True, zero=True)  # numpy's SeedSequence takes no negative seed
        if self.seed >= 2**63:  # torch.manual_seed takes a signed 64-bit integer
            raise ConfigError(f"--seed must be below 2**63, got {self.seed}")
        if len(self.adam_betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in self.adam_betas):
            raise ConfigError(f"--adam-betas must be two numbers in [0, 1), got {self.adam_betas!r}")
        if not all(isinstance(p, (int, float)) and 0 <= p <= 1 for p in self.eps_probs):
            raise ConfigError(f"--eps-probs must be probabilities in [0, 1], got {self.eps_probs!r}")
        for name in ("noop_max", "grad_clip", "entropy_beta", "eps_anneal_frames", "video_steps", "learning_starts",
                     "policy_std_max", "policy_std_init"):
            positive(name, integer=False, zero=True)
        positive("hang_seconds", integer=False)

    def _check_combinations(self) -> None:
        """Values that must fit together."""
        if self.batch_size > self.replay_size:
            raise ConfigError(f"--batch-size {self.batch_size} is larger than --replay-size {self.replay_size}")
        if ALGORITHMS[self.algo].replay and self.envs_per_worker != 1:
            raise ConfigError(f"--algo {self.algo} plays one game per worker; --envs-per-worker must be 1")
        if ALGORITHMS[self.algo].rollouts and self.minibatches > self.t_max * self.envs_per_worker:
            raise ConfigError(f"--minibatches {self.minibatches} is more than a rollout's "
                              f"{self.t_max * self.envs_per_worker} steps (--t-max x --envs-per-worker)")
        if self.policy_std_max and self.policy_std_init:
            raise ConfigError("--policy-std-max bounds the head's state-dependent deviation, --policy-std-init "
                              "learns one that is not; choose one")
        if self.lstm_norm and self.net != "lstm":
            raise ConfigError("--lstm-norm normalizes the LSTM cells' input; it needs --net lstm")
        if self.obs_normalize and self.obs_standardize:
            raise ConfigError("--obs-normalize (running statistics of each input) and --obs-standardize (each "
                              "frame by its own mean and deviation, the Atari presets') are two ways to scale the "
                              "input; --no-obs-normalize or --no-obs-standardize turns one off")
        if self.value_normalize and not ALGORITHMS[self.algo].normalized_returns:
            raise ConfigError(f"--value-normalize is PPO's (--algo ppo); --algo {self.algo} learns raw returns")
        if self.layer_norm and ALGORITHMS[self.algo].actor_critic:
            raise ConfigError(f"--layer-norm is for the Q-networks (q1, sarsa1, nq, pqn, dqn); --algo {self.algo} "
                              "trains an actor-critic")
        if self.obs_normalize and self.cluster and ALGORITHMS[self.algo].target_network:
            raise ConfigError(f"--obs-normalize on a cluster is for a3c and ppo (--algo {self.algo}'s target network "
                              "would not get the statistics); --no-obs-normalize turns it off")
        if self.obs_normalize and ALGORITHMS[self.algo].replay:
            raise ConfigError(f"--obs-normalize is not available for --algo {self.algo} (its replay memory keeps "
                              "raw observations that the statistics would have to follow)")
        if game_kind(self.game).startswith("atari"):  # elsewhere the screen is not the input
            if self.screen_size > ALE_SCREEN[0]:
                raise ConfigError(f"--screen-size {self.screen_size} is larger than the ALE's screens "
                                  f"({ALE_SCREEN[0]}x{ALE_SCREEN[1]}): a larger one adds no detail, only memory")
            if self.screen_size < (least := smallest_screen(self.torso)):
                raise ConfigError(f"--screen-size {self.screen_size} is too small for --torso {self.torso}'s "
                                  f"convolutions; they need {least} or more")
        if self.eval_every > self.frames:
            raise ConfigError(f"--eval-every {self.eval_every} is larger than --frames {self.frames}")
        if len(self.eps_finals) != len(self.eps_probs) or abs(sum(self.eps_probs) - 1) > 1e-6:
            raise ConfigError("--eps-probs must have one probability per --eps-finals value and sum to 1")

    def resolved_threads(self) -> int:
        return self.threads or (os.cpu_count() or 1)

    def variant(self) -> str:
        return variant(self.algo, self.net, self.obs_normalize, self.value_normalize)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


FIELDS = {f.name: f for f in dataclasses.fields(Config)}


def _flag(name: str) -> str:
    return name.replace("_", "-")


def _field_type(name: str) -> type:
    return FIELDS[name].metadata["type"]


RENAMED = {"ppo_epochs": "epochs", "ppo_minibatches": "minibatches"}  # keys of older presets and run dirs
# settings of older versions that are gone, with the value that behaves as today (a run dir that set another says so)
REMOVED = {"learner_precision": "fp32", "ppo_decoupled": False}


def read_yaml(path: str | Path, _seen: tuple[Path, ...] = (), origins: dict[str, Path] | None = None) -> dict:
    """Read a preset file into a dict of known keys with the right types. A preset may start from another
    with `base: other.yaml` (a path relative to it) and give only what differs; `origins` gets the file each
    value came from."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(f"config file {path} is not valid YAML ({first_line(e)})") from None
    if data is None or data == {}:  # taken silently, it would train on the dataclass's defaults, no preset's
        raise ConfigError(f"config file {path} holds no settings (it is empty or all comments)")
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of keys to values")
    base = data.pop("base", None)
    data = _current(data, f"config file {path}")  # a run dir of an older version resumes
    for key, value in data.items():
        if key not in FIELDS:
            raise ConfigError(f"config file {path}: unknown key {key!r}")
        data[key] = _coerce(key, value, f"config file {path}: key {key!r}")
    below = {}
    if base is not None:
        if not isinstance(base, str):
            raise ConfigError(f"config file {path}: key 'base' must name a YAML file, got {base!r}")
        if path.resolve() in _seen:
            raise ConfigError(f"config file {path}: its 'base' chain comes back to itself")
        if not (path.parent / base).is_file():
            raise ConfigError(f"config file {path}: its base {path.parent / base} does not exist")
        below = read_yaml(path.parent / base, _seen + (path.resolve(),), origins)
    if origins is not None:
        origins.update(dict.fromkeys(data, path))  # after the base's: this file's values are the ones taken
    return below | data


def _current(values: dict, where: str, strict: bool = True) -> dict:
    """Settings of an older version as today's: renamed keys under their names; removed ones dropped where they held
    what today does, else (`strict`: a run to train on) one line saying so."""
    for key, same in REMOVED.items():
        if strict and key in values and values[key] != same:
            raise ConfigError(f"{where}: {key!r} is no longer a setting (the trainer runs as with {same!r}); "
                              "remove it to go on")
    for old, new in RENAMED.items():
        if old in values and new in values and values[old] != values[new]:
            raise ConfigError(f"{where}: {old!r} and {new!r} are one setting ({new!r} is its name today), with "
                              f"two values ({values[old]!r}, {values[new]!r}): keep one")
    return {RENAMED.get(k, k): v for k, v in values.items() if k not in REMOVED}


def _coerce(key: str, value, where: str):
    """Check a YAML value's type against the field's; ints are accepted for floats, whole numbers (1e7) for ints."""
    want = _field_type(key)
    if value is None and FIELDS[key].default is None:
        return None
    if want is list:
        if not isinstance(value, list) or not all(is_number(v) for v in value):
            raise ConfigError(f"{where} must be a list of numbers, got {value!r}")
        return [float(v) for v in value]
    ok = isinstance(value, want) and not (want is int and isinstance(value, bool))
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    written = value
    if want in (int, float) and isinstance(value, str) and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+", value):
        value = float(value)  # YAML 1.1 reads 1e-3 (no dot) as text, though it is plainly the number
        ok = want is float
    if want is int and isinstance(value, float) and value.is_integer():
        value, ok = int(value), True  # frames: 1e7, as the command line takes it
    if not ok:
        raise ConfigError(f"{where} must be of type {want.__name__}, got {written!r}")
    return value


def saved_values(values: dict, where: str) -> dict:
    """The known settings of a config read back (a checkpoint's), each checked for its kind as a config file's
    are: a value edited to another kind is one ConfigError line naming `where`, not a traceback later. Settings
    an older version had and this one has not are left out: playing its weights needs none of them."""
    values = _current(values, where, strict=False)
    return {k: _coerce(k, v, f"{where} {k}") for k, v in values.items() if k in FIELDS}


def is_number(v) -> bool:
    """Whether a value read from YAML or JSON is a finite number (true and false are not, nor NaN or infinity,
    which Python's json reads: no table or schedule can take them)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


VECTOR_PRESETS = {"Pendulum-v1": "pendulum"}  # gymnasium ids with a preset (configs/<kind>.yaml) of their own
# The algorithm each kind of game trains with when --algo is not given: what its measured runs say learns most
# (docs/results.md; ALE games: PPO, ahead of A3C per frame on Breakout, Qbert and SpaceInvaders at 10M frames and
# level on Pong; MuJoCo tasks: PPO, 1.8-18x A3C on Hopper, Walker2d and HalfCheetah at 1M steps, behind it on Ant);
# the others stay one --algo away (--algo a3c: configs/atari.yaml, configs/mujoco.yaml).
DEFAULT_ALGO = {"atari": "ppo", "atari_lstm": "a3c", "mujoco": "ppo", "cartpole": "a3c"}


def game_kind(game: str, net: str = "ff") -> str:
    """atari (atari_lstm with --net lstm) for ALE games (Pong, ALE/Pong-v5), mujoco for MuJoCo tasks, the kind
    VECTOR_PRESETS gives its ids, cartpole for other gymnasium ids (CartPole-v1, ...). From the name and
    gymnasium's registry alone (no env is built), so that a bad --game is reported by envs.resolve."""
    if "-v" in game and not game.startswith("ALE/"):
        if game in VECTOR_PRESETS:
            return VECTOR_PRESETS[game]
        from gymnasium import registry  # gymnasium, not torch: config stays light

        spec = registry.get(game)
        mujoco = spec is not None and str(spec.entry_point).startswith("gymnasium.envs.mujoco")
        return "mujoco" if mujoco else "cartpole"
    return "atari_lstm" if net == "lstm" else "atari"


def default_preset(game: str, algo: str | None, net: str = "ff") -> Path:
    """The preset of a game's kind (game_kind): configs/<kind>.yaml; an algorithm with presets of its own (its
    ALGORITHMS row: dqn, ppo) uses configs/<its>_<kind>.yaml where there is one. Without --algo (None): the
    kind's DEFAULT_ALGO."""
    kind = game_kind(game, net)
    algo = algo or DEFAULT_ALGO.get(kind, Config.algo)
    own = ALGORITHMS[algo].presets if ALGORITHMS.get(algo) else ""
    # every MuJoCo task acts in a Box: said before the preset's a3c values meet a discrete --algo
    if kind == "mujoco" and ALGORITHMS.get(algo) and (why := unable(game, algo, "Box")):
        raise ConfigError(why)
    if own and (CONFIG_DIR / f"{own}_{kind}.yaml").is_file():
        return CONFIG_DIR / f"{own}_{kind}.yaml"
    return CONFIG_DIR / f"{kind}.yaml"


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one ConfigError line (exit 2), without the usage dump."""

    def error(self, message: str):
        raise ConfigError(message)  # one line and exit 2, without argparse's usage dump


# --help's groups, in order: every field of Config in one (tests/test_cli.py checks it)
GROUPS = {
    "run": ("game", "algo", "threads", "frames", "seed", "logdir", "run_dir", "force", "progress", "log_every"),
    "environment and protocol": ("frame_skip", "frame_stack", "screen_size", "noop_max", "sticky_actions",
                                 "fire_reset", "max_episode_frames", "clip_rewards", "reward_scale",
                                 "reward_normalize", "life_loss_terminal"),
    "network": ("net", "hidden", "torso", "mlp_layers", "init", "layer_norm", "lstm_norm", "lstm_norm_eps",
                "obs_standardize", "obs_normalize"),
    "optimizer": ("optimizer", "lr", "lr_anneal", "rms_alpha", "rms_eps", "adam_betas", "adam_eps", "grad_clip"),
    "the paper's methods and A3C (q1, sarsa1, nq, a3c)": ("gamma", "t_max", "envs_per_worker", "entropy_beta",
                                                          "value_coef", "gae_lambda", "policy_std_max",
                                                          "policy_std_init"),
    "rollouts with minibatches (ppo, pqn)": ("epochs", "minibatches", "ppo_clip", "value_clip", "value_normalize",
                                             "q_lambda"),
    "value-based methods (q1, sarsa1, nq, dqn, pqn)": ("target_update", "eps_start", "eps_finals", "eps_probs",
                                                       "eps_anneal_frames"),
    "replay (dqn)": ("replay_size", "learning_starts", "batch_size", "train_every", "double", "n_step", "replay",
                     "target"),
    "evaluation": ("eval_every", "eval_episodes", "eval_envs", "eval_epsilon", "final_eval_episodes",
                   "final_eval_seconds", "deterministic_eval", "stop_return", "video_steps"),
    "cluster": ("cluster", "sync_seconds"),
    "faults": ("max_restarts", "hang_seconds"),
}


def choices() -> dict[str, tuple]:
    """The named values a flag takes, shown in --help as {a,b,c} (validate() says which, for a preset's too)."""
    return {"algo": tuple(ALGORITHMS), "net": NETS, "torso": tuple(CONVOLUTIONS), "init": INITS,
            "optimizer": OPTIMIZERS}


def build_parser(prog: str = "train.py", version: str | None = None) -> argparse.ArgumentParser:
    """The command line: every Config field a flag, in GROUPS, after the run's own few."""
    p = Parser(prog=prog, description="Hogwild asynchronous deep RL (Mnih et al. 2016).",
               usage=f"%(prog)s [-h] [--config FILE | --resume DIR] [--game GAME] "
                     f"[--algo {{{','.join(ALGORITHMS)}}}] [FLAG ...]",
               argument_default=argparse.SUPPRESS)
    p.add_argument("--config", help="YAML preset to start from (default: the one of --game's kind and --algo: "
                                    "configs/<algo>_<kind>.yaml where the algorithm has its own, else "
                                    "configs/<kind>.yaml; kinds: atari, atari_lstm, mujoco, pendulum, cartpole)")
    p.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its checkpoint.pt")
    if version is not None:
        p.add_argument("--version", action="version", version=f"%(prog)s {version}")
    named = choices()
    for title, names in GROUPS.items():
        group = p.add_argument_group(title)
        for name in names:
            t, doc, flag = _field_type(name), FIELDS[name].metadata["doc"], f"--{_flag(name)}"
            if t is bool:
                group.add_argument(flag, action=argparse.BooleanOptionalAction, help=doc)
            elif t is list:
                group.add_argument(flag, nargs="+", type=float, help=doc)
            else:
                metavar = "{" + ",".join(named[name]) + "}" if name in named else None
                group.add_argument(flag, type=_typed(t, optional=FIELDS[name].default is None), help=doc,
                                   metavar=metavar)
    return p


def _typed(t, optional: bool = False):
    def convert(text: str):
        if optional and text.strip().lower() in ("", "none", "null"):
            return None  # back to "not set" (e.g. over a value saved in a resumed run's config.yaml)
        try:
            if t is int and not text.strip().lstrip("+-").isdigit():
                number = float(text)  # accept 2e6 and 2_000_000 for frame counts, but only whole numbers
                if not number.is_integer():
                    raise ValueError(text)
                return int(number)
            return t(text)
        except ValueError:
            kind = {int: "an integer", float: "a number"}.get(t, t.__name__)
            raise argparse.ArgumentTypeError(f"must be {kind}, got {text!r}") from None
    convert.__name__ = t.__name__
    return convert


def load(argv: list[str] | None = None, prog: str = "train.py",
         version: str | None = None) -> tuple[Config, str | None, Path]:
    """Parse the command line into a validated Config; also return --resume's directory (or None) and the
    YAML file the values came from (the preset, or the resumed run's config.yaml)."""
    parser = build_parser(prog, version)  # version: what --version prints (the package's, given by train.py)
    args = vars(parser.parse_args(argv))
    resume = args.pop("resume", None)
    cfg = Config()
    if resume is not None:
        if "config" in args or "run_dir" in args or "logdir" in args:
            given = "--config" if "config" in args else "--run-dir" if "run_dir" in args else "--logdir"
            raise ConfigError(f"--resume {resume} continues that run with its own config.yaml, in its own dir; "
                              f"{given} cannot change them")
        if not Path(resume).is_dir():
            raise ConfigError(f"--resume {resume}: no such run dir" if not Path(resume).exists()
                              else f"--resume {resume}: not a run dir (a file)")
        source = Path(resume) / "config.yaml"
    else:
        source = Path(args.pop("config", None) or default_preset(args.get("game", cfg.game), args.get("algo"),
                                                                args.get("net", cfg.net)))
    origins: dict[str, Path] = {}
    values = read_yaml(source, origins=origins)
    if resume is not None:
        values["run_dir"] = str(resume)
    args.pop("config", None)
    from_files = {k: p for k, p in origins.items() if k not in args}
    values.update(args)
    cfg = dataclasses.replace(cfg, **values)
    try:
        cfg.validate()
    except ConfigError as e:
        raise ConfigError(_naming_files(str(e), from_files)) from None
    return cfg, resume, source


def _naming_files(message: str, from_files: dict[str, Path]) -> str:
    """validate()'s message names flags; where a named value came from a YAML file (the preset, its base, a
    resumed run's config.yaml), not the command line, say which, or a user looks for a flag they never gave."""
    where: dict[Path, list[str]] = {}
    for flag in dict.fromkeys(re.findall(r"--([a-z][a-z0-9-]*)", message)):
        if (key := flag.replace("-", "_")) in from_files:
            where.setdefault(from_files[key], []).append(flag)
    notes = "; ".join(f"{', '.join(flags)}: set in {path}" for path, flags in where.items())
    return f"{message} ({notes})" if notes else message


def variant(algo: str, net: str, obs_normalize: bool, value_normalize: bool = False) -> str:
    """What tells runs of one algorithm apart in run-dir names, the start line and reports: a3c, a3c-lstm,
    a3c-norm (--obs-normalize), a3c-lstm-norm, ppo-vnorm (--value-normalize), ppo-norm-vnorm."""
    return (algo + ("" if net == "ff" else f"-{net}") + ("-norm" if obs_normalize else "")
            + ("-vnorm" if value_normalize else ""))


def start_line(cfg: Config, source: Path) -> str:
    """The line a run prints first: where its values came from and the few that decide whether it learns."""
    try:
        shown = source.resolve().relative_to(Path.cwd())
    except ValueError:
        shown = source
    eps = f" eps {cfg.rms_eps:g}" if cfg.optimizer == "rmsprop" else f" eps {cfg.adam_eps:g}"
    games = f"{cfg.envs_per_worker} game{'s' if cfg.envs_per_worker > 1 else ''}"
    threads = cfg.resolved_threads()
    workers = f"{threads} worker{'s' if threads > 1 else ''}"
    return (f"{shown}: {cfg.variant()} on {cfg.game}, {workers} x {games}, "
            f"{cfg.optimizer} lr {cfg.lr:g}{eps}, {cfg.frames:,} frames, seed {cfg.seed}")


def save(cfg: Config, path: Path) -> None:
    """Write the resolved config so the run can be reproduced and resumed: whole or not at all (a full disk:
    WriteFailed, one line, and the file as it was)."""
    atomic_bytes(yaml.safe_dump(cfg.to_dict(), sort_keys=False).encode(), path)
