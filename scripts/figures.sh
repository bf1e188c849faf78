#!/usr/bin/env bash
# Redraw the figures of docs/results.md and docs/notebook/ whose evaluations are kept there as CSV: `make figures`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
for axis in frames wall_seconds; do
  x=${axis%_seconds}  # the figures' names: *_frames.png, *_wall.png
  $PY -m hogwild_dqn.tools.curves --x $axis --line 18 --title "Pong, DQN, seed 1" --out docs/pong_dqn_$x.png \
    docs/pong_dqn_t2_evals.csv="2 processes, 88cc532 (10M budget), ε 0.05" \
    docs/pong_dqn_t1_evals.csv="1 process, 88cc532 (cut at 4.46M), ε 0.05" \
    docs/pong_dqn_t2_711e370_evals.csv="2 processes, 711e370 (--stop-return 18), ε 0.05" \
    docs/pong_dqn_t2_fb3541a_evals.csv="2 processes, fb3541a (+18.4 at 6.25M, on to 9M), ε 0.001"
  $PY -m hogwild_dqn.tools.curves --x $axis --by workers --line 18 --out docs/sweep16_$x.png \
    --title "Pong, A3C on 16 cores (16 workers: seed 2, alone)" docs/sweep16_h200_evals.csv="A3C,"
done
$PY -m hogwild_dqn.tools.curves --x frames --title "Breakout, A3C, seed 1, FIRE reset (03a8c7e)" \
  --out docs/breakout_fire_frames.png docs/breakout_fire_evals.csv="A3C, 2 workers, FIRE reset"
for axis in frames wall_seconds; do
  $PY -m hogwild_dqn.tools.curves --x $axis --by seed --line 18 --out docs/pong_confirmed_${axis%_seconds}.png \
    --title "Pong, A3C, confirmed stops (d596905; 30-game confirmations at the stop)" \
    docs/pong_confirmed_evals.csv="A3C,"
done
$PY -m hogwild_dqn.tools.curves --x frames --by seed --line 18 --out docs/ppo_pong_frames.png \
  --title "Pong: PPO (seed 1) beside A3C (seeds 1-3), confirmed stops" \
  docs/ppo_pong_evals.csv="PPO," docs/pong_confirmed_evals.csv="A3C,"
$PY -m hogwild_dqn.tools.curves --x frames --title "Breakout, seed 1, FIRE reset: PPO beside A3C" \
  --out docs/ppo_breakout_frames.png docs/ppo_breakout_evals.csv="PPO (44e8e06)" \
  docs/breakout_fire_evals.csv="A3C (03a8c7e)"
$PY -m hogwild_dqn.tools.curves --x frames --by seed --line 18 --out docs/ppo_pixnorm_pong_frames.png \
  --title "Pong, seed 1: PPO with the input normalized pixel by pixel, confirmed stops" \
  docs/ppo_pixnorm_pong_evals.csv="PPO, pixels normalized (bd6231c)," docs/ppo_pong_evals.csv="PPO default (44e8e06),"
$PY -m hogwild_dqn.tools.curves --x frames --title "Breakout, seed 1: PPO with the input normalized pixel by pixel" \
  --out docs/ppo_pixnorm_breakout_frames.png docs/ppo_pixnorm_breakout_evals.csv="PPO, pixels normalized (bd6231c)" \
  docs/ppo_breakout_evals.csv="PPO default (44e8e06)" docs/breakout_fire_evals.csv="A3C (03a8c7e)"
$PY -m hogwild_dqn.tools.curves --x frames --by seed --title "Qbert: PPO (seed 1, 6e25702) beside the A3C suite's seeds 1-3" \
  --out docs/ppo_qbert_frames.png docs/ppo_qbert_evals.csv="PPO (6e25702)" docs/qbert_a3c_suite_evals.csv="A3C,"
$PY -m hogwild_dqn.tools.curves --x frames --by seed --title "SpaceInvaders: PPO (seed 1, 6e25702) beside the A3C suite's seeds 2-3" \
  --out docs/ppo_spaceinvaders_frames.png docs/ppo_spaceinvaders_evals.csv="PPO (6e25702)" \
  docs/spaceinvaders_a3c_suite_evals.csv="A3C,"
$PY -m hogwild_dqn.tools.curves --x frames --by seed --title "Qbert: PPO (seed 1), pixels normalized or not, and A3C" \
  --out docs/ppo_pixnorm_qbert_frames.png docs/ppo_pixnorm_qbert_evals.csv="PPO, pixels normalized (bd6231c)" \
  docs/ppo_qbert_evals.csv="PPO default (6e25702)" docs/qbert_a3c_suite_evals.csv="A3C,"
$PY -m hogwild_dqn.tools.curves --x frames --by seed --title "SpaceInvaders: PPO (seed 1), pixels normalized or not, and A3C" \
  --out docs/ppo_norm_spaceinvaders_frames.png docs/benchmark-ppo-epochs4/records/SpaceInvaders-ppo-s1.json="PPO, pixels normalized (8b09b85)" \
  docs/ppo_spaceinvaders_evals.csv="PPO default (6e25702)" docs/spaceinvaders_a3c_suite_evals.csv="A3C,"
for axis in frames wall_seconds; do
  $PY -m hogwild_dqn.tools.curves --x $axis --by seed --line 18 --out docs/ppo_pong_confirmed_${axis%_seconds}.png \
    --title "Pong, seeds 1-3, confirmed stops: PPO, the default, beside A3C" \
    docs/ppo_pong_confirmed_evals.csv="PPO," docs/pong_confirmed_evals.csv="A3C,"
done
$PY -m hogwild_dqn.tools.curves --x frames --by seed --title "Seaquest: PPO, the default (seed 1), beside A3C (seeds 1-3)" \
  --out docs/ppo_norm_seaquest_frames.png docs/benchmark-ppo-epochs4/records/Seaquest-ppo-s1.json="PPO, the default (3ffa1db)," \
  docs/benchmark/records/Seaquest-a3c-s{1,2,3}.json="A3C,"
$PY -m hogwild_dqn.tools.curves --x frames --by seed --title "BeamRider: PPO, the default (seed 1), beside A3C (seeds 1-3)" \
  --out docs/ppo_norm_beamrider_frames.png docs/benchmark-ppo-epochs4/records/BeamRider-ppo-s1.json="PPO, the default (3ffa1db)," \
  docs/benchmark/records/BeamRider-a3c-s{1,2,3}.json="A3C,"
$PY -m hogwild_dqn.tools.curves --x frames --by seed --title "BeamRider, seed 1: PPO's input, pixel by pixel or frame by frame" \
  --out docs/ppo_beamrider_input_frames.png docs/benchmark-ppo-epochs4/records/BeamRider-ppo-s1.json="PPO, the default (3ffa1db)," \
  docs/screens/ppo-default/BeamRider-ppo-s1.json="PPO, each frame standardized (3ffa1db)," \
  docs/benchmark/records/BeamRider-a3c-s1.json="A3C,"
$PY -m hogwild_dqn.tools.curves --x frames --title "Breakout, seed 1: PPO with 2 or 4 epochs a rollout" \
  --out docs/ppo_epochs_breakout_frames.png docs/screens/ppo-epochs2/Breakout-ppo-s1.json="PPO, 2 epochs (3ffa1db)" \
  docs/benchmark-ppo-epochs4/records/Breakout-ppo-s1.json="PPO, 4 epochs (bd6231c)"
$PY -m hogwild_dqn.tools.curves --x frames --by seed --title "BeamRider: PPO with 2 or 4 epochs a rollout (seed 1), and A3C" \
  --out docs/ppo_epochs_beamrider_frames.png docs/screens/ppo-epochs2/BeamRider-ppo-s1.json="PPO, 2 epochs (3ffa1db)," \
  docs/benchmark-ppo-epochs4/records/BeamRider-ppo-s1.json="PPO, 4 epochs (3ffa1db)," \
  docs/benchmark/records/BeamRider-a3c-s{1,2,3}.json="A3C,"
for axis in frames wall_seconds; do
  $PY -m hogwild_dqn.tools.curves --x $axis --line 18 --out docs/ppo16_pong_${axis%_seconds}.png \
    --title "Pong, PPO (the default), seed 1: 16 workers beside 2" \
    docs/ppo16_h100/Pong-ppo-t16-s1.summary.json="16 workers" docs/ppo_pong_epochs2/Pong-ppo-s1.json="2 workers"
  $PY -m hogwild_dqn.tools.curves --x $axis --out docs/ppo16_breakout_${axis%_seconds}.png \
    --title "Breakout, PPO (the default), seed 1: 16 workers beside 2" \
    docs/ppo16_h100/Breakout-5M-ppo-t16-s1.summary.json="16 workers, 5M frames" \
    docs/ppo16_h100/Breakout-3.4M-ppo-t16-s1.summary.json="16 workers, 3.4M frames" \
    docs/benchmark-ppo/records/Breakout-ppo-s1.json="2 workers, 10M frames"
done
$PY -m hogwild_dqn.tools.curves --x frames --by seed --title "BeamRider, seed 1: PPO's learning rate annealed or constant" \
  --out docs/ppo_lr_beamrider_frames.png docs/benchmark-ppo/records/BeamRider-ppo-s1.json="PPO, the default: annealed (3ffa1db)," \
  docs/screens/ppo-lr-const/BeamRider-ppo-s1.json="PPO, constant (86e9b44)," \
  docs/benchmark/records/BeamRider-a3c-s1.json="A3C,"
$PY -m hogwild_dqn.tools.curves --x frames --by seed --title "BeamRider, seed 1: PPO with FIRE reset or without, and A3C" \
  --out docs/ppo_fire_beamrider_frames.png docs/benchmark-ppo/records/BeamRider-ppo-s1.json="PPO, FIRE reset (3ffa1db)," \
  docs/screens/ppo-nofire/BeamRider-ppo-s1.json="PPO, no FIRE reset (6ab7ddc)," \
  docs/benchmark/records/BeamRider-a3c-s1.json="A3C, no FIRE reset,"
$PY -m hogwild_dqn.tools.curves --x frames --by seed --title "Seaquest, seed 1: PPO's epochs and the bf16 learner" \
  --out docs/ppo_bf16_seaquest_frames.png docs/benchmark-ppo/records/Seaquest-ppo-s1.json="2 epochs, fp32 (the default)," \
  docs/benchmark-ppo-epochs4/records/Seaquest-ppo-s1.json="4 epochs, fp32 (3ffa1db)," \
  docs/screens/ppo-bf16-e4/Seaquest-ppo-s1.json="4 epochs, bf16 (abb45c5)," \
  docs/screens/ppo-fp32-e4/Seaquest-ppo-s1.json="4 epochs, fp32 (b193d90, cut at 7.6M)," \
  docs/benchmark/records/Seaquest-a3c-s1.json="A3C,"
$PY -m hogwild_dqn.tools.curves --x frames --by seed --title "BeamRider, seed 1: PPO's network, 4 epochs, and A3C" \
  --out docs/ppo_nature_beamrider_frames.png docs/benchmark-ppo/records/BeamRider-ppo-s1.json="2 epochs (the default)," \
  docs/benchmark-ppo-epochs4/records/BeamRider-ppo-s1.json="4 epochs (3ffa1db)," \
  docs/screens/ppo-nature-e4/BeamRider-ppo-s1.json="4 epochs, Nature network, bf16 (acd800e)," \
  docs/benchmark/records/BeamRider-a3c-s1.json="A3C,"
$PY -m hogwild_dqn.tools.curves --x frames --by seed \
  --title "BeamRider, seed 1, sticky actions: the decoupled clip, no value clip, and A3C" \
  --out docs/ppo_clip_beamrider_frames.png docs/benchmark-sticky/records/BeamRider-ppo-s1.json="the default (0c97936)," \
  docs/screens/ppo-decoupled/BeamRider-ppo-s1.json="--ppo-decoupled (f3f2450)," \
  docs/screens/ppo-no-value-clip/BeamRider-ppo-s1.json="--no-value-clip (f3f2450)," \
  docs/benchmark/records/BeamRider-a3c-s1.json="A3C (no sticky actions),"
$PY -m hogwild_dqn.tools.curves --x frames --by seed \
  --title "BeamRider, seed 1, sticky actions: the last four screens and A3C" \
  --out docs/ppo_vnorm_beamrider_frames.png docs/benchmark-sticky/records/BeamRider-ppo-s1.json="the default (0c97936)," \
  docs/screens/ppo-entropy-0.001/BeamRider-ppo-s1.json="--entropy-beta 0.001 (f3f2450)," \
  docs/screens/ppo-gamma-0.995/BeamRider-ppo-s1.json="--gamma 0.995 (f3f2450)," \
  docs/screens/ppo-tmax-256/BeamRider-ppo-s1.json="--t-max 256 (f3f2450)," \
  docs/screens/ppo-vnorm/BeamRider-ppo-s1.json="--value-normalize (f3f2450)," \
  docs/benchmark/records/BeamRider-a3c-s1.json="A3C (no sticky actions),"
$PY -m hogwild_dqn.tools.curves --x frames --by seed \
  --title "Qbert, seed 1, sticky actions: value normalization, the default, A3C" \
  --out docs/ppo_vnorm_qbert_frames.png docs/benchmark-sticky/records/Qbert-ppo-s1.json="the default (0c97936)," \
  docs/screens/ppo-vnorm/Qbert-ppo-s1.json="--value-normalize (f3f2450)," \
  docs/benchmark/records/Qbert-a3c-s1.json="A3C (no sticky actions),"
commits() {  # RECORD: the commits its sessions ran, in order, each once
  $PY -c 'import json, sys; print("/".join(dict.fromkeys(s["code"] for s in json.load(open(sys.argv[1]))["sessions"])))' "$1"
}
vnorm_seeds() {  # GAME OUT TITLE [a3c]: the value-normalization suite's seeds 1-3 beside the default's
  local game=$1 out=$2 title=$3 s rec
  local runs=()
  for s in 1 2 3; do
    rec=docs/benchmark-sticky/records/$game-ppo-s$s.json
    runs+=("$rec=the default ($(commits "$rec")),")
  done
  for s in 1 2 3; do
    rec=docs/screens/ppo-vnorm/$game-ppo-s$s.json
    runs+=("$rec=--value-normalize ($(commits "$rec")),")
  done
  if [ "${4:-}" = a3c ]; then runs+=("docs/benchmark/records/$game-a3c-s1.json=A3C (no sticky actions),"); fi
  $PY -m hogwild_dqn.tools.curves --x frames --by seed --title "$title" --out "docs/$out" "${runs[@]}"
}
vnorm_seeds BeamRider ppo_vnorm_beamrider_seeds_frames.png \
  "BeamRider, seeds 1-3, sticky actions: value normalization and the default"
vnorm_seeds Seaquest ppo_vnorm_seaquest_frames.png \
  "Seaquest, seeds 1-3, sticky actions: value normalization, the default, A3C" a3c
vnorm_seeds Qbert ppo_vnorm_qbert_seeds_frames.png \
  "Qbert, seeds 1-3, sticky actions: value normalization, the default, A3C" a3c
vnorm_seeds Breakout ppo_vnorm_breakout_frames.png \
  "Breakout, seeds 1-3, sticky actions: value normalization and the default"
vnorm_seeds SpaceInvaders ppo_vnorm_spaceinvaders_frames.png \
  "SpaceInvaders, seeds 1-3, sticky: value normalization and the default"
vnorm_seeds Pong ppo_vnorm_pong_frames.png "Pong, seeds 1-3, sticky actions: value normalization and the default"
$PY -m hogwild_dqn.tools.curves --out docs/pqn_beamrider_frames.png \
  --title "BeamRider, seed 1, sticky actions: periodic evaluations (5 games)" \
  "docs/screens/pqn/BeamRider-pqn-s1.json=pqn, the Nature network, epsilon over 1M (4d60c61)" \
  "docs/screens/pqn-paper-net/BeamRider-pqn-s1.json=pqn, the paper's network, epsilon over 4M (373cd8c)" \
  "docs/screens/pqn-lambda95/BeamRider-pqn-s1.json=pqn, the same, lambda 0.95 (the preset since)" \
  "docs/screens/ppo-vnorm-no-value-clip/BeamRider-ppo-s1.json=ppo, the default (f3f2450)"
$PY -m hogwild_dqn.tools.curves --out docs/pqn_breakout_frames.png \
  --title "Breakout, seed 1, sticky actions: periodic evaluations (5 games)" \
  "docs/screens/pqn-eps4m/Breakout-pqn-s1.json=pqn, epsilon over 4M frames" \
  "docs/screens/pqn-eps4m-envs32/Breakout-pqn-s1.json=pqn, the same, 32 games a worker" \
  "docs/screens/pqn-paper-net/Breakout-pqn-s1.json=pqn, the same, the paper's network" \
  "docs/screens/pqn-lambda95/Breakout-pqn-s1.json=pqn, the paper's network, lambda 0.95 (the preset since)" \
  "docs/screens/ppo-vnorm-no-value-clip/Breakout-ppo-s1.json=ppo, the default"
for game in Pong Qbert; do
  lower=$(echo $game | tr '[:upper:]' '[:lower:]')
  $PY -m hogwild_dqn.tools.curves --out docs/pqn_${lower}_frames.png \
    --title "$game, seed 1, sticky actions: periodic evaluations (5 games)" \
    "docs/benchmark-pqn-sticky/records/$game-pqn-s1.json=pqn, lambda 0.65, epsilon over 4M (the preset of ff4fef5)" \
    "docs/screens/pqn-eps1m/$game-pqn-s1.json=pqn, epsilon over 1M" \
    "docs/screens/pqn-lambda95/$game-pqn-s1.json=pqn, lambda 0.95 (the preset since)" \
    "docs/screens/ppo-vnorm-no-value-clip/$game-ppo-s1.json=ppo, the default"
done
