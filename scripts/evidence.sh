#!/usr/bin/env bash
# The runs of docs/results.md's tables, run after run (each takes the whole 2-core machine): `make evidence`.
# `scripts/evidence.sh ROW...` (make evidence ROWS="...") runs only the named rows, in the order given.
# A run whose dir already holds summary.json is skipped, so the list can be resumed; each run's console
# output goes to <dir>.log beside it and the start and end of each run to chain.log.
set -u
cd "$(dirname "$0")/.."
OUT=${EVIDENCE_DIR:-runs/evidence}
mkdir -p "$OUT"
declare -A ROW
ORDER=()
row() {  # run dir name, then the make target and its variables
  ROW[$1]=$(printf '%q ' "${@:2}")
  ORDER+=("$1")
}
for seed in 1 2 3; do row "pong-a3c-s$seed" train GAME=Pong ALGO=a3c SEED=$seed ARGS="--stop-return 18"; done
for seed in 1 2; do row "pong-a3c-lstm-s$seed" train GAME=Pong ALGO=a3c SEED=$seed ARGS="--net lstm --stop-return 18"; done
row pong-q1-s1 train GAME=Pong ALGO=q1 SEED=1 FRAMES=10000000 ARGS="--stop-return 18"
row pong-sarsa1-s1 train GAME=Pong ALGO=sarsa1 SEED=1 FRAMES=10000000 ARGS="--stop-return 18"
for game in Breakout SpaceInvaders BeamRider Qbert; do
  row "$(echo $game | tr A-Z a-z)-a3c-s1" train GAME=$game ALGO=a3c SEED=1 FRAMES=10000000
done
row sb3-a2c-breakout-s1 baseline-sb3 GAME=Breakout SEED=1 FRAMES=10000000
# PPO, the default on ALE games (each pixel standardized by running statistics; docs/results.md "The peer"), and
# the peer beside it: Sample Factory's APPO for the wall time of one of our 10M-frame runs on a 2-core machine
for seed in 1 2 3; do row "pong-ppo-s$seed" train GAME=Pong ALGO=ppo SEED=$seed ARGS="--stop-return 18"; done
for game in Breakout Qbert; do row "$(echo $game | tr A-Z a-z)-ppo-s1" train GAME=$game ALGO=ppo SEED=1 FRAMES=10000000; done
for game in Breakout Qbert; do
  row "sf-appo-$(echo $game | tr A-Z a-z)-s1" baseline-sf GAME=$game SEED=1 SECONDS=3600
done
# the earlier PPO default (each frame standardized on its own; docs/results.md "PPO: the first runs")
EARLIER="--no-obs-normalize --obs-standardize"
row pong-ppo-framestd-s1 train GAME=Pong ALGO=ppo SEED=1 ARGS="$EARLIER --stop-return 18"
row breakout-ppo-framestd-s1 train GAME=Breakout ALGO=ppo SEED=1 FRAMES=10000000 ARGS="$EARLIER"
# standard (1 process) against asynchronous (2 processes) DQN with replay on Pong (docs/results.md "Standard against
# asynchronous DQN")
for t in 2 1; do row "pong-dqn-t$t-s1" train GAME=Pong ALGO=dqn THREADS=$t SEED=1 ARGS="--stop-return 18"; done
# continuous actions (docs/results.md "Continuous actions"); MuJoCo rows install the optional extra first
for seed in 1 2 3; do row "pendulum-a3c-s$seed" train GAME=Pendulum-v1 SEED=$seed; done
for seed in 1 2 3; do
  row "invertedpendulum-a3c-s$seed" install-mujoco train GAME=InvertedPendulum-v5 SEED=$seed ARGS="--stop-return 950"
done
CHEETAH=(GAME=HalfCheetah-v5 SEED=1 FRAMES=1000000 ARGS="--eval-every 50000 --eval-episodes 5")
row halfcheetah-a3c-s1 install-mujoco train "${CHEETAH[@]}"
row halfcheetah-a3c-norm-s1 install-mujoco train GAME=HalfCheetah-v5 SEED=1 FRAMES=1000000 \
  ARGS="--obs-normalize --eval-every 50000 --eval-episodes 5"
row sb3-a2c-halfcheetah-s1 install-mujoco baseline-sb3 "${CHEETAH[@]}"

run() {  # one row by name
  local name=$1
  [ -n "${ROW[$name]+x}" ] || { echo "evidence.sh: no row named $name; rows: ${ORDER[*]}" >&2; return 2; }
  [ -e "$OUT/$name/summary.json" ] && return 0
  [ -e "$OUT/$name" ] && { echo "$OUT/$name exists without summary.json: resume or remove it" >&2; return 0; }
  echo "== $(date -u +%FT%TZ) start $name: make ${ROW[$name]}" >> "$OUT/chain.log"
  eval make --no-print-directory "${ROW[$name]}" RUN_DIR="$OUT/$name" > "$OUT/$name.log" 2>&1
  echo "== $(date -u +%FT%TZ) end $name rc=$?" >> "$OUT/chain.log"
}
if [ $# -eq 0 ]; then set -- "${ORDER[@]}"; fi
for name in "$@"; do run "$name" || exit $?; done
