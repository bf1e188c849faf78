"""One actor-learner: sync -> act t_max steps -> one loss over the segment -> push gradients -> count frames."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import torch

from hogwild_dqn import metrics
from hogwild_dqn.algorithms import LOSSES, Segment
from hogwild_dqn.config import Config
from hogwild_dqn.envs import EnvSpec, make_env
from hogwild_dqn.exploration import draw_final_epsilon, epsilon, learning_rate
from hogwild_dqn.networks import network_for
from hogwild_dqn.shared import (
    STOP,
    NonFinite,
    SharedState,
    add_frames,
    maybe_sync_target,
    push_gradients,
    run_child,
    sync_local,
)


def worker_process(rank: int, seed: int, cfg: Config, spec: EnvSpec, shared: SharedState, run_dir: str,
                   report) -> None:
    """Process entry point (spawn); failures go up `report`, a pipe to the runner."""
    run_child(f"worker{rank}", report, run_worker, rank, seed, cfg, spec, shared, Path(run_dir))


def act(net: torch.nn.Module, obs: torch.Tensor, eps: float, actor_critic: bool, rng: np.random.Generator) -> int:
    """Sample from the policy (A3C) or act epsilon-greedily on Q (value-based methods)."""
    if not actor_critic and rng.random() < eps:
        return int(rng.integers(net.q.out_features))
    with torch.inference_mode():
        out = net(obs.unsqueeze(0))
    if actor_critic:
        cdf = torch.softmax(out[0][0], dim=0).cumsum(0).numpy()
        if not np.isfinite(cdf[-1]):
            raise NonFinite("non-finite policy while acting")
        return min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), len(cdf) - 1)
    return int(out[0].argmax())


def run_worker(rank: int, seed: int, cfg: Config, spec: EnvSpec, shared: SharedState, run_dir: Path) -> None:
    """The worker loop; runs inline too (tests, debuggers)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    actor_critic = cfg.algo == "a3c"
    loss_fn = LOSSES[cfg.algo]
    hp = {"gamma": cfg.gamma, "entropy_beta": cfg.entropy_beta, "value_coef": cfg.value_coef}
    if math.isnan(shared.worker_eps[rank]):  # drawn once per rank; a restarted or resumed worker keeps it
        shared.worker_eps[rank] = draw_final_epsilon(rng, cfg.eps_finals, cfg.eps_probs)
    final_eps = float(shared.worker_eps[rank])
    shared.worker_seed[rank] = seed
    env = make_env(cfg, seed, for_eval=False)
    local = network_for(cfg, spec)
    params, shared_params = list(local.parameters()), list(shared.model.parameters())
    writer = metrics.make_writer(run_dir, f"worker{rank}")

    # Preallocated segment buffers: obs[t] is s_t, obs[t+1] is the state after a_t.
    T = cfg.t_max
    obs_buf = torch.zeros((T + 1, *spec.obs_shape), dtype=torch.uint8 if spec.is_atari else torch.float32)
    actions = torch.zeros(T + 1, dtype=torch.long)
    rewards = torch.zeros(T)
    terminated = torch.zeros(T, dtype=torch.bool)
    truncated = torch.zeros(T, dtype=torch.bool)

    obs, _ = env.reset(seed=seed)
    obs_buf[0] = torch.as_tensor(np.asarray(obs))
    frames = shared.frames()
    carry = False  # SARSA carries a' (used in its target) into the next segment as the action taken
    updates, sums = 0, {}
    parent = os.getppid()  # if the runner is killed outright, this changes and the worker stops by itself
    try:
        while not shared.is_set(STOP) and frames < cfg.frames and os.getppid() == parent:
            sync_local(params, shared_params)
            eps = epsilon(frames, cfg.eps_start, final_eps, cfg.eps_anneal_frames)
            if not carry:
                actions[0] = act(local, obs_buf[0], eps, actor_critic, rng)

            # --- act: up to t_max steps or until the episode ends
            n = 0
            for t in range(T):
                obs, r, term, trunc, info = env.step(int(actions[t]))
                obs_buf[t + 1] = torch.as_tensor(np.asarray(obs))
                rewards[t], terminated[t], truncated[t] = float(r), bool(term), bool(trunc)
                n = t + 1
                if "episode" in info:  # a whole game ended: log its raw score
                    writer.add_scalar(metrics.EPISODE_RETURN.format(rank=rank), float(info["episode"]["r"]), frames)
                    writer.add_scalar(metrics.EPISODE_LENGTH.format(rank=rank),
                                      int(info["episode"]["l"]) * spec.frames_per_step, frames)
                if term or trunc:
                    break
                if t + 1 < T:  # the action in the segment's last state is chosen after the next sync
                    actions[t + 1] = act(local, obs_buf[t + 1], eps, actor_critic, rng)
            ended = bool(terminated[n - 1] or truncated[n - 1])
            if cfg.algo == "sarsa1":  # a' in the last next state, chosen before the update
                actions[n] = act(local, obs_buf[n], eps, actor_critic, rng)
            carry = cfg.algo == "sarsa1" and not ended

            # --- learn: one batched forward over the segment, gradients into the shared model
            seg = Segment(actions[:n], rewards[:n], terminated[:n], truncated[:n], actions[1:n + 1])
            out = local(obs_buf[: n + 1])
            target_q_next = None
            if shared.target is not None:
                with torch.no_grad():
                    target_q_next = shared.target(obs_buf[1: n + 1])
            loss, info_m = loss_fn(out, target_q_next, seg, **hp)
            if not math.isfinite(loss.item()):
                raise NonFinite(f"non-finite loss {loss.item()}")
            for p in params:
                p.grad = None
            loss.backward()
            lr = learning_rate(frames, cfg.lr, cfg.frames, cfg.lr_anneal)
            info_m["losses/grad_norm"] = push_gradients(params, shared, lr, cfg.grad_clip)
            frames = add_frames(shared, rank, n * spec.frames_per_step)
            if rank == 0:
                maybe_sync_target(shared, frames, cfg.target_update)

            # --- bookkeeping
            updates += 1
            for k, v in info_m.items():
                sums[k] = sums.get(k, 0.0) + v
            if updates % cfg.log_every == 0:
                for k, v in sums.items():
                    writer.add_scalar(f"{k}/w{rank}", v / cfg.log_every, frames)
                writer.add_scalar(metrics.EPSILON.format(rank=rank), eps if not actor_critic else 0.0, frames)
                if rank == 0:
                    writer.add_scalar(metrics.LEARNING_RATE, lr, frames)
                sums = {}

            # --- the next segment starts from the new state (a fresh episode after an end)
            if ended:
                obs, _ = env.reset()
                obs_buf[0] = torch.as_tensor(np.asarray(obs))
            else:
                obs_buf[0] = obs_buf[n]
                actions[0] = actions[n]
    except NonFinite as e:  # say where: the message is the one line the user reads
        raise NonFinite(f"{e} at update {updates + 1} (global frame {frames})") from None
    writer.close()
    env.close()
