"""The algorithms: one row each in ALGORITHMS says what it needs; its pure loss lives in its own module.

The rest of the trainer asks this table (which network, a target network or not, ...) and never tests an
algorithm's name. Adding an algorithm: its loss module, one row here, tests. The table is torch-free, so that
config.py can check --algo before torch is loaded; a loss is imported on first use.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Algorithm:
    """What an algorithm needs from the trainer."""
    loss_path: str                 # "module:function" of its pure loss: (outputs, target_q_next, segment, **hp),
                                   # or for a replay method (q, next_q, next_q_online, batch)
    summary: str                   # one line for --help
    actor_critic: bool             # network: (policy logits, state value); else one Q-value per action
    target_network: bool           # bootstraps from a shared target network copied every --target-update frames
    next_action: bool = False      # its target uses the action taken next, chosen before the update (SARSA)
    replay: bool = False           # learns from a replay memory
    minibatches: bool = False      # optimizes each rollout in --minibatches minibatches, --epochs times
    networks: tuple = ("ff",)      # --net choices: ff (feed-forward), lstm (carries a recurrent state across steps)
    action_spaces: tuple = ("Discrete",)  # gymnasium action spaces it acts in; Box: a Gaussian policy head
    loop: str = "on_policy"        # its workers' loop, by name (processes.LOOPS): the on-policy segments
                                   # (worker.py) unless it needs its own (ppo, replay)
    presets: str = ""              # its own presets configs/<presets>_<kind>.yaml (kind: atari, cartpole, ...)
                                   # where there is one; else the kind's shared preset

    @property
    def loss(self):
        return _load(self.loss_path)


def _load(path: str):
    """The function `module:name`, its module imported on first use."""
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


ALGORITHMS = {
    "q1": Algorithm("hogwild_dqn.algorithms.q_learning:q1_loss", "one-step Q-learning (Algorithm S1)",
                    actor_critic=False, target_network=True),
    "sarsa1": Algorithm("hogwild_dqn.algorithms.q_learning:sarsa1_loss", "one-step SARSA",
                        actor_critic=False, target_network=True, next_action=True),
    "nq": Algorithm("hogwild_dqn.algorithms.q_learning:nq_loss", "n-step Q-learning (Algorithm S2)",
                    actor_critic=False, target_network=True),
    "a3c": Algorithm("hogwild_dqn.algorithms.a3c:a3c_loss", "advantage actor-critic (Algorithm S3)",
                     actor_critic=True, target_network=False, networks=("ff", "lstm"),
                     action_spaces=("Discrete", "Box")),
    "dqn": Algorithm("hogwild_dqn.algorithms.dqn:dqn_loss", "DQN with a replay memory in each worker (one "
                     "worker: standard DQN; several: asynchronous DQN)", actor_critic=False, target_network=True,
                     replay=True, loop="replay", presets="dqn"),
    "ppo": Algorithm("hogwild_dqn.algorithms.ppo:ppo_loss", "proximal policy optimization, asynchronous: each "
                     "worker optimizes its own rollouts, every minibatch's gradient into the shared model",
                     actor_critic=True, target_network=False, minibatches=True, action_spaces=("Discrete", "Box"),
                     loop="ppo", presets="ppo"),
    "pqn": Algorithm("hogwild_dqn.algorithms.pqn:pqn_loss", "asynchronous Q(lambda) with LayerNorm (PQN, "
                     "Gallici et al. 2024): each worker optimizes its own rollouts' Q(lambda) targets, no replay, no "
                     "target network", actor_critic=False, target_network=False, minibatches=True, loop="q_lambda",
                     presets="pqn"),
}


def unable(game: str, algo: str, kind: str) -> str | None:
    """Why --algo cannot act in --game's `kind` of action space (a gymnasium space's class name), or None."""
    if kind in ALGORITHMS[algo].action_spaces:
        return None
    able = [k for k, a in ALGORITHMS.items() if kind in a.action_spaces]
    return (f"--game {game!r} has continuous ({kind}) actions; --algo {algo} needs discrete ones (continuous "
            f"actions: --algo {' or '.join(able)})")
