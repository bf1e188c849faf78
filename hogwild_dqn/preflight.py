"""The checks a run passes before any child starts, on one machine (runner.py) and on a cluster (cluster/: the driver
and each machine's pool): its processes fit in the memory the machine has available (check), and a replay method's
memories can ever hold --learning-starts (never_warm). The per-process figures were measured (USS, the memory a
process holds alone, and RSS) on the 2-core development machine with psutil (docs/usage.md, "Faults"); the buffers
are computed from the config."""

from __future__ import annotations

import dataclasses
import math

from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.networks import network_for
from hogwild_dqn.replay_memory import ReplayMemory

MIB = 2**20
PROCESS = 175 * MIB  # a worker's own memory with torch, gymnasium and the emulator loaded, before its games (USS
                     # 164-176 MiB: an idle evaluator, an A3C worker of one Atari game)
LIBRARIES = 215 * MIB  # the libraries' pages every process shares, counted once (RSS minus USS, 210-256 MiB)
ATARI_GAME = 3 * MIB  # one more Atari game in a worker (A3C, 1 -> 8 games: 174 -> 190 MiB)
VECTOR_GAME = MIB // 4
MINIBATCH_PEAK = 96 * MIB  # PPO: what a minibatch's forward and backward hold besides the rollout (activations,
                           # oneDNN's scratch, the allocator's free lists): 8-game Pong workers 308-380 MiB USS,
                           # 295 MiB without it
SCREEN_COPIES = 3  # the evaluator's GIF: the screens kept, their images and the encoder's (a CartPole
                   # evaluator with 500 steps of 300x200 screens: 648 MiB USS)


def network_bytes(cfg, spec) -> int:
    """One fp32 copy of the run's parameters. Their count is a polynomial in --hidden of degree two at most (the
    fixed convolutions, hidden x inputs or outputs, an MLP's or an LSTM's hidden x hidden), so three networks of
    1, 2 and 3 units give it exactly (Newton's differences) for any --hidden: a huge one is counted, never built
    (torch's meta device would build none either, but leaves a compiler cache in TMPDIR)."""
    def count(hidden: int) -> int:
        return sum(p.numel() for p in network_for(dataclasses.replace(cfg, hidden=hidden), spec).parameters())

    one, two, three = count(1), count(2), count(3)
    h = cfg.hidden
    return 4 * (one + (h - 1) * (two - one) + (h - 1) * (h - 2) // 2 * (three - 2 * two + one))


def worker_bytes(cfg, spec, net: int | None = None) -> int:
    """One worker: the process, its games, its network's local copy and gradients, and its algorithm's buffers
    (PPO's rollout with its prepared inputs and a minibatch; DQN's replay memory, full). `net`: network_bytes,
    where it is known."""
    games = cfg.envs_per_worker
    obs = math.prod(spec.obs_shape) * (1 if spec.is_atari else 4)
    net = net if net is not None else network_bytes(cfg, spec)
    total = PROCESS + games * (ATARI_GAME if spec.is_atari else VECTOR_GAME) + 2 * net
    algo = ALGORITHMS[cfg.algo]
    if algo.rollouts:  # PPO, Q(lambda): the rollout's observations, their prepared inputs, a minibatch of those
        prepared = math.prod(spec.obs_shape) * 4
        rows = games * cfg.t_max
        total += rows * (obs + prepared) + math.ceil(rows / cfg.minibatches) * prepared + MINIBATCH_PEAK
    if algo.replay:
        total += cfg.replay_size * ReplayMemory.bytes_per_transition(spec.obs_shape, spec.is_atari)
    return total


def fixed_bytes(cfg, spec, net: int | None = None) -> int:
    """The runner, the evaluator (with the screens of its best game's GIF), the shared libraries, and the shared
    network with its optimizer's statistics, the target network and the evaluator's copy (five copies at most)."""
    screen = 210 * 160 * 3 if spec.is_atari else 300 * 200 * 3  # vector tasks' screens as the GIF keeps them
    net = net if net is not None else network_bytes(cfg, spec)
    return 2 * PROCESS + LIBRARIES + cfg.video_steps * screen * SCREEN_COPIES + 5 * net


def check(cfg, spec, threads: int, available: int) -> str | None:
    """Why `threads` workers would not fit in `available` bytes (with a tenth of it left for the rest of the
    machine), saying how many would; None if they fit."""
    net = network_bytes(cfg, spec)
    room, fixed, each = 0.9 * available, fixed_bytes(cfg, spec, net), worker_bytes(cfg, spec, net)
    need = fixed + threads * each
    if need <= room:
        return None
    if 7 * net > room:  # not the workers: one worker's run would not fit either
        return (f"the network of --hidden {cfg.hidden:,} has {net // 4:,} parameters, about {7 * net / 2**30:,.1f} "
                f"GiB in the copies a run holds; {available / 2**30:.1f} GiB is available (--force starts it anyway)")
    fit = max(0, int((room - fixed) // each))
    replay = (f", {cfg.replay_size * ReplayMemory.bytes_per_transition(spec.obs_shape, spec.is_atari) / 2**30:,.1f} "
              f"GiB of it --replay-size {cfg.replay_size:,} transitions" if ALGORITHMS[cfg.algo].replay else "")
    return (f"--threads {threads} needs about {need / 2**30:,.1f} GiB of memory ({threads} workers x "
            f"{each / 2**30:,.2f} GiB{replay}, runner and evaluator {fixed / 2**30:.1f} GiB); "
            f"{available / 2**30:.1f} GiB is available: {fit} worker{'' if fit == 1 else 's'} fit (--force starts "
            "it anyway)")


def warm(memory_size: int, cfg, threads: int, frames_per_step: int) -> bool:
    """Whether a worker's own memory holds its share of --learning-starts (frames / threads), so that it may
    learn: counted in its memory, not in global frames, which a resumed or restarted worker passed long ago."""
    return memory_size * frames_per_step * threads >= cfg.learning_starts


FULL = 0.9  # a full memory holds under --replay-size: a game of L steps keeps L + (stacked) frames for its L
            # transitions, so short games (10 steps of a vector task) fill only some 0.9 of it


def never_warm(cfg, spec, threads: int) -> str | None:
    """Why the workers' memories could never hold --learning-starts (they would play every frame and learn from
    none, and the run would still end "finished"); None if they can, or the algorithm keeps no memory."""
    if not ALGORITHMS[cfg.algo].replay:
        return None
    room = int(FULL * cfg.replay_size) * spec.frames_per_step * threads
    if warm(int(FULL * cfg.replay_size), cfg, threads, spec.frames_per_step):
        return None
    return (f"--learning-starts {cfg.learning_starts:,} frames is more than {threads} replay memor"
            f"{'y' if threads == 1 else 'ies'} of --replay-size {cfg.replay_size:,} transitions can be relied on to "
            f"hold ({room:,} frames): the workers would never learn; lower --learning-starts or raise --replay-size")
