"""hogwild_dqn: asynchronous deep RL (Mnih et al. 2016) with Hogwild workers over one shared network.

Using a trained agent from Python:

    policy = hogwild_dqn.load_policy("runs/Pong-a3c-...")
    env = hogwild_dqn.make_env(policy.cfg, seed=0, for_eval=True)
    obs, _ = env.reset()
    policy.reset()  # at every new game: an LSTM agent (--net lstm) starts from an empty memory
    obs, reward, terminated, truncated, info = env.step(policy.act(obs))
"""

from hogwild_dqn.version import __version__ as __version__  # one place: version.py

__all__ = ["load_policy", "make_env"]


def __getattr__(name: str):
    # lazy, so that `import hogwild_dqn.config` (train.py's bad-input path) does not load torch and the ALE
    if name == "load_policy":
        from hogwild_dqn.evaluation.policy import load_policy

        return load_policy
    if name == "make_env":
        from hogwild_dqn.envs import make_env

        return make_env
    raise AttributeError(f"module 'hogwild_dqn' has no attribute {name!r}")
