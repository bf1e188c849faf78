"""Networks: observation -> Q-values, or -> (policy logits, value). Nothing else."""

from __future__ import annotations

import itertools

import torch
from torch import nn


class AtariTorso(nn.Module):
    """The paper's torso: 16 8x8 stride 4, 32 4x4 stride 2, FC 256; uint8 frames in."""

    def __init__(self, obs_shape: tuple, hidden: int):
        super().__init__()
        c, h, w = obs_shape
        self.conv = nn.Sequential(nn.Conv2d(c, 16, 8, stride=4), nn.ReLU(), nn.Conv2d(16, 32, 4, stride=2), nn.ReLU())
        with torch.no_grad():
            n = self.conv(torch.zeros(1, c, h, w)).numel()
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(n, hidden), nn.ReLU())

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(obs.float() / 255.0))


class MLPTorso(nn.Module):
    """Fully connected torso for vector observations (CartPole and friends)."""

    def __init__(self, obs_shape: tuple, hidden: int, layers: int):
        super().__init__()
        sizes = [obs_shape[0]] + [hidden] * layers
        mods = []
        for a, b in itertools.pairwise(sizes):
            mods += [nn.Linear(a, b), nn.ReLU()]
        self.body = nn.Sequential(*mods)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.body(obs.float())


class QNet(nn.Module):
    """Torso -> one Q-value per action."""

    def __init__(self, torso: nn.Module, hidden: int, n_actions: int):
        super().__init__()
        self.torso, self.q = torso, nn.Linear(hidden, n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.q(self.torso(obs))


class ActorCritic(nn.Module):
    """Torso -> (softmax policy logits, state value).

    With one torso the heads share it, as in the paper's Atari network. A second `value_torso` gives the
    critic its own features: unclipped returns (CartPole's reach ~100) make value gradients swamp a
    shared small MLP and the policy collapses.
    """

    def __init__(self, torso: nn.Module, hidden: int, n_actions: int, value_torso: nn.Module | None = None):
        super().__init__()
        self.torso, self.value_torso = torso, value_torso
        self.pi, self.v = nn.Linear(hidden, n_actions), nn.Linear(hidden, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.torso(obs)
        xv = x if self.value_torso is None else self.value_torso(obs)
        return self.pi(x), self.v(xv).squeeze(-1)


def build_network(obs_shape: tuple, n_actions: int, actor_critic: bool, hidden: int, mlp_layers: int) -> nn.Module:
    """Pixels (3-D observations) get the paper's shared Atari torso; vectors an MLP (a separate one for V)."""
    if len(obs_shape) == 3:
        torso, value_torso = AtariTorso(obs_shape, hidden), None
    else:
        torso, value_torso = MLPTorso(obs_shape, hidden, mlp_layers), MLPTorso(obs_shape, hidden, mlp_layers)
    if actor_critic:
        return ActorCritic(torso, hidden, n_actions, value_torso)
    return QNet(torso, hidden, n_actions)
