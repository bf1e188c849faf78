"""Evaluation written once: the evaluation points, late evaluators, --stop-return, and what a result records."""

import json
import sys

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from hogwild_dqn import metrics
from hogwild_dqn.evaluation.games import Recorder, play_games
from hogwild_dqn.evaluation.schedule import confirmation, needs_confirmation, next_point, points_skipped, stop_reason
from tests.conftest import run_cmd, run_train


def test_evaluation_points_fall_on_multiples_of_eval_every():
    assert [next_point(f, 500) for f in (0, 499, 500, 501, 1499)] == [500, 500, 1000, 1000, 1500]


def test_a_late_evaluator_counts_the_points_training_passed():
    assert points_skipped(500, 999, 500) == 0       # the next point (1000) is still ahead
    assert points_skipped(500, 1000, 500) == 0      # at it: evaluated next, nothing skipped
    assert points_skipped(500, 1600, 500) == 1      # 1000 passed, 1500 is taken by the newest weights
    assert points_skipped(500, 2600, 500) == 3


def test_a_stop_needs_a_periodic_evaluation_and_its_confirmation():
    """A periodic evaluation that reaches --stop-return only asks for a confirmation; the run stops on a
    confirmation over --final-eval-episodes games whose mean reaches it too, named in the status."""
    periodic = {"mean_return": 18.6, "episodes": 5, "final": False}
    assert needs_confirmation(periodic, 18) and not needs_confirmation(periodic, None)
    assert not needs_confirmation({**periodic, "mean_return": 17.9}, 18)
    assert stop_reason(periodic, 18) is None  # five games alone never stop a run
    held = confirmation({"mean_return": 18.2, "std_return": 1.0, "episodes": 30, "returns": []}, 18)
    failed = confirmation({"mean_return": 12.0, "std_return": 6.0, "episodes": 30, "returns": []}, 18)
    assert held["confirmation"] and held["final"] and failed["confirmation"] and not failed["final"]
    assert not needs_confirmation(held, 18) and not needs_confirmation(failed, 18)  # never a confirmation's
    assert stop_reason(failed, 18) is None and stop_reason(held, None) is None
    assert stop_reason(held, 18) == "solved: confirmed over 30 games, mean 18.2 >= --stop-return 18"


def test_a_confirmation_has_a_curve_of_its_own_and_is_never_a_best(tmp_path):
    from hogwild_dqn.evaluation.scores import best_periodic, confirmed, eval_record

    writer = metrics.make_writer(tmp_path, "evaluator")
    rec = Recorder(tmp_path, writer, best=5.0)
    failed = {"frames": 1000, "wall_seconds": 9.0, "mean_return": 12.0, "std_return": 3.0, "seconds": 1.0,
              "episodes": 30, "confirmation": True, "final": False}
    rec.record(failed, 1000, lambda best: {"best_eval_return": best})
    assert rec.best == 5.0 and not (tmp_path / "best.pt").exists()
    writer.close()
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars(metrics.CONFIRM_MEAN)] == [(1000, 12.0)]
    assert metrics.EVAL_MEAN not in events.Tags()["scalars"]
    assert eval_record(failed)["confirmation"] and best_periodic(5.0, [failed]) == 5.0
    held = {**failed, "frames": 2000, "wall_seconds": 20.0, "mean_return": 19.0, "final": True, "returns": [19.0]}
    assert confirmed([failed]) is None and confirmed([eval_record(held)]) is None  # an earlier session's
    assert confirmed([failed, held]) == {"frames": 2000, "wall_seconds": 20.0, "mean_return": 19.0, "episodes": 30}


def test_recorder_keeps_best_pt_and_the_gif_only_at_a_new_best(tmp_path):
    writer = metrics.make_writer(tmp_path, "evaluator")
    rec = Recorder(tmp_path, writer, best=5.0)
    gif = metrics.encode_gif([np.full((8, 12, 3), v, dtype=np.uint8) for v in (0, 255)])
    result = {"mean_return": 4.0, "std_return": 1.0, "seconds": 0.5}
    rec.record(result, 1000, lambda best: {"best_eval_return": best}, gif)  # below the earlier best: nothing
    assert not (tmp_path / "best.pt").exists() and not (tmp_path / "best_episode.gif").exists()
    rec.record({**result, "mean_return": 7.5}, 2000, lambda best: {"best_eval_return": best}, gif)
    assert rec.best == 7.5 and torch.load(tmp_path / "best.pt")["best_eval_return"] == 7.5
    assert (tmp_path / "best_episode.gif").read_bytes() == gif
    writer.close()
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert [e.step for e in events.Scalars(metrics.EVAL_MEAN)] == [1000, 2000]
    image = events.Images(metrics.BEST_EPISODE)[0]
    assert (image.step, image.width, image.height) == (2000, 12, 8)


def test_the_final_evaluation_is_the_score_not_a_best(tmp_path):
    """The final evaluation (the last weights over many games) goes to eval/final_*, and never to best.pt, which
    keeps the best periodic evaluation's weights; summary.json names it final_eval."""
    from hogwild_dqn.evaluation.scores import best_periodic, final_eval, final_line, result_line

    writer = metrics.make_writer(tmp_path, "evaluator")
    rec = Recorder(tmp_path, writer, best=5.0)
    final = {"mean_return": 9.0, "std_return": 2.0, "seconds": 3.0, "final": True, "frames": 3000,
             "episodes": 30, "returns": [9.0] * 30}
    rec.record(final, 3000, lambda best: {"best_eval_return": best})
    assert rec.best == 5.0 and not (tmp_path / "best.pt").exists()
    writer.close()
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars(metrics.FINAL_MEAN)] == [(3000, 9.0)]
    evals = [{"frames": 1000, "mean_return": 6.0}, {"frames": 2000, "mean_return": 7.0}, final]
    assert best_periodic(5.0, evals) == 7.0
    assert final_eval(evals) == {k: final[k] for k in ("frames", "mean_return", "std_return", "episodes", "returns")}
    assert final_eval(evals[:2]) is None and final_line(None) == "no final evaluation"
    assert final_line(final_eval(evals)) == "final eval 9 ± 2.0 over 30 games"
    assert (result_line({"final_eval": None, "best_eval_return": 384.20500919020657})
            == "no final evaluation, best periodic eval 384.205")  # a float's 17 digits are noise in a line


def test_a_run_ends_by_one_rule_on_one_machine_and_a_cluster():
    """evaluation.scores.ending, which runner.run and cluster.Driver.finish both call once the final evaluation
    was played or cut: its status and reason, and the last line both print."""
    import signal

    from hogwild_dqn import exits
    from hogwild_dqn.evaluation.scores import ending, last_line

    final = {"final": True, "frames": 100, "mean_return": 3.0, "std_return": 1.0, "episodes": 30, "returns": [3.0]}
    assert ending(0, "finished", [{"frames": 50, "mean_return": 1.0}, final], None) == (0, "finished")
    assert ending(0, "finished", [final], signal.SIGTERM) == (0, "finished")  # its score was played first
    assert ending(0, "finished", [], signal.SIGTERM) == (
        143, "unscored: interrupted (SIGTERM) during the final evaluation; --resume plays it")
    assert ending(0, "finished", [{"frames": 50, "mean_return": 1.0}], None) == (
        exits.UNSCORED, "unscored: finished, but the final evaluation was cut; --resume plays it")
    assert ending(exits.FAILED, "worker0 died", [], signal.SIGINT) == (exits.FAILED, "worker0 died")
    summary = {"frames": 2000, "wall_seconds": 30.0, "frames_per_second": 100.0,
               "final_eval": {k: final[k] for k in ("mean_return", "std_return", "episodes")}, "best_eval_return": 4.0}
    line = ("finished: 2000 frames in 20s (100 frames/s), final eval 3 ± 1.0 over 30 games, best periodic eval 4, "
            "run dir r")
    assert last_line("finished", summary, {"frames": 0, "wall_seconds": 10.0}, "r") == line
    assert last_line("finished", summary, {"frames": 0, "wall_seconds": 10.0}, "r", 3) == line.replace(
        "frames/s), final", "frames/s) on 3 machines, final")


def test_a_run_with_only_its_final_evaluation_has_no_best(tmp_path):
    """--eval-every equal to --frames: the final evaluation can come before any periodic one; summary.json then
    holds null (strict JSON, not -Infinity) and the last line and `play` say so, not -inf."""
    run = tmp_path / "run"
    proc = run_train("--game", "CartPole-v1", "--frames", 2000, "--eval-every", 2000, "--final-eval-episodes", 1,
                     "--video-steps", 0, "--run-dir", run, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((run / "summary.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    periodic = [e for e in summary["evals"] if not e["final"]]
    assert (summary["best_eval_return"] is None) == (not periodic)
    assert "inf" not in proc.stdout.strip().splitlines()[-1]
    played = run_cmd([sys.executable, "-m", "hogwild_dqn.play", str(run), "--episodes", "1", "--no-video"], 300)
    assert played.returncode == 0, played.stderr[-2000:]
    assert "inf" not in played.stdout.splitlines()[0]
    assert ("no periodic evaluation" in played.stdout) == (not periodic)


def test_a_confirmed_stop_keeps_the_confirmed_weights_and_scores_them(tmp_path):
    """Every CartPole game scores at least 0: the first periodic evaluation asks for a confirmation, which holds;
    the run stops, the confirmation is its final evaluation, and checkpoint.pt holds the confirmed weights (the
    frames trained while its games were played are dropped). Before the fix, the run stopped on the periodic
    evaluation's 2 games, with no score."""
    run = tmp_path / "run"
    proc = run_train("--game", "CartPole-v1", "--threads", 2, "--frames", 200_000, "--eval-every", 2000,
                     "--eval-episodes", 2, "--final-eval-episodes", 12, "--stop-return", 0, "--video-steps", 0,
                     "--run-dir", run, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = json.loads((run / "summary.json").read_text())
    periodic, confirm = s["evals"][-2:]
    assert not periodic["final"] and periodic["episodes"] == 2 and "confirmation" not in periodic
    assert confirm["confirmation"] and confirm["final"] and confirm["episodes"] == 12
    assert confirm["frames"] == periodic["frames"] == s["frames"] == s["final_eval"]["frames"]
    assert s["status"] == f"solved: confirmed over 12 games, mean {confirm['mean_return']:g} >= --stop-return 0"
    assert s["confirmed"] == {k: confirm[k] for k in ("frames", "wall_seconds", "mean_return", "episodes")}
    assert s["final_eval"]["episodes"] == 12 and s.get("frames_trained", s["frames"]) >= s["frames"]
    assert s["protocol"] == "CartPole-v1"
    assert torch.load(run / "checkpoint.pt", weights_only=True)["frames"] == s["frames"]
    events = EventAccumulator(str(run))
    events.Reload()
    assert [e.step for e in events.Scalars(metrics.CONFIRM_MEAN)] == [s["frames"]]
    # the sweep report gives the frames and minutes to the confirmed score, and draws no confirmation as a point
    from hogwild_dqn.tools.report import main as report

    assert report(["--logdir", str(tmp_path), "--score", "0"]) == 0
    row = next(line for line in (tmp_path / "report.md").read_text().splitlines() if line.startswith("| run | a3c |"))
    assert f"| {s['frames']:,}, {confirm['wall_seconds'] / 60:.1f} | {s['frames']:,} |" in row
    assert row.endswith("| CartPole-v1 |")


def test_a_confirmation_that_fails_lets_training_go_on(tmp_path):
    """A policy that does not learn (lr 1e-12) scores about 22 a CartPole game: single games of 35 or more come
    now and then, a 30-game mean of 35 never. Each such periodic evaluation is confirmed, fails, and training
    goes on to its last frame (all seeded: the same games every time)."""
    run = tmp_path / "run"
    proc = run_train("--game", "CartPole-v1", "--threads", 2, "--frames", 16_000, "--eval-every", 1000,
                     "--eval-episodes", 1, "--final-eval-episodes", 30, "--stop-return", 35, "--lr", 1e-12,
                     "--video-steps", 0, "--run-dir", run, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = json.loads((run / "summary.json").read_text())
    confirmations = [e for e in s["evals"] if e.get("confirmation")]
    assert confirmations and all(not e["final"] and e["mean_return"] < 35 for e in confirmations), s["evals"]
    for c in confirmations:  # each follows the periodic evaluation of its weights, which reached 35
        before = s["evals"][s["evals"].index(c) - 1]
        assert before["frames"] == c["frames"] and before["mean_return"] >= 35 and c["episodes"] == 30
    assert s["status"] == "finished" and s["confirmed"] is None and s["frames"] >= 16_000
    assert s["final_eval"]["episodes"] == 30 and s["evals"][-1]["final"] and "confirmation" not in s["evals"][-1]
    assert s["best_eval_return"] == max(e["mean_return"] for e in s["evals"] if not e["final"]
                                        and not e.get("confirmation"))


def test_an_orphaned_evaluation_stops_at_its_next_game_however_short_the_games():
    """`alive` answers False on its third question: play_games raises Orphaned there, although every game of an
    untrained CartPole agent is shorter than the 100 steps between questions within a game: each game's start
    asks too, so an evaluator orphaned during 100,000 short games stops at the next one."""
    from hogwild_dqn.config import Config
    from hogwild_dqn.envs import env_spec, make_env
    from hogwild_dqn.evaluation.games import Orphaned
    from hogwild_dqn.evaluation.policy import Policy
    from hogwild_dqn.networks import network_for

    cfg = Config(game="CartPole-v1")
    torch.manual_seed(0)
    policy, env = Policy(network_for(cfg, env_spec(cfg)), cfg), make_env(cfg, 0, for_eval=True)
    asked = []

    def alive() -> bool:
        asked.append(True)
        return len(asked) < 3

    try:
        with pytest.raises(Orphaned):
            play_games(policy, [env], 1000, alive)
    finally:
        env.close()
    assert len(asked) == 3


def _side_by_side_player(net: str, episodes: int, envs: int):
    from hogwild_dqn.config import Config
    from hogwild_dqn.envs import env_spec
    from hogwild_dqn.evaluation.games import evaluation_player

    cfg = Config(game="CartPole-v1", algo="a3c", net=net, eval_envs=envs, eval_episodes=episodes,
                 final_eval_episodes=episodes, deterministic_eval=True)
    torch.manual_seed(0)
    _, policy, played_on = evaluation_player(cfg, env_spec(cfg))
    return cfg, policy, played_on


@pytest.mark.parametrize("net", ["ff", "lstm"])
def test_games_side_by_side_score_as_each_game_alone(net):
    """Four CartPole games on four envs in one forward a step score what each env's game scores when played alone
    (the same weights, the same seeds): batching changes no game, and with --net lstm each game keeps a recurrent
    state of its own."""
    from hogwild_dqn.envs import make_env
    from hogwild_dqn.evaluation.games import play_episode
    from hogwild_dqn.seeding import evaluation_seeds

    cfg, policy, envs = _side_by_side_player(net, 4, 4)
    assert len(envs) == 4
    games = play_games(policy, envs, 4)
    alone = []
    for seed in evaluation_seeds(cfg.seed, 4):
        env = make_env(cfg, seed, for_eval=True)
        alone.append(play_episode(policy, env))
        env.close()
    assert games["returns"] == alone and games["episodes"] == 4
    assert games["steps"] == sum(alone)  # CartPole's return is its length
    assert len(set(alone)) > 1  # the seeds differ, or the comparison says little


def test_more_games_than_envs_plays_exactly_the_games_asked_each_to_its_end():
    """Eleven games on three envs: eleven scores, none left unplayed, the envs reused; no twelfth game started
    (a game started and dropped would favour short games)."""
    _, policy, envs = _side_by_side_player("ff", 11, 3)
    assert len(envs) == 3
    starts = []
    for env in envs:
        reset = env.reset
        env.reset = lambda *a, _reset=reset, **k: starts.append(1) or _reset(*a, **k)
    games = play_games(policy, envs, 11)
    assert games["episodes"] == 11 and len(starts) == 11
    assert all(np.isfinite(games["returns"])) and games["steps"] == sum(games["returns"])
    assert games["mean_return"] == pytest.approx(np.mean(games["returns"]))
