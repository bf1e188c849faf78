"""Networks: observation -> Q-values, or -> (policy, value), or with a recurrent state
(observation, (h, c)) -> (policy, value, (h, c)). The policy is softmax logits (rows, actions) for discrete
actions, a Gaussian's (mean, variance) as (rows, 2, action components) for continuous ones. Nothing else."""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn

from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.config import CONVOLUTIONS
from hogwild_dqn.normalizers import ObsNorm, ValueNorm


class AtariTorso(nn.Module):
    """Convolutions (CONVOLUTIONS[convolutions]: the paper's 16 8x8 stride 4, 32 4x4 stride 2 by default), then
    FC `hidden` (the paper's 256); uint8 frames in, scaled to [0, 1].

    With `standardize`, each observation is shifted to mean 0 and scaled to std 1 instead. Inputs that are all
    positive (Pong's grey background) give the weights of a conv1 filter gradients of mostly one sign, so a
    per-parameter normalized step (Adam, RMSProp with small eps) moves the whole filter at once and can leave
    it dead on every input; centred inputs do not.
    """

    def __init__(self, obs_shape: tuple, hidden: int, standardize: bool = False, convolutions: str = "paper",
                 norm: ObsNorm | None = None, layer_norm: bool = False):
        """`layer_norm`: each convolution's output normalized over all its channels and pixels (GroupNorm with
        one group: a per-channel scale and shift, and oneDNN's channels-last kernel), the fc's over its
        features (LayerNorm), before their ReLUs: PQN's network."""
        super().__init__()
        self.standardize, self.norm = standardize, norm
        c, h, w = obs_shape
        layers, channels = [], c
        for filters, kernel, stride in CONVOLUTIONS[convolutions]:
            layers += [nn.Conv2d(channels, filters, kernel, stride=stride),
                       *([nn.GroupNorm(1, filters)] if layer_norm else []), nn.ReLU()]
            channels = filters
        # the last ReLU is the fc's first step (`_fc`), in its layout; a checkpoint's parameter names are these
        self.conv = nn.Sequential(*layers[:-1])
        with torch.no_grad():
            n = self.conv(torch.zeros(1, c, h, w)).numel()
        # channels-last convolutions: oneDNN's kernels for this layout are faster on a CPU, above all the
        # backward pass (docs/speed.md); the checkpoint format is unchanged
        self.conv.to(memory_format=torch.channels_last)
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(n, hidden), *([nn.LayerNorm(hidden)] if layer_norm else []),
                                nn.ReLU())

    def _fc(self, z: torch.Tensor) -> torch.Tensor:
        """The last convolution's output `z` (channels-last) -> features. Put in the fc's (C, H, W) order before
        its ReLU, not after (Flatten's copy): the ReLU's backward then meets one layout, where a mixed one took
        torch's strided path, 5x slower (docs/speed.md)."""
        return self.fc(torch.relu(z.contiguous()))

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The frames as conv1 reads them (float32, channels-last): `from_inputs(inputs(obs))` is `forward(obs)`. A
        learner that passes over the same frames several times computes them once."""
        x = obs.contiguous(memory_format=torch.channels_last)  # the layout change on bytes, not floats
        if self.norm is not None:  # --obs-normalize: each pixel by its running mean and deviation
            return self.norm(x)
        if not self.standardize:
            return x.float() * (1.0 / 255.0)
        x = x.float()
        mean, a = self._frame_statistics(x)
        return (x - mean.view(-1, 1, 1, 1)) * a.view(-1, 1, 1, 1)

    def from_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """Features of frames as `inputs` gives them."""
        return self._fc(self.conv(x))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Features of uint8 frames."""
        if not self.standardize or self.norm is not None:
            return self.from_inputs(self.inputs(obs))
        # conv1(a * (x - m)) = a * conv1_w(x) - a * m * sum(w) + bias for each observation's scalars m (its mean)
        # and a: the standardization is applied to conv1's output, 4x smaller than the frames, rather than to
        # every pixel
        conv1 = self.conv[0]
        x = obs.contiguous(memory_format=torch.channels_last).float()
        mean, a = self._frame_statistics(x)
        z = nn.functional.conv2d(x, conv1.weight, None, conv1.stride)
        w_sum = conv1.weight.sum((1, 2, 3)).view(1, -1, 1, 1)
        shift = conv1.bias.view(1, -1, 1, 1) - (a * mean).view(-1, 1, 1, 1) * w_sum
        return self._fc(self.conv[1:](torch.addcmul(shift, z, a.view(-1, 1, 1, 1))))

    @staticmethod
    def _frame_statistics(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each channels-last frame's mean m and a = 1 / (std + 2.55): pixels/255 standardized with 0.01 added to
        the std is (x - m) * a."""
        rows = x.shape[0]
        flat = x.permute(0, 2, 3, 1).reshape(rows, 1, -1)  # a view: x is channels-last
        size = flat.shape[-1]
        mean = flat.sum(-1).view(rows) / size
        mean_sq = torch.bmm(flat, flat.transpose(1, 2)).view(rows) / size
        return mean, 1.0 / ((mean_sq - mean * mean).clamp_(min=0).sqrt_() + 2.55)


class MLPTorso(nn.Module):
    """Fully connected torso for vector observations (CartPole and friends); `norm` standardizes its input
    (one ObsNorm, shared by a network's torsos)."""

    def __init__(self, obs_shape: tuple, hidden: int, layers: int, norm: ObsNorm | None = None,
                 layer_norm: bool = False):
        """`layer_norm`: each hidden layer's features layer-normalized before its ReLU."""
        super().__init__()
        sizes = [obs_shape[0]] + [hidden] * layers
        mods = []
        for a, b in itertools.pairwise(sizes):
            mods += [nn.Linear(a, b), *([nn.LayerNorm(b)] if layer_norm else []), nn.ReLU()]
        self.body = nn.Sequential(*mods)
        self.norm = norm

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The observations as the first layer reads them (float32)."""
        return obs.float() if self.norm is None else self.norm(obs)

    def from_inputs(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.body(self.inputs(obs))


class QNet(nn.Module):
    """Torso -> one Q-value per action."""

    def __init__(self, torso: nn.Module, hidden: int, n_actions: int):
        super().__init__()
        self.torso, self.q = torso, nn.Linear(hidden, n_actions)

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The observations as the torso's first layer reads them (a learner passing over them several times)."""
        return self.torso.inputs(obs)

    def from_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """Q-values of observations as `inputs` gives them."""
        return self.q(self.torso.from_inputs(x))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.q(self.torso(obs))


class GaussianHead(nn.Module):
    """Continuous actions, as the paper's: a linear mean and a softplus variance per action component,
    stacked as (..., 2, components) so that it stands where a discrete head's logits stand.

    With `std_max` the variance is std_max^2 * sigmoid instead: the env clips the draws to the action bounds, so
    a variance far beyond them buys entropy at no cost and an entropy bonus can inflate it without end.
    With `std_init` the standard deviation is one learned parameter per component, the same in every state,
    starting at std_init (SB3's and PPO's Gaussian): a state-dependent head can shrink it in a few updates."""

    MIN_VARIANCE = 1e-4  # keeps log-probabilities finite when the softplus underflows

    def __init__(self, hidden: int, components: int, std_max: float = 0.0, std_init: float = 0.0):
        super().__init__()
        self.mean = nn.Linear(hidden, components)
        if std_init:
            self.log_std = nn.Parameter(torch.full((components,), math.log(std_init)))
        else:
            self.variance = nn.Linear(hidden, components)
        self.var_max = std_max ** 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = self.mean(x)
        if hasattr(self, "log_std"):
            var = torch.exp(2 * self.log_std).expand_as(mean)
        else:
            raw = self.variance(x)
            var = self.var_max * torch.sigmoid(raw) if self.var_max else nn.functional.softplus(raw)
        return torch.stack((mean, var + self.MIN_VARIANCE), -2)


def policy_head(hidden: int, spec, std_max: float = 0.0, std_init: float = 0.0) -> nn.Module:
    """Logits over spec.n_actions actions, or a Gaussian over spec.n_actions components when continuous."""
    if getattr(spec, "continuous", False):
        return GaussianHead(hidden, spec.n_actions, std_max, std_init)
    return nn.Linear(hidden, spec.n_actions)


class ActorCritic(nn.Module):
    """Torso -> (policy, state value); `pi` is the policy head (logits, or a GaussianHead).

    With one torso the heads share it, as in the paper's Atari network. A second `value_torso` gives the
    critic its own features: unclipped returns (CartPole's reach ~100) make value gradients swamp a
    shared small MLP and the policy collapses.
    """

    def __init__(self, torso: nn.Module, hidden: int, pi: nn.Module, value_torso: nn.Module | None = None):
        super().__init__()
        self.torso, self.value_torso = torso, value_torso
        self.pi, self.v = pi, nn.Linear(hidden, 1)

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The observations as the torsos' first layers read them (both torsos alike: one ObsNorm or none)."""
        return self.torso.inputs(obs)

    def from_inputs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(policy, value) of observations as `inputs` gives them."""
        features = self.torso.from_inputs(x)
        return self._heads(features, features if self.value_torso is None else self.value_torso.from_inputs(x))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(policy, value) of observations."""
        features = self.torso(obs)
        return self._heads(features, features if self.value_torso is None else self.value_torso(obs))

    def _heads(self, x: torch.Tensor, xv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.pi(x), self.v(xv).squeeze(-1)


class RecurrentActorCritic(nn.Module):
    """Torso -> LSTM -> (policy, state value): the paper's A3C LSTM (256 cells after the torso's
    last hidden layer; both heads read the cells' output, since the value needs the memory as much).

    Called one step at a time with each row's state (h, c); `unroll` replays whole segments from their
    first state, which is how the loss sees exactly the states the worker acted with.
    """

    CELLS = 256
    recurrent = True  # callers carry a state for it (the feed-forward networks say nothing: False)

    def __init__(self, torso: nn.Module, hidden: int, pi: nn.Module, input_norm: bool = False,
                 norm_eps: float = 1e-5):
        """`pi`: the policy head, over CELLS inputs; `input_norm`: the torso's features layer-normalized (no
        parameters) before the cells, which bounds the gates' input however large the features grow;
        `norm_eps`: the normalization's epsilon, which caps its gain at 1 / sqrt(norm_eps)."""
        super().__init__()
        self.torso, self.lstm = torso, nn.LSTMCell(hidden, self.CELLS)
        self.pi, self.v = pi, nn.Linear(self.CELLS, 1)
        self.input_norm, self.norm_eps = input_norm, norm_eps

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """What the cells read of observations."""
        return self.cell_input(self.torso(obs))

    def cell_input(self, x: torch.Tensor) -> torch.Tensor:
        """What the cells read of the torso's output `x`: x, layer-normalized with `input_norm`."""
        return nn.functional.layer_norm(x, x.shape[-1:], eps=self.norm_eps) if self.input_norm else x

    def initial_state(self, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The state of a game that has just started: zeros."""
        return torch.zeros(rows, self.CELLS), torch.zeros(rows, self.CELLS)

    def forward(self, obs: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        h, c = self.lstm(self.features(obs), state)
        return self.pi(h), self.v(h).squeeze(-1), (h, c)

    def unroll(self, obs: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        """obs (rows, steps, *obs_shape) from each row's `state`: policies (rows, steps, ...), values (rows,
        steps). The torso runs once over every step (one batched forward), the cells step by step."""
        rows, steps = obs.shape[:2]
        x = self.features(obs.flatten(0, 1)).view(rows, steps, -1)
        h, c = state
        out = []
        for t in range(steps):
            h, c = self.lstm(x[:, t], (h, c))
            out.append(h)
        hs = torch.stack(out, 1)
        return self.pi(hs), self.v(hs).squeeze(-1)


def is_recurrent(net: nn.Module) -> bool:
    """Whether `net` takes and returns a recurrent state (the worker and the evaluation policy carry it)."""
    return getattr(net, "recurrent", False)


def network_for(cfg, spec) -> nn.Module:
    """The network of a run's config and env spec (every process builds the same one): pixels (3-D
    observations) get the paper's shared Atari torso, vectors an MLP (a separate one for V); the algorithm's
    row in ALGORITHMS says actor-critic heads or Q-values; --net lstm puts LSTM cells after one torso that both
    heads share; a continuous action space gets a Gaussian policy head. `spec` needs obs_shape and n_actions
    (continuous, when present)."""
    obs_shape, hidden = tuple(spec.obs_shape), cfg.hidden
    pixels = len(obs_shape) == 3
    norm = ObsNorm(obs_shape) if cfg.obs_normalize else None  # no parameters: the same initial weights

    def new_torso() -> nn.Module:
        return (AtariTorso(obs_shape, hidden, cfg.obs_standardize, cfg.torso, norm, cfg.layer_norm) if pixels
                else MLPTorso(obs_shape, hidden, cfg.mlp_layers, norm, cfg.layer_norm))

    def new_pi(inputs: int) -> nn.Module:
        return policy_head(inputs, spec, cfg.policy_std_max, cfg.policy_std_init)

    torso = new_torso()
    if cfg.net == "lstm":
        net = RecurrentActorCritic(torso, hidden, new_pi(RecurrentActorCritic.CELLS), cfg.lstm_norm,
                                   cfg.lstm_norm_eps)
    else:
        # built before the head (and for a Q network too, unused): the order fixes a seed's first weights
        value_torso = None if pixels else new_torso()
        net = (ActorCritic(torso, hidden, new_pi(hidden), value_torso) if ALGORITHMS[cfg.algo].actor_critic
               else QNet(torso, hidden, spec.n_actions))
    if cfg.init == "orthogonal":
        orthogonal_init(net)
    if cfg.value_normalize:
        net.value_norm = ValueNorm(())  # no parameters: the same initial weights
    return net


def orthogonal_init(net: nn.Module) -> None:
    """The initial weights of PPO's implementations (baselines, CleanRL, Sample Factory; Huang et al. 2022, "The
    37 implementation details of PPO"): each convolution's and linear layer's weight an orthogonal matrix of gain
    sqrt(2) (ReLU's), biases 0; then the policy's output (logits, or a Gaussian's mean) gain 0.01, so that the
    first policy is near uniform (or near 0), and the value's output and Q-values gain 1. LSTM cells keep
    PyTorch's initialization."""
    def init(layer: nn.Module, gain: float) -> None:
        with torch.no_grad():  # into a contiguous copy: orthogonal_ views the weight as a matrix, and the
            w = torch.empty(layer.weight.shape)  # convolutions' weights are channels-last
            nn.init.orthogonal_(w, gain)
            layer.weight.copy_(w)
            nn.init.zeros_(layer.bias)

    for layer in net.modules():
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            init(layer, math.sqrt(2))
    pi = getattr(net, "pi", None)
    for layer, gain in ((pi.mean if isinstance(pi, GaussianHead) else pi, 0.01), (getattr(net, "v", None), 1.0),
                        (getattr(net, "q", None), 1.0)):
        if isinstance(layer, nn.Linear):
            init(layer, gain)
