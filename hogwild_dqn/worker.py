"""One actor-learner: sync -> act t_max steps in each of its games -> one loss -> push gradients -> count frames."""

from __future__ import annotations

import functools
import math
import os
from typing import NamedTuple

import numpy as np
import torch

from hogwild_dqn import metrics
from hogwild_dqn.acting import act_many, sample
from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.algorithms.returns import Segment
from hogwild_dqn.envs import make_env
from hogwild_dqn.exploration import draw_final_epsilon, epsilon, learning_rate, worker_streams
from hogwild_dqn.networks import is_recurrent, network_for, obs_norm
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


def worker_process(rank: int, restart: int, run: Run, shared: SharedState, report) -> None:
    """Process entry point (spawn); failures go up `report`, a pipe to the runner. `restart`: how many times
    this rank was restarted (it picks the worker's random streams). A replay method has a loop of its own
    (replay_worker.py)."""
    loop = run_replay_worker if ALGORITHMS[run.cfg.algo].replay else run_worker
    run_child(f"worker{rank}", report, loop, rank, restart, run, shared)


class GameStates:
    """--net lstm: the recurrent state (h, c) of each of a worker's games, carried from step to step and across
    segments; zeroed when that game ends (terminated or truncated). A lost life that ends the return (Atari,
    training only) keeps it, since the game goes on, as it does in evaluation."""

    def __init__(self, net: torch.nn.Module, games: int):
        self.h, self.c = net.initial_state(games)

    @torch.no_grad()
    def act(self, net: torch.nn.Module, rows: list[int], obs: torch.Tensor, rng: np.random.Generator) -> np.ndarray:
        """Step the games `rows` on their observations `obs`: sample their actions and keep their new states."""
        policy, _, (self.h[rows], self.c[rows]) = net(obs, (self.h[rows], self.c[rows]))
        return sample(policy, rng)

    def start(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The states at a segment's start, for the loss: a copy, so the gradient stops there (truncated BPTT)."""
        return self.h.clone(), self.c.clone()

    def end_game(self, k: int) -> None:
        self.h[k], self.c[k] = 0.0, 0.0


class Rollout(NamedTuple):
    """A worker's segment buffers, one row per game: obs[k, t] is s_t, obs[k, t+1] the state after a_t. Torch
    tensors over numpy arrays: the acting loop writes the arrays, the loss reads the tensors, nothing is copied."""
    obs: torch.Tensor           # (E, T+1, *obs_shape)
    actions: torch.Tensor       # (E, T+1): a_t, and a' after the last step for SARSA; (E, T+1, components) floats
                                # for continuous actions
    rewards: torch.Tensor       # (E, T)
    terminated: torch.Tensor    # (E, T)
    truncated: torch.Tensor     # (E, T)
    state0: tuple | None = None  # --net lstm: each game's (h, c) at the segment's start


def new_rollout(spec, games: int, steps: int) -> Rollout:
    """Zeroed segment buffers for `games` games of `steps` steps."""
    E, T = games, steps
    obs = np.zeros((E, T + 1, *spec.obs_shape), dtype=np.uint8 if spec.is_atari else np.float32)
    actions = np.zeros((E, T + 1, spec.n_actions), np.float32) if spec.continuous else np.zeros((E, T + 1), np.int64)
    return Rollout(*(torch.from_numpy(a) for a in (obs, actions, np.zeros((E, T), np.float32),
                                                   np.zeros((E, T), bool), np.zeros((E, T), bool))))


def segment_loss(local, target, loss_fn, rollout: Rollout, n) -> tuple[torch.Tensor, dict]:
    """The mean over a worker's games of the algorithm's loss (hyperparameters bound) on each game's segment
    (n[k] steps of game k).

    One forward over every game's rows (and one of the target network), the loss over (games, steps) tensors
    with a mask of the steps played: no Python loop over games. A recurrent network replays every game's
    segment from its state at the segment's start. Rows past a game's end hold the previous segment's data:
    computed, finite, and masked out.
    """
    obs, actions, rewards, terminated, truncated, state0 = rollout
    E, T = rewards.shape
    n = torch.as_tensor(n).view(E, 1)
    steps = torch.arange(T)
    mask = steps < n
    cut = truncated | (steps == n - 1)  # a game's last step played in this segment is where its return is cut
    if state0 is not None:
        out = local.unroll(obs, state0)
    else:
        out = local(obs.flatten(0, 1))
        out = tuple(o.unflatten(0, (E, T + 1)) for o in out) if isinstance(out, tuple) else out.unflatten(0, (E, T + 1))
    target_q_next = None
    if target is not None:
        with torch.no_grad():
            target_q_next = target(obs[:, 1:].flatten(0, 1)).unflatten(0, (E, T))  # s_1..s_T of each game
    seg = Segment(actions[:, :T], rewards, terminated, cut, actions[:, 1:], None if bool(mask.all()) else mask)
    return loss_fn(out, target_q_next, seg)


def run_worker(rank: int, restart: int, run: Run, shared: SharedState) -> None:
    """The worker loop; runs inline too (tests, debuggers)."""
    cfg, spec = run.cfg, run.spec
    E, T = cfg.envs_per_worker, cfg.t_max
    rng, seed, env_seeds = worker_streams(cfg.seed, rank, restart, run.prior["frames"], E)
    torch.manual_seed(seed)
    algo = ALGORITHMS[cfg.algo]
    actor_critic = algo.actor_critic
    loss_fn = functools.partial(algo.loss, gamma=cfg.gamma, entropy_beta=cfg.entropy_beta, value_coef=cfg.value_coef)
    final_eps = claim_exploration(shared, rank, seed, lambda: draw_final_epsilon(rng, cfg.eps_finals, cfg.eps_probs, E))
    lr_frames, lr0 = run.prior.get("lr_start") or (0, cfg.lr)
    envs = [make_env(cfg, s, for_eval=False) for s in env_seeds]
    local = network_for(cfg, spec)
    states = GameStates(local, E) if is_recurrent(local) else None

    def act(rows: np.ndarray, t: int) -> None:
        """Choose the actions of games `rows` in their states s_t (an LSTM steps their states too), with this
        segment's epsilons; every game's rows are a view, a subset a copy."""
        obs = obs_buf[:, t] if len(rows) == E else obs_buf[rows, t]
        if states is not None:
            act_np[rows, t] = states.act(local, rows, obs, rng)
        else:
            act_np[rows, t] = act_many(local, obs, eps[rows], actor_critic, rng)

    params, shared_params = list(local.parameters()), list(shared.model.parameters())
    shared_norm = obs_norm(shared.model)  # --obs-normalize: every worker's observations make its statistics
    # what a sync copies: the weights, and the observation statistics (buffers) where there are such
    synced, shared_synced = params + list(local.buffers()), shared_params + list(shared.model.buffers())
    writer = metrics.make_writer(run.run_dir, f"worker{rank}")

    rollout = new_rollout(spec, E, T)
    obs_buf = rollout.obs
    obs_np, act_np, rew_np, term_np, trunc_np = (t.numpy() for t in rollout[:5])
    all_games = np.arange(E)
    for k, env in enumerate(envs):
        obs_np[k, 0], _ = env.reset()  # make_env seeded it: the first game, without a second ROM load
    frames = shared.frames()
    carry = np.zeros(E, bool)  # SARSA carries a' (used in its target) into the next segment as the action taken
    updates, sums = 0, {}
    parent = os.getppid()  # if the runner is killed outright, this changes and the worker stops by itself
    try:
        while not shared.is_set(STOP) and frames < cfg.frames and os.getppid() == parent:
            sync_local(synced, shared_synced)
            eps = epsilon(frames, cfg.eps_start, final_eps, cfg.eps_anneal_frames)
            if states is not None:
                rollout = rollout._replace(state0=states.start())
            fresh = np.flatnonzero(~carry)
            if len(fresh):
                act(fresh, 0)

            # --- act: up to t_max steps in every game; a game whose episode ends sits out the rest of the segment
            n, ended, life_lost = np.full(E, T), np.zeros(E, bool), np.zeros(E, bool)
            live = all_games
            for t in range(T):
                chosen = act_np[:, t] if spec.continuous else act_np[:, t].tolist()
                for k in live:
                    obs, r, term, trunc, info = envs[k].step(chosen[k].copy() if spec.continuous else chosen[k])
                    obs_np[k, t + 1], rew_np[k, t], term_np[k, t], trunc_np[k, t] = obs, r, term, trunc
                    if term or trunc:
                        n[k], ended[k], life_lost[k] = t + 1, True, bool(info.get("life_lost"))
                    if "episode" in info:
                        metrics.log_episode(writer, rank, info["episode"], frames, spec.frames_per_step)
                if ended.any():
                    live = np.flatnonzero(~ended)
                if t + 1 < T and len(live):  # the action in the segment's last state is chosen after the next sync
                    act(live, t + 1)
            if algo.next_action:  # a' in each last next state, chosen before the update
                act_np[all_games, n] = act_many(local, obs_buf[all_games, n], eps, actor_critic, rng)
            carry = ~ended if algo.next_action else carry

            if shared_norm is not None:  # acted and learnt with the statistics as synced; the next segment has these
                shared_norm.update(torch.cat([obs_buf[k, 1: n[k] + 1] for k in range(E)]))

            # --- learn: one batched forward over all segments, the mean of their losses into the shared model
            loss, info_m = segment_loss(local, shared.target, loss_fn, rollout, n)
            if not math.isfinite(loss.item()):
                raise NonFinite(f"non-finite loss {loss.item()}")
            for p in params:
                p.grad = None
            loss.backward()
            lr = learning_rate(frames, lr0, cfg.frames, cfg.lr_anneal, lr_frames)
            info_m["losses/grad_norm"] = push_gradients(params, shared, rank, lr, cfg.grad_clip)
            frames = add_frames(shared, rank, int(n.sum()) * spec.frames_per_step)
            if rank == 0:
                maybe_sync_target(shared, frames, cfg.target_update)

            # --- bookkeeping: metrics stay tensors until a logging interval reads them
            updates += 1
            for key, v in info_m.items():
                sums[key] = sums.get(key, 0.0) + v
            if updates % cfg.log_every == 0:
                for key, v in sums.items():
                    writer.add_scalar(f"{key}/w{rank}", float(v) / cfg.log_every, frames)
                writer.add_scalar(metrics.EPSILON.format(rank=rank), float(np.mean(eps)) if not actor_critic else 0.0,
                                  frames)
                if rank == 0:
                    writer.add_scalar(metrics.LEARNING_RATE, lr, frames)
                sums = {}

            # --- the next segment starts from the new state (a fresh episode after an end)
            going = np.flatnonzero(~ended)
            obs_np[going, 0], act_np[going, 0] = obs_np[going, T], act_np[going, T]
            for k in np.flatnonzero(ended):
                if states is not None and not life_lost[k]:
                    states.end_game(k)
                obs_np[k, 0], _ = envs[k].reset()
    except NonFinite as e:  # say where: the message is the one line the user reads
        raise NonFinite(f"{e} at update {updates + 1} (global frame {frames})") from None
    writer.close()
    for env in envs:
        env.close()
