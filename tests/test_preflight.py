"""The memory check before a run starts: the expected memory of its processes (measured figures and computed
buffers), refused with how many workers fit, --force to start anyway; and what a real PPO worker holds, held
against the estimate."""

import json
import time
from pathlib import Path

import pytest

from hogwild_dqn import preflight as memory
from hogwild_dqn.config import Config
from hogwild_dqn.envs import env_spec
from hogwild_dqn.replay_memory import ReplayMemory
from tests.conftest import run_train, spawned_children, start_train

GIB = 2**30


def test_the_estimate_grows_with_workers_games_rollouts_and_replay():
    ppo = Config(game="Pong", algo="ppo", envs_per_worker=8, t_max=128)
    spec = env_spec(ppo)
    each = memory.worker_bytes(ppo, spec)
    rollout = 8 * 128 * 4 * 84 * 84 * (1 + 4)  # uint8 observations and their float32 inputs
    net = memory.network_bytes(ppo, spec)
    assert net == 4 * 677_943  # the A3C paper's torso and 256 units: 0.68M parameters, each worker's copy and grads
    assert each == (memory.PROCESS + 8 * memory.ATARI_GAME + rollout + 256 * 4 * 84 * 84 * 4 + memory.MINIBATCH_PEAK
                    + 2 * net)
    dqn = Config(game="Pong", algo="dqn", replay_size=100_000)
    assert memory.worker_bytes(dqn, spec) == (memory.PROCESS + memory.ATARI_GAME + 2 * memory.network_bytes(dqn, spec)
                                              + 100_000 * ReplayMemory.bytes_per_transition((4, 84, 84), True))
    assert memory.check(ppo, spec, 2, 24 * GIB) is None
    why = memory.check(ppo, spec, 200, 24 * GIB)
    fit = int((0.9 * 24 * GIB - memory.fixed_bytes(ppo, spec)) // each)
    assert why.startswith(f"--threads 200 needs about {(memory.fixed_bytes(ppo, spec) + 200 * each) / GIB:,.1f} GiB")
    assert why.endswith(f"24.0 GiB is available: {fit} workers fit (--force starts it anyway)") and 0 < fit < 200


def test_a_real_ppo_workers_memory_is_within_the_estimate(tmp_path):
    """Two real PPO Pong workers of 8 games, after their first rollouts and updates: each holds (USS, memory of
    its own) no more than the estimate, and at least half of it: the estimate refuses runs that would not fit,
    not runs that would."""
    proc = start_train(tmp_path / "run", "--game", "Pong", "--algo", "ppo", "--threads", 2, "--frames", 10**9,
                       "--eval-every", 10**8)
    cfg = Config(game="Pong", algo="ppo", envs_per_worker=8, t_max=128)
    expected = memory.worker_bytes(cfg, env_spec(cfg))
    workers = spawned_children(proc.pid)[:2]
    held = []
    for _ in range(6):  # after the first rollouts every buffer is allocated; a minibatch's peak comes and goes
        time.sleep(10)
        held += [p.memory_full_info().uss for p in workers]
    proc.terminate()
    proc.wait(60)
    assert all(0.5 * expected <= uss <= expected for uss in held[2:]), (held, expected)


def test_a_network_too_large_for_the_machine_is_refused_before_anything_starts(tmp_path):
    """--hidden 1e8 on CartPole: 2e16 parameters, counted without being built, refused in one line (it was the
    allocator's traceback, after the run dir was made)."""
    proc = run_train("--game", "CartPole-v1", "--hidden", "100000000", "--run-dir", tmp_path / "run", timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("train.py: error: the network of --hidden 100,000,000 has 20,000,001,500,000,003 "
                                  "parameters, about 521,540,680.9 GiB in the copies a run holds; ")
    assert not (tmp_path / "run").exists()


def test_too_many_workers_are_refused_before_anything_starts_and_force_starts_them(tmp_path):
    proc = run_train("--game", "Pong", "--algo", "ppo", "--threads", 5000, "--run-dir", tmp_path / "run", timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "train.py: error: --threads 5000 needs about" in proc.stderr and "workers fit (--force" in proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(Path("/proc/sys/vm/overcommit_memory").exists()
                    and Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "2",
                    reason="strict overcommit: the replay memory's untouched pages would count")
def test_force_starts_a_run_the_estimate_refuses(tmp_path):
    """A replay memory of 10^9 CartPole transitions (49 GB if filled) is refused; with --force the run starts and
    finishes: its 3,000 frames touch a few pages of it."""
    args = ["--game", "CartPole-v1", "--algo", "dqn", "--threads", 1, "--frames", 3000, "--eval-every", 3000,
            "--replay-size", 10**9, "--final-eval-episodes", 2]
    refused = run_train(*args, "--run-dir", tmp_path / "refused", timeout=120)
    assert refused.returncode == 2 and "workers fit (--force starts it anyway)" in refused.stderr, refused.stderr
    forced = run_train(*args, "--force", "--run-dir", tmp_path / "forced", timeout=300)
    assert forced.returncode == 0, forced.stderr[-2000:]
    assert json.loads((tmp_path / "forced" / "summary.json").read_text())["frames"] >= 3000
