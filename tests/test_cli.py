"""Bad input: one line on stderr naming the value, exit code 2, no traceback, nothing created."""

import importlib.util
import re

import pytest

from hogwild_dqn.config import CONFIG_DIR, DEFAULT_ALGO, ConfigError, first_line, load, start_line
from tests.conftest import ROOT, run_train

BAD = [
    (["--algo", "dqnn"], "--algo 'dqnn' is unknown; choose one of q1, sarsa1, nq, a3c, dqn"),
    (["--algo", "dqn", "--replay-size", "0"], "--replay-size must be a positive integer, got 0"),
    (["--algo", "dqn", "--replay-size", "16", "--batch-size", "32"], "--batch-size 32 is larger than --replay-size 16"),
    (["--algo", "dqn", "--game", "Pong", "--envs-per-worker", "8"], "--algo dqn plays one game per worker"),
    (["--algo", "dqn", "--game", "Pong", "--replay-size", "1e9"], "GiB of it --replay-size 1,000,000,000 transitions"),
    (["--game", "Pong", "--algo", "ppo", "--threads", "5000"], "workers fit (--force starts it anyway)"),
    (["--game", "Pongg"], "did you mean Pong"),
    (["--game", "Pong-v5"], "--game 'Pong-v5' is unknown; did you mean ALE/Pong-v5, Pong"),
    (["--game", "PongNoFrameskip-v4"], "--game 'PongNoFrameskip-v4' is one of gymnasium's older ALE ids, whose frame "
                                       "skip and sticky actions are their own; give the game's name (Pong)"),
    (["--threads", "0"], "--threads must be a positive integer"),
    (["--hang-seconds", "0"], "--hang-seconds must be a positive number, got 0.0"),
    (["--hang-seconds", "-5"], "--hang-seconds must be a positive number, got -5.0"),
    (["--hang-seconds", "nan"], "--hang-seconds must be a finite number, got nan"),
    (["--hang-seconds", "inf"], "--hang-seconds must be a finite number, got inf"),
    (["--threads", "-2"], "--threads must be a positive integer"),
    (["--threads", "two"], "must be an integer, got 'two'"),
    (["--frames", "0"], "--frames must be a positive integer"),
    (["--frames", "2.5"], "argument --frames: must be an integer, got '2.5'"),
    (["--lr", "0"], "--lr must be a positive number"),
    (["--lr", "fast"], "must be a number, got 'fast'"),
    (["--lr", "inf"], "--lr must be a finite number, got inf"),
    (["--value-coef", "nan"], "--value-coef must be a finite number, got nan"),
    (["--entropy-beta", "inf"], "--entropy-beta must be a finite number, got inf"),
    (["--lr=-inf"], "--lr must be a finite number, got -inf"),
    (["--adam-betas", "0.9", "nan"], "--adam-betas must be a finite number, got nan"),
    (["--eps-finals", "0.1", "inf", "--eps-probs", "0.5", "0.5"], "--eps-finals must be a finite number, got inf"),
    (["--frames", "1000", "--eval-every", "5000"], "--eval-every 5000 is larger than --frames 1000"),
    (["--seed", "-1"], "--seed must be an integer >= 0, got -1"),
    (["--seed", str(2**64)], f"--seed must be below 2**63, got {2**64}"),  # torch's seed is a signed 64-bit one
    (["--optimizer", "adam", "--adam-betas", "0.9"], "--adam-betas must be two numbers in [0, 1), got [0.9]"),
    (["--adam-betas", "1.5", "0.9"], "--adam-betas must be two numbers in [0, 1), got [1.5, 0.9]"),
    (["--eps-finals", "0.1", "0.2", "--eps-probs", "1.5", "-0.5"], "--eps-probs must be probabilities in [0, 1]"),
    (["--config", "no/such.yaml"], "config file no/such.yaml does not exist"),
    (["--screen-size", "10"], "--screen-size 10 is too small for --torso paper's convolutions; they need 20 or more"),
    (["--screen-size", "30", "--torso", "nature"], "they need 36 or more"),
    (["--screen-size", "60000"], "--screen-size 60000 is larger than the ALE's screens (210x160)"),
    (["--cluster", "127.0.0.1:99999"], "--cluster's port must be 1-65535, got '127.0.0.1:99999'"),
    (["--cluster", "[::1]:0"], "--cluster's port must be 1-65535, got '[::1]:0'"),
    (["--stop-return", "high"], "argument --stop-return: must be a number, got 'high'"),
    (["--stop-return", "nan"], "--stop-return must be a finite number, got nan"),
    (["--envs-per-worker", "0"], "--envs-per-worker must be a positive integer"),
    (["--net", "gru"], "--net 'gru' is unknown; choose one of ff, lstm"),
    (["--torso", "resnet"], "--torso 'resnet' is unknown; choose one of paper, nature"),
    (["--init", "xavier"], "--init 'xavier' is unknown; choose one of torch, orthogonal"),
    (["--algo", "nq", "--net", "lstm"], "--net lstm needs a3c; --algo nq trains ff networks only"),
    (["--algo", "dqn", "--net", "lstm"], "--net lstm needs a3c; --algo dqn trains ff networks only"),
    (["--algo", "q1", "--game", "Pendulum-v1"], "--game 'Pendulum-v1' has continuous (Box) actions; --algo q1 "
                                                "needs discrete ones (continuous actions: --algo a3c or ppo)"),
    (["--algo", "dqn", "--game", "Pendulum-v1", "--envs-per-worker", "1"], "--algo dqn needs discrete ones"),
    (["--game", "Pong", "--obs-normalize", "--obs-standardize"], "--obs-normalize (running statistics of each "
                                                                  "input) and --obs-standardize"),
    (["--game", "CartPole-v1", "--algo", "dqn", "--obs-normalize"], "--obs-normalize is not available for --algo dqn"),
    (["--game", "Pong", "--reward-normalize"], "--reward-normalize is for vector tasks; Atari's rewards are clipped"),
    # a MuJoCo task with a discrete --algo: the actions are said first, not the a3c preset's values
    (["--game", "Hopper-v5", "--algo", "dqn"], "--game 'Hopper-v5' has continuous (Box) actions; --algo dqn needs "
                                               "discrete ones (continuous actions: --algo a3c or ppo)"),
    (["--game", "CartPole-v1", "--algo", "q1", "--obs-normalize", "--cluster", "auto"],
     "--obs-normalize on a cluster is for a3c and ppo (--algo q1's target network would not get the statistics)"),
    (["--game", "Pong", "--algo", "a3c", "--value-normalize"], "--value-normalize is PPO's (--algo ppo); --algo a3c "
                                                                 "learns raw returns"),
    (["--game", "Pendulum-v1", "--policy-std-init", "-1"], "--policy-std-init must be a number >= 0, got -1.0"),
    (["--game", "Pendulum-v1", "--policy-std-max", "nan"], "--policy-std-max must be a finite number, got nan"),
    (["--game", "Pendulum-v1", "--policy-std-init", "1", "--policy-std-max", "1"], "is not; choose one"),
    (["--game", "Pong", "--lstm-norm"], "--lstm-norm normalizes the LSTM cells' input; it needs --net lstm"),
    (["--game", "CartPole-v1", "--algo", "dqn", "--threads", "2", "--replay-size", "1000", "--learning-starts",
      "5000"], "--learning-starts 5,000 frames is more than 2 replay memories of --replay-size 1,000 transitions can "
               "be relied on to hold (1,800 frames): the workers would never learn"),
    (["--game", "CartPole-v1", "--algo", "dqn", "--threads", "2", "--replay-size", "1000", "--learning-starts",
      "5000", "--cluster", "auto"], "can be relied on to hold (1,800 frames): the workers would never learn"),
    (["--game", "Blackjack-v1"], "--game 'Blackjack-v1' has observations of no shape (Tuple("),
    *([] if importlib.util.find_spec("jax") else  # gymnasium's phys2d games need jax, which we do not install
      [(["--game", "phys2d/CartPole-v1"], "--game 'phys2d/CartPole-v1' needs jax, which is not installed")]),
    (["--game", "Pong", "--net", "lstm", "--lstm-norm-eps", "0"], "--lstm-norm-eps must be a positive number"),
]


@pytest.mark.parametrize("args, message", BAD)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    proc = run_train("--run-dir", tmp_path / "run", *args, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert message in lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("text, message", [
    ("lr: [oops\n", "is not valid YAML"),
    ("learning_rate: 0.1\n", "unknown key 'learning_rate'"),
    ("frames: lots\n", "key 'frames' must be of type int"),
    ("- a\n- b\n", "must hold a mapping"),
    ("base: missing.yaml\n", "missing.yaml does not exist"),
    ("base: bad.yaml\n", "'base' chain comes back to itself"),
    ("base: [atari.yaml]\n", "key 'base' must name a YAML file"),
    ("", "holds no settings"),
    ("# all commented out\n", "holds no settings"),
    ("lr: -1\n", "--lr must be a positive number, got -1.0 (lr: set in"),
])
def test_bad_config_file(tmp_path, text, message):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    proc = run_train("--config", cfg, "--run-dir", tmp_path / "run", timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr and str(cfg) in proc.stderr


def test_a_bad_value_names_the_file_that_set_it_not_only_its_flag(tmp_path):
    """validate() names flags; a value from a file (the preset, its base, a resumed run's config.yaml) says which
    file set it; one from the command line does not."""
    mine = tmp_path / "my.yaml"
    mine.write_text("lr: -1\n")
    with pytest.raises(ConfigError, match=re.escape(f"--lr must be a positive number, got -1.0 (lr: set in {mine})")):
        load(["--config", str(mine)])
    with pytest.raises(ConfigError) as given:
        load(["--config", str(mine), "--lr", "-2"])
    assert str(given.value) == "--lr must be a positive number, got -2.0"
    # a value the file's base set is the base's, not this file's
    mine.write_text(f"base: {CONFIG_DIR / 'ppo_atari.yaml'}\nt_max: 5\n")
    with pytest.raises(ConfigError, match=re.escape(f"(value-normalize: set in {CONFIG_DIR / 'ppo_atari.yaml'})")):
        load(["--config", str(mine), "--algo", "a3c"])
    mine.write_text(f"base: {CONFIG_DIR / 'cartpole.yaml'}\neps_finals: [0.1, 2.0]\n")
    with pytest.raises(ConfigError, match=re.escape(f"--eps-finals must lie in [0, 1], got [0.1, 2.0] (eps-finals: "
                                                    f"set in {mine})")):
        load(["--config", str(mine)])


def test_a_number_written_1e_3_in_a_config_file_is_that_number(tmp_path):
    """YAML 1.1 (PyYAML) reads 1e-3, without a dot, as text: a config file means the number, and gets it; a
    word stays refused."""
    for text, lr in (("lr: 1e-3\n", 0.001), ("lr: 5E-4\n", 0.0005), ("lr: .5e-2\n", 0.005)):
        (tmp_path / "c.yaml").write_text("base: " + str(ROOT / "configs" / "cartpole.yaml") + "\n" + text)
        assert load(["--config", str(tmp_path / "c.yaml")])[0].lr == lr
    (tmp_path / "c.yaml").write_text("lr: 1e-3x\n")
    with pytest.raises(ConfigError, match="key 'lr' must be of type float, got '1e-3x'"):
        load(["--config", str(tmp_path / "c.yaml")])
    # an int setting written as a whole number in exponent form, as the command line takes it
    for text, frames in (("frames: 1e7\n", 10_000_000), ("frames: 1.0e+7\n", 10_000_000), ("frames: 3e5\n", 300_000)):
        (tmp_path / "c.yaml").write_text(text)
        assert load(["--config", str(tmp_path / "c.yaml")])[0].frames == frames
    for text in ("frames: 1.5e0\n", "frames: 2.5\n"):
        (tmp_path / "c.yaml").write_text(text)
        with pytest.raises(ConfigError, match="key 'frames' must be of type int"):
            load(["--config", str(tmp_path / "c.yaml")])


def test_unwritable_run_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = run_train("--game", "CartPole-v1", "--run-dir", blocker / "run", timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "is not writable" in proc.stderr and blocker.read_text() == "not a directory"


def test_existing_run_dir_is_refused_and_kept(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(b"precious")
    proc = run_train("--game", "CartPole-v1", "--run-dir", run, timeout=120)
    assert proc.returncode == 2 and f"--resume {run}" in proc.stderr
    assert (run / "checkpoint.pt").read_bytes() == b"precious" and len(list(run.iterdir())) == 1


def test_resume_refuses_another_config_run_dir_or_logdir(tmp_path):
    for flag in ("--config", "--run-dir", "--logdir"):
        proc = run_train("--resume", tmp_path / "run", flag, tmp_path / "other", timeout=120)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert f"continues that run with its own config.yaml, in its own dir; {flag} cannot change them" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_resume_from_missing_or_corrupt_checkpoint(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for missing in (tmp_path / "no-such-run", tmp_path / "no-such-run" / "deeper"):
        proc = run_train("--resume", missing, timeout=120)
        assert proc.returncode == 2 and proc.stderr == f"train.py: error: --resume {missing}: no such run dir\n"
    proc = run_train("--resume", run, timeout=120)
    assert proc.returncode == 2 and "config.yaml does not exist" in proc.stderr
    (run / "config.yaml").write_text("game: CartPole-v1\nalgo: a3c\n")
    (run / "checkpoint.pt").write_bytes(b"\x00garbage")
    proc = run_train("--resume", run, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "truncated or corrupted" in proc.stderr and (run / "checkpoint.pt").read_bytes() == b"\x00garbage"


@pytest.mark.parametrize("preset", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_every_preset_loads_and_validates(preset):
    cfg, _, _ = load(["--config", str(preset)])
    assert cfg.to_dict()["game"]


@pytest.mark.parametrize("game", ["Pong", "Breakout", "ALE/Qbert-v5"])
def test_ale_games_default_to_the_preset_that_learns_on_few_cores(game):
    cfg, _, source = load(["--game", game])
    assert source == CONFIG_DIR / "ppo_atari.yaml" and cfg.algo == "ppo"  # the default (DEFAULT_ALGO)
    cfg, _, source = load(["--game", game, "--algo", "a3c"])
    assert source == CONFIG_DIR / "atari.yaml"
    assert (cfg.envs_per_worker, cfg.rms_eps, cfg.obs_standardize, cfg.grad_clip) == (8, 1e-5, True, 2.5)
    paper, _, source = load(["--game", game, "--config", str(CONFIG_DIR / "paper.yaml")])
    assert source == CONFIG_DIR / "paper.yaml"
    assert (paper.envs_per_worker, paper.rms_eps, paper.obs_standardize, paper.grad_clip) == (1, 0.1, False, 40.0)
    assert load(["--game", "CartPole-v1"])[2] == CONFIG_DIR / "cartpole.yaml"


@pytest.mark.parametrize("game, preset", [("InvertedPendulum-v5", "ppo_mujoco.yaml"),
                                          ("HalfCheetah-v5", "ppo_mujoco.yaml"),
                                          ("Pendulum-v1", "pendulum.yaml"), ("Acrobot-v1", "cartpole.yaml")])
def test_continuous_control_tasks_take_their_presets(game, preset):
    cfg, _, source = load(["--game", game])
    assert source == CONFIG_DIR / preset and cfg.game == game
    if preset == "ppo_mujoco.yaml":  # standardized observations, a learned state-independent deviation
        assert cfg.algo == "ppo" and cfg.obs_normalize and cfg.policy_std_init == 1.0
        a3c, _, source = load(["--game", game, "--algo", "a3c"])  # one --algo away, with the same input and head
        assert source == CONFIG_DIR / "mujoco.yaml" and a3c.obs_normalize and a3c.policy_std_init == 1.0


def test_lstm_takes_the_atari_preset_with_longer_segments_and_a_normalized_input():
    cfg, _, source = load(["--game", "Pong", "--net", "lstm"])
    ff, _, _ = load(["--game", "Pong", "--algo", "a3c"])
    assert source == CONFIG_DIR / "atari_lstm.yaml" and (cfg.net, cfg.t_max, ff.t_max) == ("lstm", 20, 5)
    assert cfg.lstm_norm and not ff.lstm_norm and cfg.lstm_norm_eps == 0.01
    differ = {k for k, v in cfg.to_dict().items() if ff.to_dict()[k] != v}
    assert differ == {"net", "t_max", "lstm_norm", "lstm_norm_eps"}  # the rest: atari.yaml, through `base:`
    assert load(["--game", "Pong", "--net", "lstm", "--t-max", "5"])[0].t_max == 5  # the command line wins


def test_dqn_takes_its_own_preset_on_ale_games():
    cfg, _, source = load(["--game", "Breakout", "--algo", "dqn"])
    assert source == CONFIG_DIR / "dqn_atari.yaml"
    assert (cfg.replay_size, cfg.batch_size, cfg.optimizer, cfg.lr) == (100_000, 32, "adam", 1e-4)
    assert load(["--game", "CartPole-v1", "--algo", "dqn"])[2] == CONFIG_DIR / "cartpole.yaml"


def test_ppo_takes_its_own_presets_and_checks_its_values():
    cfg, _, source = load(["--game", "Breakout", "--algo", "ppo"])
    assert source == CONFIG_DIR / "ppo_atari.yaml"
    assert (cfg.t_max, cfg.envs_per_worker, cfg.epochs, cfg.minibatches, cfg.ppo_clip, cfg.gae_lambda,
            cfg.optimizer, cfg.lr, cfg.grad_clip) == (128, 8, 4, 4, 0.1, 0.95, "adam", 2.5e-4, 0.5)
    assert cfg.fire_reset and cfg.clip_rewards  # the Atari preset's env, through `base:`
    assert cfg.obs_normalize and not cfg.obs_standardize  # each pixel by the running statistics, not each frame
    assert cfg.value_normalize and not load(["--game", "Breakout", "--no-value-normalize"])[0].value_normalize
    assert load(["--game", "CartPole-v1", "--algo", "ppo"])[2] == CONFIG_DIR / "ppo_cartpole.yaml"
    assert load(["--game", "Pendulum-v1", "--algo", "ppo"])[2] == CONFIG_DIR / "pendulum.yaml"  # no ppo_ preset
    cfg, _, source = load(["--game", "Hopper-v5", "--algo", "ppo"])
    assert source == CONFIG_DIR / "ppo_mujoco.yaml"
    assert (cfg.t_max, cfg.envs_per_worker, cfg.epochs, cfg.minibatches, cfg.ppo_clip, cfg.lr,
            cfg.entropy_beta, cfg.reward_normalize, cfg.obs_normalize) == (1024, 1, 10, 16, 0.2, 3e-4, 0.0, True, True)
    assert load(["--game", "Pong", "--algo", "a3c"])[0].gae_lambda == 1.0  # A3C's n-step advantage, unless asked


def test_without_algo_a_game_trains_with_its_kinds_default(monkeypatch):
    """DEFAULT_ALGO decides the preset when --algo is not given; any other algorithm is one --algo away."""
    assert load(["--game", "Pong"])[0].algo == DEFAULT_ALGO["atari"]
    assert load(["--game", "Hopper-v5"])[0].algo == DEFAULT_ALGO["mujoco"]
    monkeypatch.setitem(DEFAULT_ALGO, "atari", "ppo")
    monkeypatch.setitem(DEFAULT_ALGO, "mujoco", "ppo")
    cfg, _, source = load(["--game", "Breakout"])
    assert (source, cfg.algo, cfg.t_max) == (CONFIG_DIR / "ppo_atari.yaml", "ppo", 128)
    cfg, _, source = load(["--game", "Breakout", "--algo", "a3c"])
    assert (source, cfg.algo, cfg.t_max) == (CONFIG_DIR / "atari.yaml", "a3c", 5)
    assert load(["--game", "Pong", "--net", "lstm"])[2] == CONFIG_DIR / "atari_lstm.yaml"  # its own kind
    assert load(["--game", "Hopper-v5"])[2] == CONFIG_DIR / "ppo_mujoco.yaml"
    assert load(["--game", "Pendulum-v1"])[2] == CONFIG_DIR / "pendulum.yaml"  # its own preset, whatever the kind's
    for bad, says in ((["--minibatches", "2000"], "more than a rollout's 1024 steps"),
                      (["--gae-lambda", "1.5"], "--gae-lambda must lie in [0, 1]"),
                      (["--epochs", "0"], "--epochs must be a positive integer"),
                      (["--ppo-clip", "0"], "--ppo-clip must be a positive number")):
        with pytest.raises(ConfigError, match=re.escape(says)):
            load(["--game", "Breakout", "--algo", "ppo", *bad])


def test_an_exception_named_in_an_error_line_is_one_line_even_without_a_message():
    assert first_line(ValueError("bad value\n  at line 3")) == "bad value"
    assert first_line(RuntimeError()) == "RuntimeError" and first_line(ConnectionError("\n")) == "ConnectionError"


def test_the_first_line_counts_workers_and_games_in_the_singular_and_plural():
    cfg, _, source = load(["--game", "CartPole-v1", "--algo", "a3c", "--threads", "1", "--envs-per-worker", "1"])
    assert f"{cfg.variant()} on CartPole-v1, 1 worker x 1 game, " in start_line(cfg, source)
    cfg, _, source = load(["--game", "Pong", "--threads", "2"])
    assert "ppo-norm-vnorm on Pong, 2 workers x 8 games, " in start_line(cfg, source)


def test_help_is_grouped_shows_the_choices_and_loads_no_torch():
    """Every setting in one group of --help (run, environment, network, optimizer, each family, evaluation, cluster,
    faults), the named ones with their {choices}; printed without loading torch."""
    import dataclasses
    import subprocess
    import sys

    from hogwild_dqn.config import GROUPS, Config

    grouped = [name for names in GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(f.name for f in dataclasses.fields(Config)) and len(grouped) == len(set(grouped))
    code = ("import sys, contextlib, io; from hogwild_dqn.train import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            "    try: main(['--help'])\n"
            "    except SystemExit: pass\n"
            "print(out.getvalue()); print('TORCH' if 'torch' in sys.modules else 'NO TORCH')")
    text = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    assert text.rstrip().endswith("NO TORCH")
    for title in GROUPS:
        assert f"\n{title}:\n" in text
    assert "--algo {q1,sarsa1,nq,a3c,dqn,ppo,pqn}" in text and "--optimizer {rmsprop,adam,radam}" in text
    assert "--net {ff,lstm}" in text and "--torso {paper,nature}" in text and "--init {torch,orthogonal}" in text


def test_an_older_run_dirs_config_reads_as_todays(tmp_path):
    """A run dir or preset of an older version: --ppo-epochs / --ppo-minibatches read as --epochs / --minibatches; a
    removed setting at the value today's trainer runs with is dropped, at another it is one line (training on would
    change the run), as is one setting under both names with two values; a checkpoint's config, only played, drops
    removed settings whatever they were."""
    from hogwild_dqn.config import read_yaml, saved_values

    old = tmp_path / "config.yaml"
    old.write_text("algo: ppo\nppo_epochs: 2\nppo_minibatches: 8\nlearner_precision: fp32\nppo_decoupled: false\n")
    values = read_yaml(old)
    assert values["epochs"] == 2 and values["minibatches"] == 8
    assert "learner_precision" not in values and "ppo_decoupled" not in values
    old.write_text("algo: ppo\nlearner_precision: bf16\n")
    with pytest.raises(ConfigError, match=r"'learner_precision' is no longer a setting \(the trainer runs as with "
                                          r"'fp32'\); remove it to go on"):
        read_yaml(old)
    old.write_text("algo: ppo\nppo_epochs: 2\nepochs: 4\n")  # one setting under both names, two values
    with pytest.raises(ConfigError, match=r"'ppo_epochs' and 'epochs' are one setting \('epochs' is its name "
                                          r"today\), with two values \(2, 4\): keep one"):
        read_yaml(old)
    old.write_text("algo: ppo\nppo_epochs: 4\nepochs: 4\n")
    assert read_yaml(old)["epochs"] == 4
    played = {"algo": "ppo", "learner_precision": "bf16", "ppo_decoupled": True, "ppo_epochs": 3}
    assert saved_values(played, "checkpoint") == {"algo": "ppo", "epochs": 3}
    assert "learner_precision" in played  # the checkpoint's own dict is left as it was
