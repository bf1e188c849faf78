"""The only module that builds envs (and imports ale_py): game names, env construction, env facts, the bare
emulator's speed. (config.py reads gymnasium's registry to pick a preset.)"""

from __future__ import annotations

import difflib
import functools
import os
import time
import warnings
from dataclasses import dataclass

import ale_py
import cv2
import gymnasium as gym
import numpy as np
from ale_py import roms
from gymnasium.utils import seeding
from gymnasium.wrappers import ClipAction, NormalizeReward, RecordEpisodeStatistics, TransformReward

from hogwild_dqn.algorithms import unable
from hogwild_dqn.config import Config, ConfigError, first_line

gym.register_envs(ale_py)
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # classic-control rendering (pygame) without a display
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
# SDL (pygame) otherwise takes SIGINT and SIGTERM for its own event queue, which no one reads: a filming play ran on
os.environ.setdefault("SDL_NO_SIGNAL_HANDLERS", "1")


class HideVelocities(gym.ObservationWrapper):
    """CartPole with the cart's position and the pole's angle only: a partially observed task, since both
    velocities must be inferred from successive observations (what --net lstm's memory is for)."""

    KEEP = [0, 2]  # x, theta of (x, x_dot, theta, theta_dot)

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(space.low[self.KEEP], space.high[self.KEEP], dtype=np.float32)

    def observation(self, observation):
        return observation[self.KEEP].astype(np.float32)


def _cartpole_no_velocity(**kwargs) -> gym.Env:
    return HideVelocities(gym.make("CartPole-v1", **kwargs))


if "CartPoleNoVel-v1" not in gym.registry:  # every process that imports this module can make it by name
    gym.register("CartPoleNoVel-v1", entry_point=_cartpole_no_velocity)


@dataclass(frozen=True)
class EnvSpec:
    """What the rest of the trainer needs to know about an environment."""
    env_id: str
    is_atari: bool
    obs_shape: tuple
    n_actions: int        # Discrete: the number of actions; Box: the number of action components
    frames_per_step: int  # emulator frames per agent step (frame skip); 1 outside Atari
    continuous: bool = False  # a Box action space: a vector of floats per step, clipped to its bounds by the env
    protocol: str = ""        # the env as named beside its scores (envs.protocol)


def ale_games() -> dict[str, str]:
    """Lower-case name -> ALE game name, for every game ale-py ships."""
    names = {k.split("/")[1].rsplit("-v", 1)[0] for k in gym.registry if k.startswith("ALE/")}
    return {n.lower(): n for n in names}


def _is_ale(env_id: str) -> bool:
    """Whether a gymnasium id is one of ale-py's (ALE/Pong-v5, and the older Pong-v4, PongNoFrameskip-v4)."""
    return str(gym.registry[env_id].entry_point).startswith("ale_py")


def resolve(game: str) -> tuple[bool, str]:
    """Map a user's --game to (is_atari, gymnasium id); raise ConfigError with close names if unknown."""
    games = ale_games()
    bare = game[4:].rsplit("-v", 1)[0] if game.startswith("ALE/") else game
    if bare.lower() in games:
        return True, f"ALE/{games[bare.lower()]}-v5"
    if game in gym.registry and _is_ale(game):  # PongNoFrameskip-v4, Pong-v4: gymnasium's older ALE ids
        name = games.get(str(gym.registry[game].kwargs.get("game", "")).replace("_", ""), "the game")
        raise ConfigError(f"--game {game!r} is one of gymnasium's older ALE ids, whose frame skip and sticky actions "
                          f"are their own; give the game's name ({name}): the trainer sets those itself "
                          "(--frame-skip, --sticky-actions)")
    if game in gym.registry:
        return False, game
    ids = sorted(k for k in gym.registry if k.startswith("ALE/") or not _is_ale(k))
    close = difflib.get_close_matches(game, sorted(games.values()) + ids, n=3, cutoff=0.6)
    hint = (f"; did you mean {', '.join(close)}?" if close
            else "; give an ALE game (Pong, Breakout, ...) or a gymnasium id")
    raise ConfigError(f"--game {game!r} is unknown{hint}")


class AtariGame(gym.Env):
    """ALE straight into a preallocated frame stack: the paper's preprocessing without the wrapper chain.

    Same observations, rewards, seeding and no-op starts as gymnasium's ALE env (frameskip 1) under
    AtariPreprocessing (grayscale, max of the last two frames, INTER_AREA resize) and FrameStackObservation
    (tests/test_envs.py compares them frame by frame). Why: that chain fetched an RGB screen every emulator
    frame and built the stack anew every step (its cost: docs/speed.md).
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, rom: str, cfg: Config, seed: int | None = None, render_mode: str | None = None):
        """`rom`: ale-py's id, e.g. "space_invaders"; frame skip, no-ops, screen size, stack and the episode's
        frame limit come from `cfg`. `seed` seeds the emulator and the no-op draws as reset(seed=seed) would,
        without a second ROM load."""
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner from every process
        self.ale = ale_py.ALEInterface()
        self.ale.setFloat("repeat_action_probability", cfg.sticky_actions)
        self.ale.setInt("max_num_frames_per_episode", cfg.max_episode_frames)
        self.rom, self.render_mode = rom, render_mode
        self.frame_skip, self.noop_max, self.size = cfg.frame_skip, cfg.noop_max, (cfg.screen_size, cfg.screen_size)
        frame_stack, screen_size = cfg.frame_stack, cfg.screen_size
        self._seed(seed)
        self.actions = self.ale.getMinimalActionSet()
        h, w = self.ale.getScreenDims()
        self.screens = np.zeros((2, h, w), dtype=np.uint8)  # the last two frames of a step, max-pooled
        self.stack = np.zeros((frame_stack, screen_size, screen_size), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(len(self.actions))
        self.observation_space = gym.spaces.Box(0, 255, self.stack.shape, np.uint8)

    def _seed(self, seed: int | None) -> None:
        # as ale_py's AtariEnv.seed_game: one seed sequence gives the no-op RNG and the emulator's seed
        np_seed, ale_seed = np.random.SeedSequence(seed).generate_state(n_words=2)
        self._np_random, _ = seeding.np_random(int(np_seed))
        self.ale.setInt("random_seed", np.int32(ale_seed))
        self.ale.loadROM(roms.get_rom_path(self.rom))

    def _info(self) -> dict:
        return {"lives": self.ale.lives(), "episode_frame_number": self.ale.getEpisodeFrameNumber(),
                "frame_number": self.ale.getFrameNumber()}

    def _push(self) -> np.ndarray:
        """Max-pool the two frames, resize into the newest stack slot, return a copy of the stack."""
        if self.frame_skip > 1:
            np.maximum(self.screens[0], self.screens[1], out=self.screens[0])
        self.stack[:-1] = self.stack[1:]
        self.stack[-1] = cv2.resize(self.screens[0], self.size, interpolation=cv2.INTER_AREA)
        return self.stack.copy()  # callers may keep observations; the stack changes in place

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._seed(seed)
        self.ale.reset_game()
        noops = self._np_random.integers(1, self.noop_max + 1) if self.noop_max > 0 else 0
        for _ in range(noops):
            self.ale.act(self.actions[0])
            if self.ale.game_over():
                self.ale.reset_game()
        self.ale.getScreenGrayscale(self.screens[0])
        self.screens[1].fill(0)
        self._push()
        self.stack[:] = self.stack[-1]  # the first observation fills the whole stack
        return self.stack.copy(), self._info()

    def step(self, action):
        reward, terminated, truncated, ale = 0.0, False, False, self.ale
        a = self.actions[action]
        for t in range(self.frame_skip):
            reward += ale.act(a)
            terminated, truncated = ale.game_over(with_truncation=False), ale.game_truncated()
            if terminated or truncated:
                break  # as AtariPreprocessing: the observation keeps the frames grabbed before the end
            if t == self.frame_skip - 2:
                ale.getScreenGrayscale(self.screens[1])
            elif t == self.frame_skip - 1:
                ale.getScreenGrayscale(self.screens[0])
        return self._push(), reward, terminated, truncated, self._info()

    def render(self):
        return self.ale.getScreenRGB() if self.render_mode == "rgb_array" else None


class FireReset(gym.Wrapper):
    """FIRE at the start of every game and after every lost life, in games whose action set has FIRE (Breakout's
    ball is launched only by it): an agent that has not learnt to press it would otherwise burn the
    --max-episode-frames cap. The start is SB3's FireResetEnv (FIRE, then action 2); the step after a lost life
    that did not end the game is followed by one FIRE inside the same step (its reward counted). Training and
    evaluation alike. The frames of these presses, like the no-ops', are not counted as training frames."""

    def __init__(self, env: gym.Env, fire: int):
        super().__init__(env)
        self.fire, self.lives = fire, 0

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        for action in (self.fire, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:  # the seed, if any, was the first reset's
                obs, info = self.env.reset()
        self.lives = info["lives"]
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if not (terminated or truncated) and 0 < info["lives"] < self.lives:
            obs, more, terminated, truncated, info = self.env.step(self.fire)
            reward += more
        self.lives = info["lives"]
        return obs, reward, terminated, truncated, info


@functools.cache
def fire_action(rom: str) -> int | None:
    """The index of FIRE in a game's minimal action set (what the agent chooses from), or None."""
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    ale = ale_py.ALEInterface()
    ale.loadROM(roms.get_rom_path(rom))
    actions = list(ale.getMinimalActionSet())
    return actions.index(ale_py.Action.FIRE) if ale_py.Action.FIRE in actions and len(actions) >= 3 else None


def protocol(cfg: Config) -> str:
    """The env as a score's reader needs it named: for Atari the game, sticky actions, no-op starts, FIRE at
    reset and the episode cap (Machado et al. 2018 call sticky actions 0.25 the v5 default; we default to 0)."""
    is_atari, env_id = resolve(cfg.game)
    if not is_atari:
        return env_id
    game = env_id[4:].rsplit("-v", 1)[0]
    sticky = (f"sticky actions {cfg.sticky_actions:g}" if cfg.sticky_actions else "no sticky actions")
    noops = f"up to {cfg.noop_max} no-op starts" if cfg.noop_max else "no no-op starts"
    fire = ("FIRE reset" if fire_action(gym.spec(env_id).kwargs["game"]) is not None else "no FIRE in its actions") \
        if cfg.fire_reset else "no FIRE reset"
    return f"{game}, {sticky}, {noops}, {fire}, {cfg.max_episode_frames:,}-frame cap"


class EpisodicLife(gym.Wrapper):
    """Training only: a lost life is a terminal for the return maths, but the game goes on (no real reset);
    such a step says so with info["life_lost"], so that what lives across a game (an LSTM's memory) is kept."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = info["lives"]
        if 0 < lives < self.lives:
            terminated = True
            info["life_lost"] = not self.game_over
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        if self.game_over:
            obs, info = self.env.reset(**kwargs)
        else:  # continue the same game from where the life was lost
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.game_over = False
        self.lives = info["lives"]
        return obs, info


class ClipReward(gym.RewardWrapper):
    """Training only: rewards clipped to [-1, 1] as in the DQN and A3C papers."""

    def reward(self, reward):
        return float(np.clip(reward, -1.0, 1.0))


def make_env(cfg: Config, seed: int, for_eval: bool, render: bool = False) -> gym.Env:
    """Build the env, seeded with `seed`: the caller's first env.reset() (without a seed) starts its first
    game. Training and evaluation differ on purpose (clipping and life loss only in training).

    Full-game raw returns appear as info["episode"] when a game ends, in both modes. With `render`,
    env.render() returns the screen as an RGB array (for the evaluator's videos).
    """
    is_atari, env_id = resolve(cfg.game)
    mode = {"render_mode": "rgb_array"} if render else {}
    if not is_atari:
        try:
            env = RecordEpisodeStatistics(gym.make(env_id, **mode))
        except gym.error.DependencyNotInstalled as e:  # MuJoCo, Box2D, ...: optional packages
            if "mujoco" in str(e).lower():
                raise ConfigError(f"--game {cfg.game!r} needs MuJoCo: make install-mujoco "
                                  "(pip install -r requirements-mujoco.txt)") from None
            raise ConfigError(f"--game {cfg.game!r}: {first_line(e)}") from None
        except ImportError as e:  # an env of a package whose own dependency is absent (gymnasium's jax ones)
            missing = isinstance(e, ModuleNotFoundError) and e.name
            raise ConfigError(f"--game {cfg.game!r} needs {e.name}, which is not installed" if missing
                              else f"--game {cfg.game!r}: {first_line(e)}") from None
        if isinstance(env.action_space, gym.spaces.Box):
            env = ClipAction(env)  # the policy's Gaussian is unbounded; its draws are clipped only here
        if not for_eval and cfg.reward_normalize:
            env = NormalizeReward(env, gamma=cfg.gamma)
        if not for_eval and cfg.reward_scale != 1.0:
            env = TransformReward(env, lambda r: r * cfg.reward_scale)
    else:
        rom = gym.spec(env_id).kwargs["game"]
        env = AtariGame(rom, cfg, seed, **mode)
        if cfg.fire_reset and (fire := fire_action(rom)) is not None:
            env = FireReset(env, fire)
        env = RecordEpisodeStatistics(env)
        if not for_eval and cfg.life_loss_terminal:
            env = EpisodicLife(env)
        if not for_eval and cfg.clip_rewards:
            env = ClipReward(env)
        if not for_eval and cfg.reward_scale != 1.0:
            env = TransformReward(env, lambda r: r * cfg.reward_scale)
    env.action_space.seed(seed)
    if not is_atari:  # gymnasium seeds an env at a reset; AtariGame was seeded when it was built
        env.reset(seed=seed)
    return env


def render_problem(cfg: Config) -> str | None:
    """Why this machine cannot draw the game's screens, or None. MuJoCo needs an OpenGL context (a display, EGL
    or OSMesa, chosen by MUJOCO_GL); a headless machine without one trains and evaluates, but has no videos."""
    try:
        with warnings.catch_warnings():  # the GL backends tried on the way warn too (GLFWError: no display)
            warnings.simplefilter("ignore")
            env = make_env(cfg, 0, for_eval=True, render=True)
            try:
                env.reset()
                env.render()
            finally:
                env.close()
    except Exception as e:  # each GL backend raises its own type (mujoco.FatalError, EGLError, ...)
        return first_line(e)[:160]
    return None


def emulator_fps(cfg: Config, seconds: float) -> float:
    """Frames/s of the bare ALE game (the figure beside every wall time): frame skip 4, random actions, no
    preprocessing, no learning."""
    env = gym.make(resolve(cfg.game)[1], frameskip=cfg.frame_skip, repeat_action_probability=0.0)
    env.reset(seed=0)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        steps += 1
        if term or trunc:
            env.reset()
    env.close()
    return steps * cfg.frame_skip / (time.perf_counter() - t0)


def action_count(space) -> int:
    """A Discrete space's number of actions, a Box's number of action components."""
    return int(space.n) if isinstance(space, gym.spaces.Discrete) else int(space.shape[0])


def env_spec(cfg: Config) -> EnvSpec:
    """Probe the env once (in the parent, before spawning) for its shapes."""
    is_atari, env_id = resolve(cfg.game)
    env = make_env(cfg, seed=0, for_eval=True)
    try:
        obs_space, act_space = env.observation_space, env.action_space
        kind = type(act_space).__name__
        if kind not in ("Discrete", "Box") or (kind == "Box" and len(act_space.shape) != 1):
            raise ConfigError(f"--game {cfg.game!r} has a {kind} action space of shape {act_space.shape}; "
                              "give a game with discrete actions or a flat Box of continuous ones")
        if why := unable(cfg.game, cfg.algo, kind):
            raise ConfigError(why)
        if is_atari and cfg.reward_normalize:
            raise ConfigError("--reward-normalize is for vector tasks; Atari's rewards are clipped (--clip-rewards)")
        if not is_atari and (obs_space.shape is None or len(obs_space.shape) != 1):
            form = f"shape {obs_space.shape}" if obs_space.shape is not None else f"no shape ({obs_space})"
            raise ConfigError(f"--game {cfg.game!r} has observations of {form}; "
                              "non-Atari games need flat vector observations")
        n = action_count(act_space)
        return EnvSpec(env_id, is_atari, tuple(obs_space.shape), n, cfg.frame_skip if is_atari else 1,
                       continuous=kind == "Box", protocol=protocol(cfg))
    finally:
        env.close()
