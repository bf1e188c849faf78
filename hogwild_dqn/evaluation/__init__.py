"""Evaluation and scoring, one room: what a run's score is and how its end is said (scores.py, no torch), the
policy that plays as the evaluator does and `load_policy` (policy.py), playing whole games and recording their
results (games.py), and the evaluator process of a single-machine run (evaluator.py). The `hogwild-play`
command (play.py) and the cluster's evaluator actor play through the same policy and games."""
