"""The Atari torsos and their input scaling; PPO's orthogonal initialization; the LSTM network's steps and unrolls;
the Gaussian head of continuous actions."""

import copy
import dataclasses
import math
from types import SimpleNamespace

import pytest
import torch

from hogwild_dqn.config import Config
from hogwild_dqn.envs import env_spec
from hogwild_dqn.networks import AtariTorso, GaussianHead, RecurrentActorCritic, is_recurrent, network_for
from hogwild_dqn.normalizers import ObsNorm, ValueNorm, obs_norm, value_norm


def _frames() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(40, 120, (3, 4, 84, 84), dtype=torch.uint8, generator=g)


def test_standardized_input_ignores_the_brightness_of_each_observation():
    torch.manual_seed(0)
    torso = AtariTorso((4, 84, 84), 32, standardize=True)
    obs = _frames()
    brighter = obs.clone()
    brighter[0] = obs[0] + 60  # one observation of the batch, every pixel brighter (still < 256)
    # 1e-4: the standardization is applied after conv1 (networks.AtariTorso), which rounds at about 2e-5 here
    assert torch.allclose(torso(obs), torso(brighter), atol=1e-4)
    plain = AtariTorso((4, 84, 84), 32)
    plain.load_state_dict(torso.state_dict())
    assert not torch.allclose(plain(obs)[0], plain(brighter)[0], atol=1e-3)


def test_the_nature_torso_is_dqns_network_and_standardizes_as_the_papers_does():
    torch.manual_seed(0)
    torso = AtariTorso((4, 84, 84), 512, standardize=True, convolutions="nature")
    convs = [(m.out_channels, m.kernel_size[0], m.stride[0]) for m in torso.conv if isinstance(m, torch.nn.Conv2d)]
    assert convs == [(32, 8, 4), (64, 4, 2), (64, 3, 1)]
    assert torso.fc[1].in_features == 64 * 7 * 7  # 84 -> 20 -> 9 -> 7
    assert sum(p.numel() for p in torso.parameters()) == 1_684_128  # Mnih et al. 2015's network, without its head
    obs = _frames()
    brighter = obs.clone()
    brighter[1] = obs[1] + 60
    assert torso(obs).shape == (3, 512) and torch.allclose(torso(obs), torso(brighter), atol=1e-4)


@pytest.mark.parametrize("game, algo, net, shape, actions", [
    ("Pong", "ppo", "ff", (4, 84, 84), 6), ("Pong", "a3c", "lstm", (4, 84, 84), 6),
    ("Pong", "dqn", "ff", (4, 84, 84), 6), ("Pendulum-v1", "ppo", "ff", (3,), 1),
])
def test_orthogonal_init_gives_ppos_initial_weights(game, algo, net, shape, actions):
    spec = SimpleNamespace(obs_shape=shape, n_actions=actions, continuous=game == "Pendulum-v1")
    cfg = Config(game=game, algo=algo, net=net, init="orthogonal")
    torch.manual_seed(3)
    model = network_for(cfg, spec)

    def gram(layer):  # W W^T of the weight as a matrix (rows: outputs); gain^2 I for an orthogonal one
        w = layer.weight.detach().reshape(layer.weight.shape[0], -1)
        return w @ w.T

    layers = [m for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    heads = {id(getattr(model, name, None)) for name in ("pi", "v", "q")}
    heads.add(id(getattr(getattr(model, "pi", None), "mean", None)))
    for layer in layers:
        assert torch.count_nonzero(layer.bias) == 0
        if id(layer) not in heads and layer.weight.shape[0] <= layer.weight[0].numel():
            assert torch.allclose(gram(layer), 2 * torch.eye(layer.weight.shape[0]), atol=1e-4)
    pi = model.pi.mean if spec.continuous else getattr(model, "pi", None)
    if pi is not None:  # a near-uniform first policy (or a mean near 0): rows of norm 0.01
        assert torch.allclose(gram(pi), 1e-4 * torch.eye(actions), atol=1e-7)
        assert torch.allclose(gram(model.v), torch.ones(1, 1), atol=1e-5)
    else:
        assert torch.allclose(gram(model.q), torch.eye(actions), atol=1e-4)
    torch.manual_seed(3)
    again = network_for(cfg, spec)  # the parent builds it once from the seed: the same weights every time
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))
    torch.manual_seed(3)
    default = network_for(dataclasses.replace(cfg, init="torch"), spec)
    assert torch.count_nonzero(default.state_dict()[next(k for k in default.state_dict() if k.endswith("bias"))])


def test_obs_normalize_standardizes_atari_frames_pixel_by_pixel():
    spec = SimpleNamespace(obs_shape=(4, 84, 84), n_actions=6)
    torch.manual_seed(0)
    net = network_for(Config(game="Pong", algo="ppo", obs_normalize=True), spec)
    norm = obs_norm(net)
    assert norm is net.torso.norm and norm.mean.shape == (4, 84, 84)
    frames = _frames()
    norm.update(frames)  # what a worker does with its rollout's observations
    expected = (frames.double() - frames.double().mean(0)) / torch.sqrt(frames.double().var(0, unbiased=False) + 1e-8)
    conv = net.torso.conv
    want = net.torso.fc(torch.relu(conv(expected.clamp(-10, 10).float())))
    assert torch.allclose(net.torso(frames), want, atol=1e-5)
    brighter = frames.clone()
    brighter[0] = frames[0] + 60  # unlike --obs-standardize, a frame's brightness is seen against the statistics
    assert not torch.allclose(net.torso(frames)[0], net.torso(brighter)[0], atol=1e-3)


def test_config_flag_reaches_the_network_every_process_builds():
    cfg = Config(game="Pong")
    spec = env_spec(cfg)
    assert network_for(cfg, spec).torso.standardize is False
    on = network_for(dataclasses.replace(cfg, obs_standardize=True), spec)
    assert on.torso.standardize is True
    x = on.torso.fc[1].in_features  # same shapes either way: checkpoints of both load into each other
    assert x == network_for(cfg, spec).torso.fc[1].in_features


def _lstm(obs_shape=(2,), n_actions=3):
    cfg = Config(game="CartPoleNoVel-v1", net="lstm", hidden=16, mlp_layers=1)
    return network_for(cfg, SimpleNamespace(obs_shape=obs_shape, n_actions=n_actions))


def test_lstm_unroll_gives_the_outputs_of_stepping_one_step_at_a_time():
    torch.manual_seed(0)
    net = _lstm()
    assert isinstance(net, RecurrentActorCritic) and net.lstm.hidden_size == 256  # the paper's 256 cells
    ff = network_for(Config(game="CartPoleNoVel-v1"), SimpleNamespace(obs_shape=(2,), n_actions=3))
    assert is_recurrent(net) and not is_recurrent(ff)
    obs, state = torch.randn(3, 5, 2), (torch.randn(3, 256), torch.randn(3, 256))
    logits, values = net.unroll(obs, state)
    assert logits.shape == (3, 5, 3) and values.shape == (3, 5)
    for t in range(5):
        step_logits, step_values, state = net(obs[:, t], state)
        torch.testing.assert_close(step_logits, logits[:, t])
        torch.testing.assert_close(step_values, values[:, t])


def test_lstm_remembers_and_starts_from_zeros():
    torch.manual_seed(0)
    net = _lstm()
    h0, c0 = net.initial_state(2)
    assert h0.shape == c0.shape == (2, 256) and not h0.any() and not c0.any()
    x = torch.randn(1, 2)
    _, _, after = net(x, net.initial_state(1))
    first, _, _ = net(x, net.initial_state(1))
    again, _, _ = net(x, after)
    assert not torch.allclose(first, again)  # the same observation after another one: another output


def test_lstm_on_pixels_sits_after_the_papers_torso():
    cfg = Config(game="Pong", net="lstm")
    net = network_for(cfg, SimpleNamespace(obs_shape=(4, 84, 84), n_actions=6))
    assert isinstance(net.torso, AtariTorso) and net.lstm.input_size == cfg.hidden
    logits, values, (h, c) = net(_frames(), net.initial_state(3))
    assert logits.shape == (3, 6) and values.shape == (3,) and h.shape == (3, 256)


def test_lstm_norm_bounds_the_cells_input_however_large_the_torsos_features_grow():
    torch.manual_seed(0)
    cfg = Config(game="Pong", net="lstm")
    spec = SimpleNamespace(obs_shape=(4, 84, 84), n_actions=6)
    plain, normed = network_for(cfg, spec), network_for(dataclasses.replace(cfg, lstm_norm=True), spec)
    assert set(normed.state_dict()) == set(plain.state_dict())  # no parameters: checkpoints load either way
    normed.load_state_dict(plain.state_dict())
    obs, state = _frames(), plain.initial_state(3)
    x = normed.features(obs)
    torch.testing.assert_close(x.mean(-1), torch.zeros(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(x.std(-1, correction=0), torch.ones(3), atol=0.05, rtol=0)  # eps 1e-5 of var 1e-3
    with torch.no_grad():  # the collapse: the torso's features grow a constant (docs/notebook/a3c-lstm.md)
        for net in (plain, normed):
            net.torso.fc[1].bias += 5.0
    grown = [net(obs, state)[0] for net in (plain, normed)]
    with torch.no_grad():
        for net in (plain, normed):
            net.torso.fc[1].bias += 15.0  # every feature positive: the same features, 15 larger
    larger = [net(obs, state)[0] for net in (plain, normed)]
    assert not torch.allclose(grown[0], larger[0], atol=1e-3)  # the plain cells' gates move with the constant
    torch.testing.assert_close(grown[1], larger[1], atol=1e-4, rtol=0)  # the normalized ones see the same input


def test_lstm_norm_eps_caps_the_gain_on_small_features_and_still_bounds_large_ones():
    torch.manual_seed(0)
    cfg = Config(game="Pong", net="lstm", lstm_norm=True)
    spec = SimpleNamespace(obs_shape=(4, 84, 84), n_actions=6)
    tight, floored = network_for(cfg, spec), network_for(dataclasses.replace(cfg, lstm_norm_eps=0.01), spec)
    floored.load_state_dict(tight.state_dict())
    obs = _frames()

    def input_std(net, scale):  # ReLU torso: scaling fc's weight and bias scales the features by `scale`
        probe = copy.deepcopy(net)
        with torch.no_grad():
            probe.torso.fc[1].weight *= scale
            probe.torso.fc[1].bias *= scale
            return float(probe.features(obs).std(-1, correction=0).mean())

    with torch.no_grad():
        sigma = float(tight.torso(obs).std(-1, correction=0).mean())  # 0.017 on these random frames
    for net, eps in ((tight, 1e-5), (floored, 0.01)):
        for scale in (1.0, 0.5, 0.1):  # std / sqrt(std^2 + eps): the gain is capped at 1 / sqrt(eps)
            expected = scale * sigma / math.sqrt((scale * sigma) ** 2 + eps)
            assert input_std(net, scale) == pytest.approx(expected, rel=0.05)
    assert input_std(tight, 0.5) > 0.9  # eps 1e-5 amplifies features that shrink back to std 1
    assert input_std(floored, 0.1) < 0.25 * input_std(floored, 0.5)  # eps 0.01 lets the loss see them shrink
    assert 0.95 < input_std(floored, 1000.0) <= 1.0  # large features: normalized as before


def test_continuous_actions_get_a_gaussian_head_for_ff_and_lstm():
    cfg = Config(game="Pendulum-v1", hidden=16, mlp_layers=1)
    spec = env_spec(cfg)
    assert spec.continuous and spec.n_actions == 1  # Pendulum's one torque
    torch.manual_seed(0)
    for net in (network_for(cfg, spec), network_for(dataclasses.replace(cfg, net="lstm"), spec)):
        assert isinstance(net.pi, GaussianHead)
        net.pi.variance.bias.data.fill_(-30.0)  # softplus(-30) ~ 1e-13: the floor keeps variances usable
        obs = torch.randn(5, 3)
        policy, values = net(obs) if not is_recurrent(net) else net(obs, net.initial_state(5))[:2]
        assert policy.shape == (5, 2, 1) and values.shape == (5,)
        assert (policy[:, 1] >= GaussianHead.MIN_VARIANCE).all()
    discrete = network_for(cfg, SimpleNamespace(obs_shape=(3,), n_actions=4))  # no `continuous`: logits
    assert isinstance(discrete.pi, torch.nn.Linear) and discrete.pi.out_features == 4


def test_policy_std_max_bounds_the_gaussian_and_its_entropy_bonus():
    """--policy-std-max: however far the entropy bonus pushes the head's output, the standard deviation stays
    below the bound (and keeps a gradient back); unbounded, the softplus grows with it."""
    from hogwild_dqn.distributions import log_prob_entropy

    cfg = Config(game="Pendulum-v1", hidden=16, mlp_layers=1)
    spec = env_spec(cfg)
    torch.manual_seed(0)
    bounded, free = network_for(dataclasses.replace(cfg, policy_std_max=1.0), spec), network_for(cfg, spec)
    assert bounded.pi.var_max == 1.0 and free.pi.var_max == 0.0
    for net in (bounded, free):
        net.pi.variance.bias.data.fill_(8.0)  # an output the entropy bonus has pushed up
        policy, _ = net(torch.randn(5, 3))
        var = policy[:, 1]
        _, entropy = log_prob_entropy(policy, torch.zeros(5, 1))
        entropy.sum().backward()
        assert net.pi.variance.bias.grad.abs().sum() > 0
        if net is bounded:
            assert (var <= 1.0 + GaussianHead.MIN_VARIANCE).all() and (var > 0.99).all()
        else:
            assert (var > 7.9).all()


def test_policy_std_init_learns_one_deviation_for_every_state():
    """--policy-std-init S: the standard deviation is one parameter per component, S at first, the same for
    every observation, and the loss's gradient reaches it (feed-forward and LSTM alike)."""
    from hogwild_dqn.distributions import log_prob_entropy

    cfg = Config(game="Pendulum-v1", hidden=16, mlp_layers=1, policy_std_init=0.5)
    for net in (network_for(cfg, env_spec(cfg)), network_for(dataclasses.replace(cfg, net="lstm"), env_spec(cfg))):
        assert not hasattr(net.pi, "variance") and net.pi.log_std.shape == (1,)
        obs = torch.randn(5, 3) * 10
        policy = net(obs)[0] if not is_recurrent(net) else net(obs, net.initial_state(5))[0]
        torch.testing.assert_close(policy[:, 1], torch.full((5, 1), 0.25 + GaussianHead.MIN_VARIANCE))
        log_prob, entropy = log_prob_entropy(policy, torch.zeros(5, 1))
        (log_prob.sum() + entropy.sum()).backward()
        assert net.pi.log_std.grad.abs().sum() > 0


def test_obs_norm_keeps_the_running_mean_and_variance_of_every_batch():
    norm = ObsNorm((3,))
    g = torch.Generator().manual_seed(0)
    batches = [torch.randn(n, 3, generator=g) * torch.tensor([1.0, 5.0, 0.1]) + 3 for n in (7, 1, 40)]
    for b in batches:
        norm.update(b)
    every = torch.cat(batches).double()
    assert norm.count.item() == 48
    torch.testing.assert_close(norm.mean, every.mean(0))
    torch.testing.assert_close(norm.var, every.var(0, unbiased=False))
    x = torch.tensor([[3.0, 3.0, 1000.0]])
    out = norm(x)
    assert out.dtype == torch.float32 and out[0, 2] == ObsNorm.CLIP  # far outliers are clipped
    assert torch.equal(x, torch.tensor([[3.0, 3.0, 1000.0]]))  # the input is not written into


def test_obs_normalize_puts_one_statistics_module_before_both_torsos():
    cfg = Config(game="Pendulum-v1", hidden=16, mlp_layers=1)
    spec = SimpleNamespace(obs_shape=(3,), n_actions=1, continuous=True)
    torch.manual_seed(0)
    plain = network_for(cfg, spec)
    torch.manual_seed(0)
    net = network_for(dataclasses.replace(cfg, obs_normalize=True), spec)
    assert net.torso.norm is net.value_torso.norm is obs_norm(net) and obs_norm(plain) is None
    for a, b in zip(plain.parameters(), net.parameters(), strict=True):  # the statistics add no weights
        torch.testing.assert_close(a, b)
    net.torso.norm.update(torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]))
    assert {"torso.norm.mean", "value_torso.norm.mean"} <= set(net.state_dict())  # saved with the weights
    torch.testing.assert_close(net.value_torso.norm.mean, torch.tensor([2.0, 2.0, 2.0], dtype=torch.float64))


def test_value_normalize_adds_return_statistics_that_scale_back_and_no_weights():
    cfg = Config(game="Pong", algo="ppo")
    spec = SimpleNamespace(obs_shape=(4, 84, 84), n_actions=6)
    torch.manual_seed(0)
    plain = network_for(cfg, spec)
    torch.manual_seed(0)
    net = network_for(dataclasses.replace(cfg, value_normalize=True), spec)
    norm = value_norm(net)
    assert isinstance(norm, ValueNorm) and value_norm(plain) is None and obs_norm(net) is None
    for a, b in zip(plain.parameters(), net.parameters(), strict=True):
        torch.testing.assert_close(a, b)
    assert {"value_norm.mean", "value_norm.var", "value_norm.count"} <= set(net.state_dict())
    returns = torch.tensor([[1.0, 3.0], [5.0, 7.0]])
    norm.update(returns.flatten())  # mean 4, variance 5
    assert norm.count.item() == 4 and norm.mean.item() == 4.0 and norm.var.item() == 5.0
    z = norm(returns)
    torch.testing.assert_close(z, (returns - 4) / math.sqrt(5 + 1e-8))
    torch.testing.assert_close(norm.denormalize(z), returns)


def test_frames_statistics_are_those_of_every_pixel_to_float32_precision():
    """Frames' batch sums are taken in float32 chunks (normalizers.RunningNorm.update): the same statistics as
    float64 over the whole batch, folded in over several batches."""
    norm = ObsNorm((2, 3, 3))
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, 256, (n, 2, 3, 3), generator=g, dtype=torch.uint8) for n in (37, 5, 100)]
    batches.append(torch.randint(240, 256, (50, 2, 3, 3), generator=g, dtype=torch.uint8))  # far from the mean
    for b in batches:
        norm.update(b)
    every = torch.cat(batches).double()
    torch.testing.assert_close(norm.mean, every.mean(0), rtol=0, atol=1e-4)
    torch.testing.assert_close(norm.var, every.var(0, unbiased=False), rtol=1e-6, atol=1e-3)


@pytest.mark.parametrize("flags", [dict(obs_normalize=True), dict(obs_standardize=True), dict(),
                                   dict(obs_normalize=True, torso="nature", hidden=512)])
def test_prepared_inputs_give_the_forward_of_the_frames(flags):
    """What the rollout learners do (their rollout's inputs prepared once) gives the network's forward of the uint8
    frames, to float32's rounding: the same convolution, its sums in another order."""
    cfg = dataclasses.replace(Config(game="Breakout", algo="ppo", init="orthogonal"), **flags)
    net = network_for(cfg, SimpleNamespace(obs_shape=(4, 84, 84), n_actions=4))
    frames = torch.cat([_frames(), _frames().flip(0) // 2])
    if obs_norm(net) is not None:
        obs_norm(net).update(frames)
    x = net.inputs(frames)
    assert x.is_contiguous(memory_format=torch.channels_last) and x.shape[1] == 4
    with torch.no_grad():
        for want, got in zip(net(frames), net.from_inputs(x), strict=True):
            assert torch.allclose(want, got, rtol=1e-4, atol=1e-5)


def test_obs_norm_of_channels_last_frames_is_that_of_the_same_frames_contiguous():
    """The channels-last path (the statistics put in the frames' memory order) computes what the plain one does."""
    norm = ObsNorm((4, 84, 84))
    frames = _frames()
    norm.update(frames)
    norm.var[0, 0, 0] = 0.0  # a pixel that never varied: its deviations are clipped
    channels_last = norm(frames.contiguous(memory_format=torch.channels_last))
    assert channels_last.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(channels_last, norm(frames))
    want = ((frames.double() - norm.mean) / torch.sqrt(norm.var + 1e-8)).clamp(-10, 10)
    assert torch.allclose(channels_last.double(), want, atol=1e-5)
