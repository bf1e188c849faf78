#!/bin/bash
# Issue 66's speed target on a lent 16-core machine: the default (4 epochs, fp32) pinned to 2 of its cores, as on
# a 2-core machine. Cores 0-1: tools.bench side by side (no --baseline: the lent copy has no git history). Cores 2-3
# and 4-5 at the same time: the suite's own run command (sticky 0.25) on Seaquest and BeamRider, the evaluator on
# CPU as on a 2-core machine, stopped by SIGINT after RUN_S seconds.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
nproc; lscpu | grep "Model name"; grep -o -w -E "amx_bf16|avx512_bf16|avx512_vnni" /proc/cpuinfo | sort | uniq -c; nvidia-smi -L
python3 -c "import torch,gymnasium,ale_py,numpy;print('torch',torch.__version__,'gymnasium',gymnasium.__version__,'ale_py',ale_py.__version__,'numpy',numpy.__version__)" || exit 4
for g in Breakout Seaquest BeamRider; do
  taskset -c 0 python3 -c "from hogwild_dqn.tools.bench import emulator_fps; from hogwild_dqn.config import Config; print('bare emulator $g frames/s (core 0): %.0f' % emulator_fps(Config(game='$g'), 5))" 2>/dev/null
done
run() {  # game cores
  CUDA_VISIBLE_DEVICES= taskset -c $2 timeout -s INT ${RUN_S:-270} python3 -m hogwild_dqn.train --game $1 --algo ppo --threads 2 \
    --frames 10000000 --seed 1 --eval-every 500000 --sticky-actions 0.25 --video-steps 0 --final-eval-seconds 15 \
    --run-dir /tmp/runs/$1 --no-progress > $OUT/run_$1.log 2>&1
  cp /tmp/runs/$1/summary.json $OUT/$1_summary.json 2>/dev/null
  cp /tmp/runs/$1/events.*worker0 $OUT/$1_worker0.tfevents 2>/dev/null
}
run Seaquest 2,3 & run BeamRider 4,5 &
taskset -c 0,1 timeout 300 python3 -m hogwild_dqn.tools.bench --game Breakout --algos ppo --threads 2 --envs 8 --seconds 20 \
  --warmup 10 --repeats 2 --with "--ppo-epochs 2" --with "--learner-precision bf16" --out /tmp/bench 2>&1 | tee $OUT/bench.log
cp /tmp/bench/bench.md $OUT/ 2>/dev/null
wait
tail -n 3 $OUT/run_*.log
