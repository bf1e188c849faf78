"""hogwild_dqn: asynchronous deep RL (Mnih et al. 2016) with Hogwild workers over one shared network."""
