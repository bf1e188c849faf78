#!/bin/bash
# Issue 47 item 6: the default (PPO, configs/ppo_atari.yaml) with 16 workers on Pong and Breakout, seed 1.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
nproc; lscpu | grep "Model name"; nvidia-smi -L
python3 -c "import torch,gymnasium,ale_py,numpy;print('torch',torch.__version__,'gymnasium',gymnasium.__version__,'ale_py',ale_py.__version__,'numpy',numpy.__version__,'cuda',torch.cuda.is_available())" || exit 4
python3 -c "from hogwild_dqn.tools.bench import emulator_fps; from hogwild_dqn.config import Config; print('bare emulator Pong frames/s: %.0f' % emulator_fps(Config(game='Pong'), 8))" || exit 5
T0=$(date +%s)
timeout -s INT ${PONG_S:-300} python3 -m hogwild_dqn.train --game Pong --algo ppo --threads 16 --seed 1 --stop-return 18 --eval-every 500000 --video-steps 0 --final-eval-seconds 120 --run-dir /tmp/runs/pong --no-progress
echo "pong rc $? wall $(( $(date +%s) - T0 )) s"
cp /tmp/runs/pong/summary.json $OUT/pong_summary.json
FR=$(python3 -c "import json;f=json.load(open('/tmp/runs/pong/summary.json'))['frames_per_second'];print(int(min(10e6,max(2e6,f*${BRK_TRAIN_S:-150}))//100000*100000))" 2>/dev/null || echo 4000000)
echo "breakout frames $FR"
T0=$(date +%s)
timeout -s INT ${BRK_S:-270} python3 -m hogwild_dqn.train --game Breakout --algo ppo --threads 16 --seed 1 --frames $FR --eval-every 500000 --video-steps 0 --final-eval-seconds 100 --run-dir /tmp/runs/breakout --no-progress
echo "breakout rc $? wall $(( $(date +%s) - T0 )) s"
cp /tmp/runs/breakout/summary.json $OUT/breakout_summary.json
cp /tmp/runs/pong/train.log $OUT/ 2>/dev/null; cp /tmp/runs/breakout/config.yaml $OUT/breakout_config.yaml; cp /tmp/runs/pong/config.yaml $OUT/pong_config.yaml
