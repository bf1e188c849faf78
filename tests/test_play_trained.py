"""Playing a trained agent: `make play`, `python -m hogwild_dqn.play` and `hogwild_dqn.load_policy` on the real
CartPole run that the learning proofs train (conftest.cartpole_a3c, stopped at its first confirmed evaluation
>= 400). In the second tier (`make test-slow`) with those proofs, so that the run is trained once per tier: a
trained agent is what tells the last weights from the initial ones or the best, which an untrained run cannot."""

import math
import re
import shutil
import signal
import sys
import time

import imageio.v2 as imageio
import numpy as np
import pytest

import hogwild_dqn
from hogwild_dqn.config import ConfigError
from hogwild_dqn.evaluation.games import play_episode
from tests.conftest import read_summary, run_play, start


@pytest.fixture(scope="module")
def trained(cartpole_a3c, tmp_path_factory):
    """A copy of the shared A3C CartPole run (conftest.cartpole_a3c: stopped at its first evaluation >= 400),
    since playing writes play.mp4 into the run dir."""
    run = tmp_path_factory.mktemp("play") / "cartpole"
    shutil.copytree(cartpole_a3c, run)
    return run


def scores_as_recorded(games, recorded):
    """Games on other seeds than the evaluator's score as its final evaluation did: equal within the noise of both
    samples (and CartPole's cap of 500)."""
    noise = 3 * math.sqrt(recorded["std_return"] ** 2 / recorded["episodes"] + np.var(games) / len(games)) + 25
    return abs(np.mean(games) - recorded["mean_return"]) <= noise


def test_make_play_scores_as_the_evaluator_recorded_and_writes_a_video(trained):
    recorded = read_summary(trained)["final_eval"]  # the last weights over 30 games: the run's score
    proc = run_play(f"RUN={trained}", "EPISODES=10", make=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    games = [float(g) for g in re.findall(r"^game \d+: (\S+)$", proc.stdout, re.M)]
    assert len(games) == 10 and f"{trained / 'checkpoint.pt'}: the last weights, a3c on CartPole-v1" in proc.stdout
    m = re.search(r"^mean (\S+) ± (\S+) over 10 games, min (\S+), max (\S+); video (\S+)$", proc.stdout, re.M)
    assert m, proc.stdout
    mean, _, low, high = map(float, m.groups()[:4])
    assert math.isclose(mean, np.mean(games)) and low == min(games) and high == max(games)
    assert scores_as_recorded(games, recorded), (games, recorded)
    video = trained / "play.mp4"
    assert m.group(5) == str(video)
    with imageio.get_reader(video) as reader:
        frames = reader.count_frames()
        first = reader.get_data(0)
    assert frames == games[0]  # CartPole pays 1 per step: one screen per step of the first game
    assert first.shape == (400, 600, 3) and first.std() > 0


def test_a_game_cut_short_leaves_the_last_video_as_it_was(trained):
    """Ctrl-C while the first game is being filmed: the part-video is dropped, play.mp4 from before is kept."""
    kept = trained / "play.mp4"
    if not kept.exists():
        assert run_play(trained, "--episodes", "1").returncode == 0
    before = kept.read_bytes()
    proc = start([sys.executable, "-m", "hogwild_dqn.play", trained, "--episodes", "3"])
    filming, deadline = trained / ".play.mp4.tmp.mp4", time.time() + 120
    while not filming.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert filming.exists(), "the first game was never filmed"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == "play: interrupted", err
    assert kept.read_bytes() == before and not filming.exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_play_stops_on_a_signal_while_filming_even_started_with_sigint_ignored(trained, signum):
    """SDL (the screens' renderer) took SIGTERM for its own queue: `kill` did not stop a filming play; nor did
    `kill -INT` one started as a script's background job (SIGINT ignored)."""
    proc = start([sys.executable, "-m", "hogwild_dqn.play", trained, "--episodes", "1000000"],
                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    filming, deadline = trained / ".play.mp4.tmp.mp4", time.time() + 120
    while not filming.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert filming.exists(), "the first game was never filmed"
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    code, word = {signal.SIGTERM: (143, "terminated"), signal.SIGINT: (130, "interrupted")}[signum]
    assert proc.returncode == code and err.strip().splitlines() == [f"play: {word}"], err
    assert not filming.exists()


def test_load_policy_acts_on_the_env_make_env_builds(trained):
    """The last weights by default (checkpoint.pt, which the run's score is of; not best.pt, the maximum of noisy
    5-game evaluations)."""
    policy = hogwild_dqn.load_policy(trained)
    assert policy.source == trained / "checkpoint.pt" and policy.cfg.game == "CartPole-v1" and policy.frames > 0
    final = read_summary(trained)["final_eval"]
    assert policy.frames == final["frames"]  # the weights the score is about
    env = hogwild_dqn.make_env(policy.cfg, seed=123, for_eval=True)
    try:
        scores = [play_episode(policy, env) for _ in range(10)]
    finally:
        env.close()
    # the last weights play as their final evaluation recorded, not as the best one (best.pt's, which a stochastic
    # policy's last weights can fall well below: 79, 64 and 500 against a best of 467.1 once)
    assert scores_as_recorded(scores, final), scores
    assert hogwild_dqn.load_policy(trained, best=True).source == trained / "best.pt"
    (trained / "best.pt").rename(trained / "best.pt.away")
    try:
        with pytest.raises(ConfigError, match="holds no best.pt"):
            hogwild_dqn.load_policy(trained, best=True)
    finally:
        (trained / "best.pt.away").rename(trained / "best.pt")
    proc = run_play(trained, "--episodes", "1", "--best", "--no-video")
    assert proc.returncode == 0 and f"{trained / 'best.pt'}: the best periodic evaluation's weights" in proc.stdout


def test_load_policy_can_be_deterministic_and_take_the_last_weights(trained):
    policy = hogwild_dqn.load_policy(trained, deterministic=True)
    assert policy.deterministic and not hogwild_dqn.load_policy(trained).deterministic
    last = hogwild_dqn.load_policy(trained, last=True)
    assert last.source == trained / "checkpoint.pt" and last.frames == read_summary(trained)["frames"]
    proc = run_play(trained, "--episodes", "1", "--last", "--no-video")  # --last: the default, still accepted
    assert proc.returncode == 0 and f"{trained / 'checkpoint.pt'}: the last weights, a3c on CartPole-v1" \
        in proc.stdout, proc.stderr


def test_play_epsilon_is_refused_for_an_actor_critic_run(trained):
    proc = run_play(trained, "--no-video", "--epsilon", "0.1")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.startswith("play: error: ") and "--epsilon is for the Q methods" in proc.stderr
    assert proc.stderr.count("\n") == 1
