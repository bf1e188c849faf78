# `make train` and `make test` set themselves up: .venv is (re)built whenever requirements.txt or pyproject.toml is newer.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# Pass-through variables (empty means: the config preset decides).
GAME    ?=
ALGO    ?=
THREADS ?=
FRAMES  ?=
SEED    ?=
RUN_DIR ?=
CONFIG  ?=
LOGDIR  ?=
RESUME  ?=
ARGS    ?=
MINUTES ?= 30
SEEDS   ?= 1
SCORE   ?=
BENCH_ARGS ?=
CLUSTER ?=
RUN     ?=
EPISODES ?= 10
ROWS    ?=
GAMES   ?=
SEEDS_LIST ?=
BENCHMARK_ARGS ?=
SUITE   ?=
RECORD  ?=
SECONDS ?=

opt = $(if $(strip $(2)),$(1) $(2))
# SEEDS as the user gave it (its default, 1, is the sweep's; the suite and the ablation have their own)
seeds_given = $(if $(filter command line environment,$(origin SEEDS)),$(SEEDS))
TRAIN_ARGS = $(call opt,--game,$(GAME)) $(call opt,--algo,$(ALGO)) $(call opt,--threads,$(THREADS)) \
             $(call opt,--frames,$(FRAMES)) $(call opt,--seed,$(SEED)) $(call opt,--run-dir,$(RUN_DIR)) \
             $(call opt,--config,$(CONFIG)) $(call opt,--logdir,$(LOGDIR)) $(call opt,--resume,$(RESUME)) \
             $(call opt,--cluster,$(CLUSTER)) $(ARGS)

.PHONY: check install-dev install install-cluster install-baselines install-mujoco install-benchmark benchmark train test test-slow test-all soak sweep report bench play baseline-sb3 install-sf baseline-sf evidence figures ablation clean-venv

install: $(STAMP)

# Ray, for CLUSTER=... runs (optional: a single-machine run never imports it). `make test` needs it too.
CLUSTER_STAMP := $(VENV)/.installed-cluster
install-cluster: $(CLUSTER_STAMP)

$(CLUSTER_STAMP): requirements-cluster.txt $(STAMP)
	$(PY) -m pip install --quiet -r requirements-cluster.txt
	touch $(CLUSTER_STAMP)

# Stable-Baselines3, for the side-by-side comparison only (baselines/sb3_a2c.py); nothing else imports it.
BASELINES_STAMP := $(VENV)/.installed-baselines
install-baselines: $(BASELINES_STAMP)

$(BASELINES_STAMP): requirements-baselines.txt $(STAMP)
	$(PY) -m pip install --quiet -r requirements-baselines.txt
	touch $(BASELINES_STAMP)

# Sample Factory, the peer of docs/results.md (baselines/sf_appo.py), in a venv of its own: it pins gymnasium 0.29.
SF_VENV := .venv-sf
SF_STAMP := $(SF_VENV)/.installed
install-sf: $(SF_STAMP)

$(SF_STAMP): requirements-sf.txt
	$(PYTHON) -m venv $(SF_VENV)
	$(SF_VENV)/bin/python -m pip install --quiet -r requirements-sf.txt
	touch $(SF_STAMP)

# MuJoCo, for its continuous-control tasks (GAME=InvertedPendulum-v5, HalfCheetah-v5); nothing else needs it.
MUJOCO_STAMP := $(VENV)/.installed-mujoco
install-mujoco: $(MUJOCO_STAMP)

$(MUJOCO_STAMP): requirements-mujoco.txt $(STAMP)
	$(PY) -m pip install --quiet -r requirements-mujoco.txt
	touch $(MUJOCO_STAMP)

# rliable, for the benchmark suite's report (IQM with bootstrap intervals); nothing else needs it.
BENCHMARK_STAMP := $(VENV)/.installed-benchmark
install-benchmark: $(BENCHMARK_STAMP)

$(BENCHMARK_STAMP): requirements-benchmark.txt $(STAMP)
	$(PY) -m pip install --quiet -r requirements-benchmark.txt
	touch $(BENCHMARK_STAMP)

# The checkout itself is installed too (editable: edits take effect at once), so .venv has the console commands.
$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt "setuptools>=77"
	PYTHONWARNINGS=ignore $(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

# pytest and ruff, for `make test` and `make check` (the package's dev extra; training needs neither).
DEV_STAMP := $(VENV)/.installed-dev
install-dev: $(DEV_STAMP)

$(DEV_STAMP): requirements-dev.txt $(STAMP)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(DEV_STAMP)

train: $(STAMP) $(if $(strip $(CLUSTER)),$(CLUSTER_STAMP))
	$(VENV)/bin/hogwild-train $(TRAIN_ARGS)

# Two tiers (tests/conftest.py SLOW_MODULES): `make test` proves every feature on real processes with tiny
# budgets; `make test-slow` the learning proofs, the cluster, the benchmark suite and the optional extras' tasks
# (it installs those extras). .ci/run runs both; `make test-all` too.
test: $(STAMP) $(DEV_STAMP)
	$(PY) -m pytest -q -m "not slow" tests

test-slow: $(STAMP) $(DEV_STAMP) $(CLUSTER_STAMP) $(MUJOCO_STAMP) $(BENCHMARK_STAMP) $(BASELINES_STAMP) $(SF_STAMP)
	$(PY) -m pytest -q -m slow tests

test-all: test test-slow

# Fast feedback (under a minute): ruff, and the tests that train nothing (maths, config, envs, shared memory,
# the worker's pieces inline, the package's layout).
CHECK_TESTS := tests/test_algorithms.py tests/test_schedules.py tests/test_networks.py tests/test_envs.py \
               tests/test_shared.py tests/test_layout.py tests/test_replay.py tests/test_cli.py tests/test_worker.py

check: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q $(CHECK_TESTS)

# The shell loop of a thread-count sweep: one run per (threads, seed), each in its own run dir under LOGDIR.
SWEEP_ARGS = $(call opt,--game,$(GAME)) $(call opt,--algo,$(ALGO)) $(call opt,--frames,$(FRAMES)) \
             $(call opt,--config,$(CONFIG)) $(call opt,--logdir,$(LOGDIR)) $(ARGS)
sweep: $(STAMP)
	@test -n "$(strip $(SEEDS))" || { echo "make sweep: SEEDS is empty: give the seeds to run, e.g. SEEDS=\"1 2 3\"" >&2; exit 2; }
	@set -e; for t in $(or $(THREADS),1 2); do for s in $(SEEDS); do \
	  echo "== sweep: threads $$t, seed $$s"; \
	  $(VENV)/bin/hogwild-train $(SWEEP_ARGS) --threads $$t --seed $$s; \
	done; done

# Curves, the speedup table and frames/s of every run under LOGDIR (default runs), written into LOGDIR.
report: $(STAMP)
	$(PY) -m hogwild_dqn.tools.report --logdir $(or $(LOGDIR),runs) $(call opt,--score,$(SCORE)) $(call opt,--game,$(GAME))

# Throughput: bare emulator and every algorithm (dqn too) at 1 and 2 workers, medians of 3 repeats.
bench: $(STAMP)
	$(PY) -m hogwild_dqn.tools.bench $(BENCH_ARGS)

# Watch a trained agent: EPISODES whole games from RUN's checkpoint.pt, its last weights (ARGS=--best: best.pt),
# scores and play.mp4.
play: $(STAMP)
	$(PY) -m hogwild_dqn.play $(or $(RUN),$(error give the run dir: make play RUN=runs/...)) --episodes $(EPISODES) $(ARGS)

# SB3 A2C with rl-zoo's Atari hyperparameters, evaluated and summarized as our runs (docs/results.md).
BASELINE_GAME = $(or $(GAME),Breakout)
baseline-sb3: $(BASELINES_STAMP)
	$(PY) baselines/sb3_a2c.py --game $(BASELINE_GAME) --frames $(or $(FRAMES),10000000) --seed $(or $(SEED),1) \
	  --run-dir $(or $(RUN_DIR),runs/sb3-a2c-$(BASELINE_GAME)-s$(or $(SEED),1)) $(ARGS)

# Sample Factory's APPO with its Atari defaults (baselines/sf_appo.py): GAME, SEED, SECONDS (the wall budget; 10M
# frames at most), scored over 30 whole games.
baseline-sf: $(SF_STAMP)
	$(SF_VENV)/bin/python baselines/sf_appo.py --game $(BASELINE_GAME) --seed $(or $(SEED),1) --seconds $(or $(SECONDS),3600) \
	  --run-dir $(or $(RUN_DIR),runs/sf-appo-$(BASELINE_GAME)-s$(or $(SEED),1)) $(ARGS)

# docs/results.md's runs: every one (or ROWS="name ..."), one after another, skipping finished ones (hours).
evidence: $(STAMP)
	EVIDENCE_DIR=$(or $(LOGDIR),runs/evidence) scripts/evidence.sh $(ROWS)

# docs/results.md's figures that are kept as CSV under docs/, redrawn (scripts/figures.sh).
figures: $(STAMP)
	PY=$(PY) scripts/figures.sh

# The benchmark suite: GAMES x SEEDS (default: six games, seeds 1-3, the default algorithm (PPO on Atari; ALGO=a3c),
# 10M frames each; hours), one run after another into LOGDIR (runs/benchmark), resumable, then benchmark.md with
# the IQM over games (docs/results.md).
# SUITE=mujoco: four MuJoCo tasks x 1M steps with the MuJoCo default (PPO; ALGO=a3c for A3C), each beside
# Stable-Baselines3 A2C (runs/benchmark-mujoco).
# RECORD=DIR keeps each ended run's summary there (docs/benchmark/records for this repository's results).
benchmark: $(BENCHMARK_STAMP) $(if $(filter mujoco,$(SUITE)),$(BASELINES_STAMP) $(MUJOCO_STAMP))
	$(PY) -m hogwild_dqn.tools.benchmark $(call opt,--suite,$(SUITE)) $(call opt,--logdir,$(LOGDIR)) \
	  $(call opt,--games,$(GAMES)) $(call opt,--seeds,$(or $(SEEDS_LIST),$(seeds_given))) $(call opt,--frames,$(FRAMES)) \
	  $(call opt,--algo,$(ALGO)) $(call opt,--threads,$(THREADS)) $(call opt,--record,$(RECORD)) $(BENCHMARK_ARGS)

# DQN's replay memory x target network, on and off, on CartPole with 5 seeds: table and plot (docs/results.md).
ablation: $(STAMP)
	$(PY) -m hogwild_dqn.tools.ablation $(call opt,--logdir,$(LOGDIR)) $(call opt,--frames,$(FRAMES)) \
	  $(call opt,--game,$(GAME)) $(call opt,--threads,$(THREADS)) $(call opt,--seeds,$(seeds_given)) \
	  $(call opt,--score,$(SCORE)) $(ARGS)

# Memory soak: a real Pong run for MINUTES; RSS of every process at minute 5 and at the end.
soak: $(STAMP)
	$(PY) -m hogwild_dqn.tools.soak --minutes $(MINUTES) -- $(TRAIN_ARGS)

clean-venv:
	rm -rf $(VENV)
