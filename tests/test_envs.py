"""Real ALE environments: preprocessing shapes, and the training-only changes (life loss, clipping)."""

import numpy as np
import pytest

from hogwild_dqn.config import Config, ConfigError
from hogwild_dqn.envs import AtariGame, env_spec, make_env, resolve


def test_game_names_resolve():
    assert resolve("Pong") == (True, "ALE/Pong-v5")
    assert resolve("spaceinvaders") == (True, "ALE/SpaceInvaders-v5")
    assert resolve("CartPole-v1") == (False, "CartPole-v1")
    with pytest.raises(ConfigError, match="did you mean Breakout"):
        resolve("Breakot")


def test_pong_spec_is_paper_preprocessing():
    spec = env_spec(Config(game="Pong"))
    assert spec.obs_shape == (4, 84, 84) and spec.n_actions == 6 and spec.frames_per_step == 4
    env = make_env(Config(game="Pong"), seed=0, for_eval=False)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.uint8 and obs.shape == (4, 84, 84)
    env.close()


def _play_until_life_lost(env, rng):
    while True:
        obs, r, term, trunc, info = env.step(int(rng.integers(env.action_space.n)))
        if term or trunc:
            return info


def test_life_loss_ends_training_segment_but_not_the_game():
    cfg = Config(game="Breakout")
    rng = np.random.default_rng(0)
    train_env = make_env(cfg, seed=0, for_eval=False)
    info = _play_until_life_lost(train_env, rng)
    assert info["lives"] == 4 and info["life_lost"]  # terminal after the first lost life (Breakout starts with 5)
    _, info = train_env.reset()
    assert info["lives"] == 4  # the same game goes on, not a new one
    eval_env = make_env(cfg, seed=0, for_eval=True)
    info = _play_until_life_lost(eval_env, rng)
    assert info["lives"] == 0 and "episode" in info and "life_lost" not in info  # evaluation plays the whole game


def test_rewards_clipped_in_training_only():
    cfg = Config(game="Breakout")  # bricks of the upper rows are worth more than 1
    rng = np.random.default_rng(1)
    for for_eval, check in ((False, lambda r: -1 <= r <= 1), (True, lambda r: r >= 0)):
        env = make_env(cfg, seed=1, for_eval=for_eval)
        for _ in range(3000):
            _, r, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
            assert check(r)
            if term or trunc:
                env.reset()
        env.close()


def test_rewards_normalized_by_the_return_deviation_in_training_only():
    """--reward-normalize: CartPole's reward of 1 a step reaches training divided by the running deviation of the
    discounted return (gymnasium's NormalizeReward), then scaled; evaluation sees the raw 1."""
    cfg = Config(game="CartPole-v1", reward_normalize=True, reward_scale=0.5)
    for for_eval in (False, True):
        env, rewards = make_env(cfg, seed=0, for_eval=for_eval), []
        for t in range(300):
            _, r, term, trunc, _ = env.step(t % 2)
            rewards.append(r)
            if term or trunc:
                env.reset()
        env.close()
        if for_eval:
            assert set(rewards) == {1.0}
        else:  # the returns grow to ~10 within a game, so each reward shrinks well below the scaled 0.5
            assert len(set(rewards)) > 100 and 0 < rewards[-1] < 0.25


def _gymnasium_chain(game: str, max_frames: int, sticky: float = 0.0):
    """gymnasium's own ALE env and preprocessing wrappers, the reference our env code is checked against."""
    import ale_py
    import gymnasium as gym
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    gym.register_envs(ale_py)
    return FrameStackObservation(AtariPreprocessing(
        gym.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=sticky, full_action_space=False,
                 max_num_frames_per_episode=max_frames),
        noop_max=30, frame_skip=4, screen_size=84, terminal_on_life_loss=False, grayscale_obs=True), 4)


@pytest.mark.parametrize("game,sticky", [("Pong", 0.0), ("Breakout", 0.0), ("Breakout", 0.25)])
def test_lean_atari_matches_gymnasium_preprocessing(game, sticky):
    """Our ALE path gives the observations, rewards, ends and infos of gymnasium's wrapper chain, frame for frame,
    with --sticky-actions as ALE's repeat_action_probability."""
    max_frames = 2000  # short games: truncations and resets are compared too
    ref = _gymnasium_chain(game, max_frames, sticky)
    ours = AtariGame(game.lower(), Config(frame_skip=4, noop_max=30, screen_size=84, frame_stack=4,
                                          max_episode_frames=max_frames, sticky_actions=sticky))
    (o1, i1), (o2, i2) = ref.reset(seed=5), ours.reset(seed=5)
    i1.pop("seeds")
    assert np.array_equal(o1, o2) and i1 == i2
    rng, ends = np.random.default_rng(0), 0
    for _ in range(1500):
        a = int(rng.integers(ours.action_space.n))
        (o1, *rest1), (o2, *rest2) = ref.step(a), ours.step(a)
        assert np.array_equal(o1, o2) and rest1 == rest2
        if rest1[1] or rest1[2]:
            ends += 1
            (o1, i1), (o2, i2) = ref.reset(), ours.reset()  # unseeded: the no-op RNG carries on in both
            assert np.array_equal(o1, o2) and i1 == i2
    assert ends >= 2
    ref.close()
    ours.close()


def test_make_env_seeds_the_first_game_without_a_second_reset():
    """make_env(seed) builds the env seeded; its first reset() starts the game reset(seed=seed) starts (one ROM
    load per game: the worker no longer resets with the seed again)."""
    cfg = Config(game="Pong", fire_reset=False)  # the bare game, to compare with AtariGame
    env, ref = make_env(cfg, 7, for_eval=True), AtariGame("pong", cfg)
    (o1, _), (o2, _) = env.reset(), ref.reset(seed=7)
    assert np.array_equal(o1, o2)
    rng = np.random.default_rng(0)
    for _ in range(200):
        a = int(rng.integers(ref.action_space.n))
        assert np.array_equal(env.step(a)[0], ref.step(a)[0])
    env.close()
    ref.close()


class ReferenceFireReset:
    """SB3's FireResetEnv (stable_baselines3.common.atari_wrappers: FIRE then action 2 after each reset), and one
    FIRE after a lost life that did not end the game, over gymnasium's chain: the reference for envs.FireReset."""

    def __init__(self, env):
        self.env, self.lives = env, 0

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        obs, _, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:
            obs, info = self.env.reset()
        obs, _, terminated, truncated, info = self.env.step(2)
        if terminated or truncated:
            obs, info = self.env.reset()
        self.lives = info["lives"]
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if not (terminated or truncated) and 0 < info["lives"] < self.lives:
            obs, r, terminated, truncated, info = self.env.step(1)
            reward += r
        self.lives = info["lives"]
        return obs, reward, terminated, truncated, info


def test_fire_reset_matches_the_reference_frame_for_frame():
    """Breakout's evaluation env (FIRE at reset and after each lost life) against gymnasium's chain under the
    reference FIRE wrapper: observations, rewards, ends and lives, through lost lives and whole games."""
    max_frames = 6000
    ref = ReferenceFireReset(_gymnasium_chain("Breakout", max_frames))
    ours = make_env(Config(game="Breakout", max_episode_frames=max_frames), seed=3, for_eval=True)
    (o1, i1), (o2, i2) = ref.reset(seed=3), ours.reset()
    assert np.array_equal(o1, o2) and i1["lives"] == i2["lives"] == 5
    rng, lives_lost, ends = np.random.default_rng(0), 0, 0
    for _ in range(2500):
        a = int(rng.choice([0, 2, 3]))  # never FIRE itself: every launch is the wrapper's
        (o1, r1, t1, u1, i1), (o2, r2, t2, u2, i2) = ref.step(a), ours.step(a)
        assert np.array_equal(o1, o2) and (r1, t1, u1, i1["lives"]) == (r2, t2, u2, i2["lives"])
        lives_lost += 0 < i1["lives"] < 5
        if t1 or u1:
            ends += 1
            (o1, _), (o2, _) = ref.reset(), ours.reset()
            assert np.array_equal(o1, o2)
    assert ends >= 2 and lives_lost > 0


def test_an_agent_that_never_fires_still_ends_a_breakout_game():
    """Without FIRE at reset and after a lost life, a NOOP-only agent is never launched a ball and its game
    runs to the 108,000-frame cap (27,000 steps); with it, the ball is lost five times in a few hundred steps."""
    for cfg, most in ((Config(game="Breakout"), 1000), (Config(game="Breakout", fire_reset=False), None)):
        env, steps = make_env(cfg, seed=0, for_eval=True), 0
        env.reset()
        while True:
            _, _, terminated, truncated, info = env.step(0)
            steps += 1
            if terminated or truncated or (most is None and steps > 2000):
                break
        env.close()
        if most is None:
            assert steps > 2000  # --no-fire-reset: the old behaviour, the ball never comes
        else:
            assert terminated and info["lives"] == 0 and steps < most


def test_the_protocol_is_named():
    from hogwild_dqn.envs import protocol

    assert protocol(Config(game="Breakout")) == \
        "Breakout, no sticky actions, up to 30 no-op starts, FIRE reset, 108,000-frame cap"
    assert protocol(Config(game="Freeway", sticky_actions=0.25, fire_reset=True)) == \
        "Freeway, sticky actions 0.25, up to 30 no-op starts, no FIRE in its actions, 108,000-frame cap"
    assert protocol(Config(game="Pong", fire_reset=False, noop_max=0)).startswith(
        "Pong, no sticky actions, no no-op starts, no FIRE reset")
    assert protocol(Config(game="CartPole-v1")) == "CartPole-v1"


def test_sticky_actions_out_of_range_is_refused():
    with pytest.raises(ConfigError, match="--sticky-actions must be a probability"):
        Config(sticky_actions=1.0).validate()
