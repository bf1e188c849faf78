"""PPO's updates in bfloat16: the CPU's features read from /proc/cpuinfo, the choice of --learner-precision, and a
fixed batch whose loss and gradients in bfloat16 match float32's within a stated tolerance."""

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from hogwild_dqn.algorithms.ppo import Minibatch, ppo_loss
from hogwild_dqn.config import Config
from hogwild_dqn.networks import network_for
from hogwild_dqn.normalizers import obs_norm
from hogwild_dqn.precision import learner_bf16, native_bf16

FLAGS = "flags\t\t: fpu vme sse sse2 avx2 avx512f avx512bw {}\nbugs\t\t: spectre_v1\n"


@pytest.mark.parametrize("extra, want", [("avx512_bf16 avx512_vnni", "avx512_bf16"),
                                         ("avx512_bf16 amx_bf16 amx_tile", "amx_bf16"), ("avx512_vnni", None)])
def test_native_bf16_reads_the_cpus_flags(tmp_path, extra, want):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\n" + FLAGS.format(extra) * 2)
    assert native_bf16(str(cpuinfo)) == want
    assert native_bf16(str(tmp_path / "absent")) is None  # not Linux: float32


def test_auto_takes_bf16_on_pixels_only_where_the_cpu_has_it(monkeypatch):
    import hogwild_dqn.precision as precision

    for native, pixels, want in [("amx_bf16", True, True), ("avx512_bf16", True, True), (None, True, False),
                                 ("amx_bf16", False, False)]:
        monkeypatch.setattr(precision, "native_bf16", lambda native=native: native)
        assert learner_bf16("auto", pixels) is want
    assert learner_bf16("bf16", False) and not learner_bf16("fp32", True)
    cfg = Config(game="Breakout", algo="ppo", learner_precision="auto")
    monkeypatch.setattr(precision, "native_bf16", lambda: None)
    assert cfg.update_precision() == "fp32"
    monkeypatch.setattr(precision, "native_bf16", lambda: "amx_bf16")
    assert cfg.update_precision() == "bf16 (amx_bf16)"


def _loss_and_gradients(net, frames, batch, bf16: bool) -> tuple[float, list[torch.Tensor]]:
    """One minibatch's PPO loss and gradients: from the uint8 frames in float32, or as the learner runs bf16
    (the inputs prepared in blocks, in bfloat16)."""
    net.zero_grad(set_to_none=True)
    if bf16:
        out = net(net.inputs(frames, blocks=True).to(torch.bfloat16), prepared=True, bf16=True)
    else:
        out = net(frames)
    loss, _ = ppo_loss(out, batch, clip=0.1, value_coef=0.5, entropy_beta=0.01, clip_value=True)
    loss.backward()
    return float(loss.detach()), [p.grad.clone() for p in net.parameters()]


@pytest.mark.parametrize("torso, hidden", [("paper", 256), ("nature", 512)])
def test_bf16_updates_match_float32_within_the_stated_tolerance(torso, hidden):
    """A fixed minibatch of 256 Breakout-like frames, with a policy and a value that are not uniform: in bfloat16
    the loss is within 0.5% of float32's, every parameter's gradient within 20% of float32's (relative error of
    the whole tensor; 0.4-14% seen) at cosine similarity above 0.98, and at most a fifth of the difference
    between the float32 gradients of two minibatches of other rows (65-245% seen): bfloat16's rounding is far
    smaller than the noise of sampling a minibatch. The heads, log-probabilities and loss stay float32
    (networks.ActorCritic.forward); bfloat16 keeps 8 bits of mantissa."""
    torch.manual_seed(0)
    cfg = dataclasses.replace(Config(game="Breakout", algo="ppo", init="orthogonal", obs_normalize=True),
                              torso=torso, hidden=hidden)
    net = network_for(cfg, SimpleNamespace(obs_shape=(4, 84, 84), n_actions=4))
    with torch.no_grad():  # a policy that is not uniform, a value that is not 0
        net.pi.weight.normal_(0, 0.05)
        net.v.weight.normal_(0, 0.05)
    g = torch.Generator().manual_seed(1)
    frames = torch.randint(0, 60, (512, 4, 84, 84), dtype=torch.uint8, generator=g)
    frames[:, :, 40:50, 20:60] += torch.randint(100, 190, (512, 1, 1, 1), dtype=torch.uint8, generator=g)  # a paddle
    obs_norm(net).update(frames)
    with torch.no_grad():
        policy, values = net(frames)
    actions = torch.randint(0, 4, (512,), generator=g)
    old_log_probs = torch.log_softmax(policy, -1)[torch.arange(512), actions] + 0.05 * torch.randn(512, generator=g)
    batch = Minibatch(actions, old_log_probs, values + 0.02 * torch.randn(512, generator=g),
                      torch.randn(512, generator=g), values + torch.randn(512, generator=g))
    first, other = (slice(0, 256), slice(256, 512))
    loss32, grads32 = _loss_and_gradients(net, frames[first], batch.rows(first), bf16=False)
    loss16, grads16 = _loss_and_gradients(net, frames[first], batch.rows(first), bf16=True)
    _, grads_other = _loss_and_gradients(net, frames[other], batch.rows(other), bf16=False)
    assert abs(loss16 - loss32) <= 0.005 * abs(loss32)
    for (name, _), a, b, c in zip(net.named_parameters(), grads32, grads16, grads_other, strict=True):
        err, sampling = float((a - b).norm() / a.norm()), float((a - c).norm() / a.norm())
        cos = float(torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0))
        assert err < 0.2 and cos > 0.98 and err < sampling / 5, (name, err, cos, sampling)
