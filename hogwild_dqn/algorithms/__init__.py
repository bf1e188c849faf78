"""The algorithms: one row each in ALGORITHMS says what it needs of the trainer; its pure loss lives in its own
module here (a3c, q_learning, dqn, ppo, pqn; the return maths they share in returns.py), and the loop body its
workers run is workers/'s (workers.WORKERS binds each name to both).

The rest of the trainer asks this table what an algorithm can do (which network, a target network or not, ...)
and never tests an algorithm's name. Adding an algorithm: its loss module, one row here, one in workers.WORKERS
(with a loop body of its own if no family's fits), tests. The table is torch-free, so that config.py checks
--algo, and --help lists the algorithms, without loading torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Algorithm:
    """What an algorithm needs from the trainer."""
    summary: str                   # one line for --help
    actor_critic: bool             # network: (policy logits, state value); else one Q-value per action
    target_network: bool           # bootstraps from a shared target network copied every --target-update frames
    next_action: bool = False      # its target uses the action taken next, chosen before the update (SARSA)
    replay: bool = False           # learns from a replay memory, one game per worker
    rollouts: bool = False         # learns from rollouts of its games, --epochs passes of --minibatches minibatches
    normalized_returns: bool = False  # its value head can learn returns standardized by running statistics
                                      # (--value-normalize)
    networks: tuple = ("ff",)      # --net choices: ff (feed-forward), lstm (carries a recurrent state across steps)
    action_spaces: tuple = ("Discrete",)  # gymnasium action spaces it acts in; Box: a Gaussian policy head
    presets: str = ""              # its own presets configs/<presets>_<kind>.yaml (kind: atari, cartpole, ...)
                                   # where there is one; else the kind's shared preset


ALGORITHMS = {
    "q1": Algorithm("one-step Q-learning (Algorithm S1)", actor_critic=False, target_network=True),
    "sarsa1": Algorithm("one-step SARSA", actor_critic=False, target_network=True, next_action=True),
    "nq": Algorithm("n-step Q-learning (Algorithm S2)", actor_critic=False, target_network=True),
    "a3c": Algorithm("advantage actor-critic (Algorithm S3)", actor_critic=True, target_network=False,
                     networks=("ff", "lstm"), action_spaces=("Discrete", "Box")),
    "dqn": Algorithm("DQN with a replay memory in each worker (one worker: standard DQN; several: asynchronous DQN)",
                     actor_critic=False, target_network=True, replay=True, presets="dqn"),
    "ppo": Algorithm("proximal policy optimization, asynchronous: each worker optimizes its own rollouts, every "
                     "minibatch's gradient into the shared model", actor_critic=True, target_network=False,
                     rollouts=True, normalized_returns=True, action_spaces=("Discrete", "Box"), presets="ppo"),
    "pqn": Algorithm("asynchronous Q(lambda) with LayerNorm (PQN, Gallici et al. 2024): each worker optimizes its own "
                     "rollouts' Q(lambda) targets, no replay, no target network", actor_critic=False,
                     target_network=False, rollouts=True, presets="pqn"),
}


def unable(game: str, algo: str, kind: str) -> str | None:
    """Why --algo cannot act in --game's `kind` of action space (a gymnasium space's class name), or None."""
    if kind in ALGORITHMS[algo].action_spaces:
        return None
    able = [k for k, a in ALGORITHMS.items() if kind in a.action_spaces]
    return (f"--game {game!r} has continuous ({kind}) actions; --algo {algo} needs discrete ones (continuous "
            f"actions: --algo {' or '.join(able)})")
