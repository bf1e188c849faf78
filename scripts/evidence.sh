#!/usr/bin/env bash
# The README's results table, run after run (each takes the whole 2-core machine): `make evidence`.
# A run whose dir already holds summary.json is skipped, so the list can be resumed; each run's console
# output goes to <dir>.log beside it and the start and end of each run to chain.log.
set -u
cd "$(dirname "$0")/.."
OUT=${EVIDENCE_DIR:-runs/evidence}
mkdir -p "$OUT"
run() {  # run dir name, then the variables of `make train`
  local name=$1; shift
  [ -e "$OUT/$name/summary.json" ] && return
  [ -e "$OUT/$name" ] && { echo "$OUT/$name exists without summary.json: resume or remove it" >&2; return; }
  echo "== $(date -u +%FT%TZ) start $name: make train $*" >> "$OUT/chain.log"
  make --no-print-directory train "$@" RUN_DIR="$OUT/$name" > "$OUT/$name.log" 2>&1
  echo "== $(date -u +%FT%TZ) end $name rc=$?" >> "$OUT/chain.log"
}
for seed in 1 2 3; do run "pong-a3c-s$seed" GAME=Pong SEED=$seed ARGS="--stop-return 18"; done
run pong-q1-s1 GAME=Pong ALGO=q1 SEED=1 FRAMES=10000000 ARGS="--stop-return 18"
run pong-sarsa1-s1 GAME=Pong ALGO=sarsa1 SEED=1 FRAMES=10000000 ARGS="--stop-return 18"
for game in Breakout SpaceInvaders BeamRider Qbert; do
  run "$(echo $game | tr A-Z a-z)-a3c-s1" GAME=$game SEED=1 FRAMES=10000000
done
