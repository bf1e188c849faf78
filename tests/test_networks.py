"""The Atari torso's input scaling."""

import dataclasses

import torch

from hogwild_dqn.config import Config
from hogwild_dqn.envs import env_spec
from hogwild_dqn.networks import AtariTorso, network_for


def _frames() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(40, 120, (3, 4, 84, 84), dtype=torch.uint8, generator=g)


def test_standardized_input_ignores_the_brightness_of_each_observation():
    torch.manual_seed(0)
    torso = AtariTorso((4, 84, 84), 32, standardize=True)
    obs = _frames()
    brighter = obs.clone()
    brighter[0] = obs[0] + 60  # one observation of the batch, every pixel brighter (still < 256)
    assert torch.allclose(torso(obs), torso(brighter), atol=1e-5)
    plain = AtariTorso((4, 84, 84), 32)
    plain.load_state_dict(torso.state_dict())
    assert not torch.allclose(plain(obs)[0], plain(brighter)[0], atol=1e-3)


def test_config_flag_reaches_the_network_every_process_builds():
    cfg = Config(game="Pong")
    spec = env_spec(cfg)
    assert network_for(cfg, spec).torso.standardize is False
    on = network_for(dataclasses.replace(cfg, obs_standardize=True), spec)
    assert on.torso.standardize is True
    x = on.torso.fc[1].in_features  # same shapes either way: checkpoints of both load into each other
    assert x == network_for(cfg, spec).torso.fc[1].in_features
