"""The actor-learners. What every worker has, whatever its algorithm: actor_learner.py. Each family's loop body, in
a module named for it: segments.py (one-step Q and SARSA, n-step Q, A3C: t_max-step segments, one loss each),
rollouts.py (PPO and Q(lambda): rollouts optimized in minibatches), replay.py (DQN: a replay memory per worker).

WORKERS says which loop body each algorithm of the ALGORITHMS table runs and which loss it learns with, both
imported: from here a reader (or "go to definition") reaches the code that runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hogwild_dqn.algorithms import a3c, dqn, ppo, pqn, q_learning
from hogwild_dqn.rundir import Run
from hogwild_dqn.shared import SharedState
from hogwild_dqn.workers import replay, rollouts, segments
from hogwild_dqn.workers.actor_learner import ActorLearner


@dataclass(frozen=True)
class Worker:
    """An algorithm's code: its loop body, built as body(actor_learner, loss) with a step() the worker calls until
    the run stops, and its pure loss."""
    body: type
    loss: Callable


WORKERS = {
    "q1": Worker(segments.OnPolicy, q_learning.q1_loss),
    "sarsa1": Worker(segments.OnPolicy, q_learning.sarsa1_loss),
    "nq": Worker(segments.OnPolicy, q_learning.nq_loss),
    "a3c": Worker(segments.OnPolicy, a3c.a3c_loss),
    "dqn": Worker(replay.Replay, dqn.dqn_loss),
    "ppo": Worker(rollouts.PPO, ppo.ppo_loss),
    "pqn": Worker(rollouts.QLambda, pqn.pqn_loss),
}


def run_worker(rank: int, restart: int, run: Run, shared: SharedState) -> None:
    """A worker's work, in its process (processes.worker_process) or inline (tests, debuggers): its set-up, then its
    algorithm's loop body until the run stops. `restart`: the run's restarts so far when it started (0 at first;
    it picks the worker's random streams)."""
    code = WORKERS[run.cfg.algo]
    worker = ActorLearner(rank, restart, run, shared, run.cfg.envs_per_worker)
    worker.loop(code.body(worker, code.loss).step)
