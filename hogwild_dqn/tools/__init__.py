"""Tools around the trainer, not part of it: throughput (bench), sweep reports (report), the benchmark suite (benchmark,
its suites' games and protocol: suites, with the published scores beside it: published, and Atari-5's 57-game
estimate: atari5), the README's results table (frontpage), DQN's ablation (ablation), the memory soak (soak), curves
from CSV (curves) and a trained network's internals (probe). Each is a command of its own (`python -m
hogwild_dqn.tools.NAME`, or its make target / console command); the others (bench_points, bench_evaluator, machine,
suites, suite_report, published, atari5) are parts of those, and say which command to run; none is imported by the
trainer. What they share is written once: runs.py (starting, resuming and reading runs), output.py (numbers as
text, figures, reports written whole); how each ends, its failures as one line: hogwild_dqn.commands."""
