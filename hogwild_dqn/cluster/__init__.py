"""The same workers on several machines, on Ray (--cluster; docs/cluster.md): driver.py (the command's side: starts
the actors, watches them, ends the run), actors.py (the parameter holder, each machine's pool, the evaluator). Only
these import Ray, and only for a cluster run."""
