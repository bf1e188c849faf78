"""The Hogwild contract: the shared optimizer's maths, and updates made in real child processes."""

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from torch import nn

from hogwild_dqn.config import Config
from hogwild_dqn.networks import network_for
from hogwild_dqn.processes import run_child
from hogwild_dqn.shared import (
    SharedAdam,
    SharedRAdam,
    SharedRMSprop,
    add_frames,
    build_shared,
    maybe_sync_target,
    push_gradients,
    sync_local,
    target_epoch_due,
)


def reference_rmsprop(p, grads, lr, alpha, eps):
    """The paper's update written out in numpy: g = a g + (1-a) d^2; p -= lr d / sqrt(g + eps)."""
    p, g = np.array(p, dtype=np.float64), np.zeros(len(p))
    for d in grads:
        d = np.array(d, dtype=np.float64)
        g = alpha * g + (1 - alpha) * d * d
        p = p - lr * d / np.sqrt(g + eps)
    return p


def test_shared_rmsprop_first_step_by_hand():
    p = nn.Parameter(torch.tensor([1.0, -2.0]))
    opt = SharedRMSprop([p], alpha=0.99, eps=0.1)
    opt.step([torch.tensor([0.5, 0.1])], lr=0.01)
    # g = 0.01 * [0.25, 0.01]; p = [1 - .01*.5/sqrt(.1025), -2 - .01*.1/sqrt(.1001)]
    assert p.tolist() == pytest.approx([0.98438262, -2.00316070], abs=1e-7)
    assert opt.square_avg[0].tolist() == pytest.approx([0.0025, 0.0001])


def test_shared_rmsprop_matches_reference_over_steps():
    p = nn.Parameter(torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64))
    opt = SharedRMSprop([p], alpha=0.99, eps=0.1)
    grads = [[0.5, 0.1, -3.0], [-0.2, 0.4, 1.0], [1.5, -0.7, 0.0]]
    for d in grads:
        opt.step([torch.tensor(d, dtype=torch.float64)], lr=7e-4)
    assert p.tolist() == pytest.approx(reference_rmsprop([1.0, -2.0, 0.5], grads, 7e-4, 0.99, 0.1).tolist())


@pytest.mark.parametrize("eps", [1e-5, 1e-8])
def test_shared_adam_equals_torch_adam_step_for_step(eps):
    """200 steps of small gradients (where eps matters most: eps is added after the bias correction, as torch adds
    it; before it, it would be ~30x torch's effective eps at the first steps), in float64: equal to torch's Adam to
    1e-12 after every step."""
    gen = torch.Generator().manual_seed(0)
    a = [nn.Parameter(torch.randn(5, 3, generator=gen, dtype=torch.float64)),
         nn.Parameter(torch.randn(3, generator=gen, dtype=torch.float64))]
    b = [nn.Parameter(p.detach().clone()) for p in a]
    mine, ref = SharedAdam(a, (0.9, 0.999), eps), torch.optim.Adam(b, lr=1e-3, betas=(0.9, 0.999), eps=eps)
    for step in range(200):
        grads = [torch.randn(p.shape, generator=gen, dtype=torch.float64) * 1e-5 * (1 + step % 7) for p in a]
        mine.step(grads, lr=1e-3)
        for p, g in zip(b, grads, strict=True):
            p.grad = g.clone()
        ref.step()
        for p, q in zip(a, b, strict=True):
            torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("eps", [1e-8, 1e-5])
def test_shared_radam_equals_torch_radam_step_for_step(eps):
    """The rectified steps (from the sixth on) and the momentum-only ones before them, as torch's RAdam takes."""
    gen = torch.Generator().manual_seed(0)
    a = [nn.Parameter(torch.randn(5, 3, generator=gen, dtype=torch.float64)),
         nn.Parameter(torch.randn(3, generator=gen, dtype=torch.float64))]
    b = [nn.Parameter(p.detach().clone()) for p in a]
    mine, ref = SharedRAdam(a, (0.9, 0.999), eps, workers=2), torch.optim.RAdam(b, lr=1e-3, betas=(0.9, 0.999), eps=eps)
    for step in range(50):
        grads = [torch.randn(p.shape, generator=gen, dtype=torch.float64) * 1e-3 * (1 + step % 7) for p in a]
        mine.step(grads, lr=1e-3, rank=step % 2)  # two workers' pushes: their counts add up to torch's step
        for p, g in zip(b, grads, strict=True):
            p.grad = g.clone()
        ref.step()
        for p, q in zip(a, b, strict=True):
            torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=1e-12)


def test_shared_adam_keeps_its_step_count_across_a_resume_with_other_workers():
    a, b = [nn.Parameter(torch.ones(2))], [nn.Parameter(torch.ones(2))]
    one = SharedAdam(a, (0.9, 0.999), 1e-8, workers=3)
    for rank in (0, 1, 2, 2):
        one.step([torch.ones(2)], lr=1e-3, rank=rank)
    assert one.steps.tolist() == [1, 1, 2]
    other = SharedAdam(b, (0.9, 0.999), 1e-8, workers=2)
    other.load_state_dict(one.state_dict())
    assert int(other.steps.sum()) == 4


def _child_adam_steps(shared, rank, steps):
    torch.set_num_threads(1)
    for _ in range(steps):
        shared.optimizer.step([torch.full_like(p, 0.1) for p in shared.model.parameters()], lr=1e-4, rank=rank)


def test_shared_adam_step_count_loses_no_update_across_processes():
    """Three processes pushing at once: t is exactly the updates pushed (one counter per worker, no race)."""
    ctx = mp.get_context("spawn")
    shared = build_shared(nn.Linear(2, 2), None, Config(optimizer="adam"), 3)
    procs = [ctx.Process(target=_child_adam_steps, args=(shared, r, 3000)) for r in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    assert shared.optimizer.steps.tolist() == [3000, 3000, 3000]
    assert float(shared.optimizer.state_dict()["steps"][0]) == 9000


def test_optimizer_state_is_in_shared_memory():
    net = nn.Linear(3, 2)
    shared = build_shared(net, None, Config(optimizer="rmsprop", rms_alpha=0.99, rms_eps=0.1), 3)
    assert all(p.is_shared() for p in net.parameters())
    assert all(t.is_shared() for t in shared.optimizer.square_avg)


def test_no_stale_gradient_after_zero_grad_sets_none():
    """Two pushes with different gradients apply exactly those two, even though zero_grad() sets None."""
    torch.manual_seed(0)
    shared_net, local = nn.Linear(2, 1, bias=False), nn.Linear(2, 1, bias=False)
    shared = build_shared(shared_net, None, Config(optimizer="rmsprop", rms_alpha=0.99, rms_eps=0.1), 3)
    start = shared_net.weight.detach().clone().flatten().tolist()
    grads = []
    for x in ([1.0, 2.0], [-3.0, 0.5]):
        sync_local(list(local.parameters()), list(shared_net.parameters()))
        local.zero_grad(set_to_none=True)
        local(torch.tensor(x)).sum().backward()  # d/dw of w.x is x
        grads.append(x)
        push_gradients(list(local.parameters()), shared, 0, lr=0.01, grad_clip=0)
    expected = reference_rmsprop(start, grads, 0.01, 0.99, 0.1)
    assert shared_net.weight.flatten().tolist() == pytest.approx(expected.tolist(), abs=1e-6)
    assert shared.worker_updates.tolist() == [2, 0, 0]  # worker 0's own counter, nobody else's


def _child_step(shared, grad_value, steps):
    torch.set_num_threads(1)
    for _ in range(steps):
        shared.optimizer.step([torch.full_like(p, grad_value) for p in shared.model.parameters()], lr=0.01)


def test_child_process_updates_land_in_parent_tensors():
    ctx = mp.get_context("spawn")
    net = nn.Linear(2, 2)
    shared = build_shared(net, None, Config(optimizer="rmsprop", rms_alpha=0.99, rms_eps=0.1), 3)
    start = [p.detach().clone().flatten().tolist() for p in net.parameters()]
    for grad_value in (1.0, -0.5):  # one child after the other, so the result is deterministic
        p = ctx.Process(target=_child_step, args=(shared, grad_value, 3))
        p.start()
        p.join(timeout=60)
        assert p.exitcode == 0
    grads = [[1.0] * 4] * 3 + [[-0.5] * 4] * 3
    expected = reference_rmsprop(start[0], grads, 0.01, 0.99, 0.1)
    assert net.weight.flatten().tolist() == pytest.approx(expected.tolist(), abs=1e-6)
    assert shared.optimizer.square_avg[0].abs().sum() > 0  # the statistics are shared too


def _child_decay(shared, steps):
    for _ in range(steps):  # zero gradients: the statistics only decay, as those of a dead unit do
        shared.optimizer.step([torch.zeros_like(p) for p in shared.model.parameters()], lr=0.01)


def test_statistics_of_dead_units_decay_to_zero_not_to_denormals():
    ctx = mp.get_context("spawn")
    net = nn.Linear(2, 2)
    shared = build_shared(net, None, Config(optimizer="adam", rms_alpha=0.99, rms_eps=0.1), 1)
    for m in shared.optimizer.exp_avg:
        m.fill_(1e-30)
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=run_child, args=("child", send, _child_decay, shared, 400))
    p.start()
    p.join(timeout=60)
    assert p.exitcode == 0, recv.recv() if recv.poll() else p.exitcode
    m = shared.optimizer.exp_avg[0]  # 1e-30 * 0.9**400 = 5e-49 is below float32's normal range (1.2e-38)
    assert (m == 0).all(), m


def _child_count_frames(shared, rank, calls, n, interval, out):
    torch.set_num_threads(1)
    copies, frames = [], 0
    for _ in range(calls):
        with torch.no_grad():
            for p in shared.model.parameters():
                p.add_(1.0)  # the model keeps changing under the copies, as in training
        frames = add_frames(shared, rank, n)
        if rank == 0 and maybe_sync_target(shared, frames, interval):
            copies.append(frames)
    out.put((rank, copies, frames))


def test_frames_count_and_target_sync_once_per_interval_reached_across_processes():
    ctx = mp.get_context("spawn")
    shared = build_shared(nn.Linear(2, 2), nn.Linear(2, 2), Config(optimizer="rmsprop"), 3)
    out = ctx.Queue()
    procs = [ctx.Process(target=_child_count_frames, args=(shared, r, 3000, 7, 100, out)) for r in range(3)]
    for p in procs:
        p.start()
    reports = dict((r, (c, f)) for r, c, f in (out.get(timeout=120) for _ in procs))
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert shared.worker_frames.tolist() == [21000, 21000, 21000] and shared.frames() == 63000
    copies, last_seen = reports[0]
    # a copy only on entering an interval not yet copied (intervals the others crossed between worker 0's calls
    # are one copy), and after its last call the target is that of the last frames worker 0 saw
    intervals = [f // 100 for f in copies]
    # worker 0's own 7 frames a call put at most 15 of its calls in one interval: at least 3000 / 15 copies
    assert intervals == sorted(set(intervals)) and len(copies) >= 200
    assert int(shared.target_epoch[0]) == last_seen // 100
    behind = last_seen // 100 < 630  # the others crossed an interval after worker 0's last call
    assert maybe_sync_target(shared, shared.frames(), 100) == behind  # worker 0's catch-up as it stops
    assert not maybe_sync_target(shared, shared.frames(), 100)  # never twice for one interval
    assert int(shared.target_epoch[0]) == 630 and torch.equal(shared.target.weight, shared.model.weight)


def test_one_target_rule_and_one_parameter_copy_for_a_machine_and_a_cluster_holder():
    """The cluster's holder copies its target by the single machine's rule (shared.target_epoch_due), and its
    flat vectors land in parameters through the single machine's copy (sync_local): the same intervals copied,
    the same values, in place."""
    from hogwild_dqn.cluster.actors import ParameterHolder, _assign, _flat
    from hogwild_dqn.envs import env_spec

    assert [target_epoch_due(f, 100, 0) for f in (0, 99, 100, 250)] == [None, None, 1, 2]
    assert target_epoch_due(250, 100, 2) is None and target_epoch_due(300, 100, 2) == 3

    cfg = Config(game="CartPole-v1", algo="q1", target_update=100)
    spec = env_spec(cfg)
    shared = build_shared(*(network_for(cfg, spec) for _ in range(2)), cfg, 1)
    holder = object.__new__(ParameterHolder)  # its exchange alone, without a run dir and tensorboard writer
    holder.cfg, holder.frames, holder.target_epoch, holder.node_frames, holder.stop = cfg, 0, 0, {}, False
    holder.flat = _flat(list(shared.model.parameters())).clone()
    holder.target = holder.flat.clone()
    holder.stats = torch.zeros(0, dtype=torch.float64)  # no running statistics in this network
    for frames in (60, 60, 60, 130, 30, 200):
        delta = np.full(holder.flat.numel(), 0.01, dtype=np.float32)
        reply = holder.exchange("n0", delta, frames, -1, None, np.zeros(0))
        _assign(list(shared.model.parameters()), reply["weights"])  # what a machine's bridge does
        copied = maybe_sync_target(shared, holder.frames, cfg.target_update)
        assert holder.target_epoch == int(shared.target_epoch[0]) == holder.frames // 100
        assert torch.equal(_flat(list(shared.target.parameters())), holder.target), (frames, copied)


def test_a_cluster_holder_keeps_a_bounded_window_of_sync_times(tmp_path, monkeypatch):
    """The holder keeps machines' sync times for its summary's median: the last SYNC_WINDOW of them, so a run of
    days on many machines does not grow it by one float an exchange; the count of exchanges stays whole."""
    import json
    import math

    from hogwild_dqn.cluster import actors as cluster_actors
    from hogwild_dqn.cluster.actors import ParameterHolder
    from hogwild_dqn.envs import env_spec

    monkeypatch.setattr(cluster_actors, "SYNC_WINDOW", 50)
    cfg = Config(game="CartPole-v1", algo="a3c")
    start = {"model": None, "target": None, "frames": 0, "target_epoch": 0, "evals": [], "best": -math.inf,
             "wall_seconds": 0.0, "lr_start": None}
    holder = ParameterHolder(cfg, env_spec(cfg), str(tmp_path), start)
    zero = np.zeros(holder.flat.numel(), dtype=np.float32)
    for k in range(120):
        holder.exchange("n0", zero, 10, -1, 0.001 * k, np.zeros(len(holder.stats)))
    summary = holder.finish("finished", ["n0"])
    assert list(holder.sync_seconds) == [0.001 * k for k in range(70, 120)]
    assert summary["cluster"]["syncs"] == 120 and summary["cluster"]["sync_seconds_median"] == 0.001 * 95
    assert json.loads((tmp_path / "summary.json").read_text())["cluster"]["syncs"] == 120
