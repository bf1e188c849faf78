"""The only module that imports gymnasium / ale_py: game names, env construction, env facts."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

import ale_py
import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, RecordEpisodeStatistics, TransformReward

from hogwild_dqn.config import Config, ConfigError

gym.register_envs(ale_py)
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # classic-control rendering (pygame) without a display
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


@dataclass(frozen=True)
class EnvSpec:
    """What the rest of the trainer needs to know about an environment."""
    env_id: str
    is_atari: bool
    obs_shape: tuple
    n_actions: int
    frames_per_step: int  # emulator frames per agent step (frame skip); 1 outside Atari


def ale_games() -> dict[str, str]:
    """Lower-case name -> ALE game name, for every game ale-py ships."""
    names = {k.split("/")[1].rsplit("-v", 1)[0] for k in gym.registry if k.startswith("ALE/")}
    return {n.lower(): n for n in names}


def resolve(game: str) -> tuple[bool, str]:
    """Map a user's --game to (is_atari, gymnasium id); raise ConfigError with close names if unknown."""
    games = ale_games()
    bare = game[4:].rsplit("-v", 1)[0] if game.startswith("ALE/") else game
    if bare.lower() in games:
        return True, f"ALE/{games[bare.lower()]}-v5"
    if game in gym.registry:
        return False, game
    close = difflib.get_close_matches(game, sorted(games.values()) + sorted(gym.registry), n=3, cutoff=0.6)
    hint = (f"; did you mean {', '.join(close)}?" if close
            else "; give an ALE game (Pong, Breakout, ...) or a gymnasium id")
    raise ConfigError(f"--game {game!r} is unknown{hint}")


class EpisodicLife(gym.Wrapper):
    """Training only: a lost life is a terminal for the return maths, but the game goes on (no real reset)."""

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
    """Build the env; training and evaluation differ on purpose (clipping and life loss only in training).

    Full-game raw returns appear as info["episode"] when a game ends, in both modes. With `render`,
    env.render() returns the screen as an RGB array (for the evaluator's videos).
    """
    is_atari, env_id = resolve(cfg.game)
    mode = {"render_mode": "rgb_array"} if render else {}
    if not is_atari:
        env = RecordEpisodeStatistics(gym.make(env_id, **mode))
        if not for_eval and cfg.reward_scale != 1.0:
            env = TransformReward(env, lambda r: r * cfg.reward_scale)
    else:
        env = gym.make(env_id, frameskip=1, repeat_action_probability=0.0, full_action_space=False,
                       max_num_frames_per_episode=cfg.max_episode_frames, **mode)
        env = AtariPreprocessing(env, noop_max=cfg.noop_max, frame_skip=cfg.frame_skip,
                                 screen_size=cfg.screen_size, terminal_on_life_loss=False, grayscale_obs=True)
        env = RecordEpisodeStatistics(env)
        if not for_eval and cfg.life_loss_terminal:
            env = EpisodicLife(env)
        if not for_eval and cfg.clip_rewards:
            env = ClipReward(env)
        if not for_eval and cfg.reward_scale != 1.0:
            env = TransformReward(env, lambda r: r * cfg.reward_scale)
        env = FrameStackObservation(env, cfg.frame_stack)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    return env


def env_spec(cfg: Config) -> EnvSpec:
    """Probe the env once (in the parent, before spawning) for its shapes."""
    is_atari, env_id = resolve(cfg.game)
    env = make_env(cfg, seed=0, for_eval=True)
    try:
        obs_space, act_space = env.observation_space, env.action_space
        if not isinstance(act_space, gym.spaces.Discrete):
            raise ConfigError(f"--game {cfg.game!r} has a {type(act_space).__name__} action space; "
                              "only discrete actions are supported")
        if not is_atari and len(obs_space.shape) != 1:
            raise ConfigError(f"--game {cfg.game!r} has observations of shape {obs_space.shape}; "
                              "non-Atari games need flat vector observations")
        return EnvSpec(env_id, is_atari, tuple(obs_space.shape), int(act_space.n),
                       cfg.frame_skip if is_atari else 1)
    finally:
        env.close()
