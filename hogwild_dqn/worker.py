"""One actor-learner: sync -> act t_max steps in each of its games -> one loss -> push gradients -> count frames."""

from __future__ import annotations

import functools
import math
import os
from typing import NamedTuple

import numpy as np
import torch

from hogwild_dqn import metrics
from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.algorithms.returns import Segment
from hogwild_dqn.envs import make_env
from hogwild_dqn.exploration import draw_final_epsilon, epsilon, learning_rate
from hogwild_dqn.networks import gaussian, is_recurrent, network_for, obs_norm
from hogwild_dqn.replay_worker import run_replay_worker
from hogwild_dqn.rundir import Run
from hogwild_dqn.shared import (
    STOP,
    NonFinite,
    SharedState,
    add_frames,
    claim_exploration,
    maybe_sync_target,
    push_gradients,
    run_child,
    sync_local,
)


def worker_process(rank: int, seed: int, run: Run, shared: SharedState, report) -> None:
    """Process entry point (spawn); failures go up `report`, a pipe to the runner. A replay method has a loop
    of its own (replay_worker.py)."""
    loop = run_replay_worker if ALGORITHMS[run.cfg.algo].replay else run_worker
    run_child(f"worker{rank}", report, loop, rank, seed, run, shared)


def sample(policy: torch.Tensor, rng: np.random.Generator) -> list:
    """One action per row, drawn with the worker's own generator: an index from softmax logits (rows, actions),
    or a vector of floats from a Gaussian's (mean, variance) (rows, 2, components), unclipped (the env clips)."""
    if (normal := gaussian(policy)) is not None:
        mean, var = (t.numpy() for t in normal)
        if not (np.isfinite(mean).all() and np.isfinite(var).all()):
            raise NonFinite("non-finite policy while acting")
        return (mean + np.sqrt(var) * rng.standard_normal(mean.shape)).tolist()
    cdf = torch.softmax(policy, dim=1).cumsum(1).numpy()
    if not np.isfinite(cdf[:, -1]).all():
        raise NonFinite("non-finite policy while acting")
    u = rng.random(len(cdf)) * cdf[:, -1]
    return np.minimum((cdf <= u[:, None]).sum(1), cdf.shape[1] - 1).tolist()


def act_many(net: torch.nn.Module, obs: torch.Tensor, eps: float, actor_critic: bool,
             rng: np.random.Generator) -> list:
    """Sample from the policy (A3C) or act epsilon-greedily on Q (value-based methods), one batched forward."""
    if actor_critic:
        with torch.inference_mode():
            return sample(net(obs)[0], rng)
    n_actions = net.q.out_features
    out = [int(rng.integers(n_actions)) if rng.random() < eps else -1 for _ in range(len(obs))]
    greedy = [i for i, a in enumerate(out) if a < 0]
    if greedy:  # no forward at all when every game explores this step
        with torch.inference_mode():
            best = net(obs[greedy] if len(greedy) < len(out) else obs).argmax(1).tolist()
        for i, a in zip(greedy, best, strict=True):
            out[i] = a
    return out


class GameStates:
    """--net lstm: the recurrent state (h, c) of each of a worker's games, carried from step to step and across
    segments; zeroed when that game ends (terminated or truncated). A lost life that ends the return (Atari,
    training only) keeps it, since the game goes on, as it does in evaluation."""

    def __init__(self, net: torch.nn.Module, games: int):
        self.h, self.c = net.initial_state(games)

    @torch.no_grad()
    def act(self, net: torch.nn.Module, rows: list[int], obs: torch.Tensor, rng: np.random.Generator) -> list:
        """Step the games `rows` on their observations `obs`: sample their actions and keep their new states."""
        policy, _, (self.h[rows], self.c[rows]) = net(obs, (self.h[rows], self.c[rows]))
        return sample(policy, rng)

    def start(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The states at a segment's start, for the loss: a copy, so the gradient stops there (truncated BPTT)."""
        return self.h.clone(), self.c.clone()

    def end_game(self, k: int) -> None:
        self.h[k], self.c[k] = 0.0, 0.0


def env_seed(seed: int, k: int) -> int:
    """Game k of a worker: game 0 keeps the worker's seed, the others get independent ones."""
    return seed if k == 0 else int(np.random.SeedSequence([seed, k]).generate_state(1)[0])


def run_worker(rank: int, seed: int, run: Run, shared: SharedState) -> None:
    """The worker loop; runs inline too (tests, debuggers)."""
    cfg, spec = run.cfg, run.spec
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    algo = ALGORITHMS[cfg.algo]
    actor_critic = algo.actor_critic
    loss_fn = functools.partial(algo.loss, gamma=cfg.gamma, entropy_beta=cfg.entropy_beta, value_coef=cfg.value_coef)
    final_eps = claim_exploration(shared, rank, seed, lambda: draw_final_epsilon(rng, cfg.eps_finals, cfg.eps_probs))
    E = cfg.envs_per_worker
    envs = [make_env(cfg, env_seed(seed, k), for_eval=False) for k in range(E)]
    local = network_for(cfg, spec)
    states = GameStates(local, E) if is_recurrent(local) else None

    def act(rows: list[int], obs: torch.Tensor) -> list:
        """The actions of games `rows` (an LSTM steps their states too), with this segment's epsilon."""
        if states is not None:
            return states.act(local, rows, obs, rng)
        return act_many(local, obs, eps, actor_critic, rng)

    params, shared_params = list(local.parameters()), list(shared.model.parameters())
    shared_norm = obs_norm(shared.model)  # --obs-normalize: every worker's observations make its statistics
    # what a sync copies: the weights, and the observation statistics (buffers) where there are such
    synced, shared_synced = params + list(local.buffers()), shared_params + list(shared.model.buffers())
    writer = metrics.make_writer(run.run_dir, f"worker{rank}")

    # Preallocated segment buffers, one row per game: obs[k, t] is s_t, obs[k, t+1] the state after a_t.
    T = cfg.t_max
    obs_buf = torch.zeros((E, T + 1, *spec.obs_shape), dtype=torch.uint8 if spec.is_atari else torch.float32)
    actions = (torch.zeros((E, T + 1, spec.n_actions)) if spec.continuous  # a vector of floats per step
               else torch.zeros((E, T + 1), dtype=torch.long))
    to_env = (lambda a: a.numpy().copy()) if spec.continuous else int  # a copy: the buffer is reused
    rewards = torch.zeros((E, T))
    terminated = torch.zeros((E, T), dtype=torch.bool)
    truncated = torch.zeros((E, T), dtype=torch.bool)
    rollout = Rollout(obs_buf, actions, rewards, terminated, truncated)  # views of the same buffers

    for k, env in enumerate(envs):
        obs, _ = env.reset()  # make_env seeded it: the first game, without a second ROM load
        obs_buf[k, 0] = torch.as_tensor(np.asarray(obs))
    frames = shared.frames()
    carry = [False] * E  # SARSA carries a' (used in its target) into the next segment as the action taken
    updates, sums = 0, {}
    parent = os.getppid()  # if the runner is killed outright, this changes and the worker stops by itself
    try:
        while not shared.is_set(STOP) and frames < cfg.frames and os.getppid() == parent:
            sync_local(synced, shared_synced)
            eps = epsilon(frames, cfg.eps_start, final_eps, cfg.eps_anneal_frames)
            if states is not None:
                rollout = rollout._replace(state0=states.start())
            fresh = [k for k in range(E) if not carry[k]]
            if fresh:
                actions[fresh, 0] = torch.tensor(act(fresh, obs_buf[fresh, 0]))

            # --- act: up to t_max steps in every game; a game whose episode ends sits out the rest of the segment
            n, live, life_lost = [0] * E, list(range(E)), [False] * E
            for t in range(T):
                for k in live:
                    obs, r, term, trunc, info = envs[k].step(to_env(actions[k, t]))
                    obs_buf[k, t + 1] = torch.as_tensor(np.asarray(obs))
                    rewards[k, t], terminated[k, t], truncated[k, t] = float(r), bool(term), bool(trunc)
                    n[k], life_lost[k] = t + 1, bool(info.get("life_lost"))
                    if "episode" in info:
                        metrics.log_episode(writer, rank, info["episode"], frames, spec.frames_per_step)
                live = [k for k in live if not (terminated[k, t] or truncated[k, t])]
                if t + 1 < T and live:  # the action in the segment's last state is chosen after the next sync
                    actions[live, t + 1] = torch.tensor(act(live, obs_buf[live, t + 1]))
            ended = [k not in live for k in range(E)]  # a game leaves `live` exactly when its episode ends
            if algo.next_action:  # a' in each last next state, chosen before the update
                last = obs_buf[range(E), n]
                actions[range(E), n] = torch.tensor(act_many(local, last, eps, actor_critic, rng))
            carry = [algo.next_action and not e for e in ended]

            if shared_norm is not None:  # acted and learnt with the statistics as synced; the next segment has these
                shared_norm.update(torch.cat([obs_buf[k, 1: n[k] + 1] for k in range(E)]))

            # --- learn: one batched forward over all segments, the mean of their losses into the shared model
            loss, info_m = segment_loss(local, shared.target, loss_fn, rollout, n)
            if not math.isfinite(loss.item()):
                raise NonFinite(f"non-finite loss {loss.item()}")
            for p in params:
                p.grad = None
            loss.backward()
            lr = learning_rate(frames, cfg.lr, cfg.frames, cfg.lr_anneal)
            info_m["losses/grad_norm"] = push_gradients(params, shared, rank, lr, cfg.grad_clip)
            frames = add_frames(shared, rank, sum(n) * spec.frames_per_step)
            if rank == 0:
                maybe_sync_target(shared, frames, cfg.target_update)

            # --- bookkeeping
            updates += 1
            for key, v in info_m.items():
                sums[key] = sums.get(key, 0.0) + v
            if updates % cfg.log_every == 0:
                for key, v in sums.items():
                    writer.add_scalar(f"{key}/w{rank}", v / cfg.log_every, frames)
                writer.add_scalar(metrics.EPSILON.format(rank=rank), eps if not actor_critic else 0.0, frames)
                if rank == 0:
                    writer.add_scalar(metrics.LEARNING_RATE, lr, frames)
                sums = {}

            # --- the next segment starts from the new state (a fresh episode after an end)
            for k in range(E):
                if ended[k]:
                    if states is not None and not life_lost[k]:
                        states.end_game(k)
                    obs, _ = envs[k].reset()
                    obs_buf[k, 0] = torch.as_tensor(np.asarray(obs))
                else:
                    obs_buf[k, 0] = obs_buf[k, n[k]]
                    actions[k, 0] = actions[k, n[k]]
    except NonFinite as e:  # say where: the message is the one line the user reads
        raise NonFinite(f"{e} at update {updates + 1} (global frame {frames})") from None
    writer.close()
    for env in envs:
        env.close()


class Rollout(NamedTuple):
    """A worker's segment buffers, one row per game: obs[k, t] is s_t, obs[k, t+1] the state after a_t."""
    obs: torch.Tensor           # (E, T+1, *obs_shape)
    actions: torch.Tensor       # (E, T+1): a_t, and a' after the last step for SARSA; (E, T+1, components) floats
                                # for continuous actions
    rewards: torch.Tensor       # (E, T)
    terminated: torch.Tensor    # (E, T)
    truncated: torch.Tensor     # (E, T)
    state0: tuple | None = None  # --net lstm: each game's (h, c) at the segment's start


def segment_loss(local, target, loss_fn, rollout: Rollout, n: list[int]) -> tuple[torch.Tensor, dict]:
    """The mean over a worker's games of the algorithm's loss (hyperparameters bound) on each game's segment
    (n[k] steps of game k).

    One forward over every game's rows (and one of the target network) rather than one per game: the batched
    convolution is what makes several games per worker cheaper per frame than one. A recurrent network
    replays every game's segment from its state at the segment's start (rows past a game's end are computed
    and left out).
    """
    obs_buf, actions, rewards, terminated, truncated, state0 = rollout
    E, T = rewards.shape
    full = all(m == T for m in n)

    def game_rows(t: torch.Tensor, first: int = 0) -> torch.Tensor:
        """Rows first..n[k] of each game k of `t` (E, T+1, ...), as one batch."""
        return t[:, first:].flatten(0, 1) if full else torch.cat([t[k, first: n[k] + 1] for k in range(E)])

    if state0 is not None:
        out = tuple(game_rows(o) for o in local.unroll(obs_buf, state0))
    else:
        out = local(game_rows(obs_buf))
    target_q_next = None
    if target is not None:
        with torch.no_grad():
            target_q_next = target(game_rows(obs_buf, first=1))  # s_1..s_n of each game
    loss, sums, row, trow = 0.0, {}, 0, 0
    for k in range(E):
        m = n[k]
        seg = Segment(actions[k, :m], rewards[k, :m], terminated[k, :m], truncated[k, :m], actions[k, 1:m + 1])
        rows = slice(row, row + m + 1)
        out_k = tuple(o[rows] for o in out) if isinstance(out, tuple) else out[rows]
        tq_k = None if target_q_next is None else target_q_next[trow: trow + m]
        loss_k, info_k = loss_fn(out_k, tq_k, seg)
        loss = loss + loss_k
        for key, v in info_k.items():
            sums[key] = sums.get(key, 0.0) + v / E
        row, trow = row + m + 1, trow + m
    return loss / E, sums
