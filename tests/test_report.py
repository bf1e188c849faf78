"""Sweeps and review: run naming, the speedup maths, and the report over real runs (one of them unfinished)."""

import json
import signal
import time
from pathlib import Path

import pytest

from hogwild_dqn.config import Config
from hogwild_dqn.rundir import new_run_dir
from hogwild_dqn.tools.report import RunRecord, main, read_runs, speedup_table, time_to_score
from tests.conftest import run_train, spawned_children, start_train, wait_gone


def test_run_names_show_the_sweep_and_never_collide(tmp_path):
    cfg = Config(game="CartPole-v1", algo="nq", seed=3, logdir=str(tmp_path))
    dirs = [new_run_dir(cfg, threads=4) for _ in range(3)]  # the same second, the same settings
    assert len(set(dirs)) == 3 and all(d.is_dir() for d in dirs)
    assert all(d.name.startswith("CartPole-v1-nq-t4-s3-") for d in dirs)
    assert dirs[1].name == dirs[0].name + "-2" and dirs[2].name == dirs[0].name + "-3"
    variant = Config(game="CartPole-v1", algo="a3c", net="lstm", obs_normalize=True, seed=3, logdir=str(tmp_path))
    assert new_run_dir(variant, threads=2).name.startswith("CartPole-v1-a3c-lstm-norm-t2-s3-")


def _run(algo, threads, seed, times_and_returns):
    evals = [{"frames": 1000 * i, "wall_seconds": t, "mean_return": r} for i, (t, r) in enumerate(times_and_returns)]
    return RunRecord(Path(f"{algo}{threads}{seed}"), "Pong", algo, threads, seed, "finished", 100.0, evals)


def test_time_to_score_is_the_first_evaluation_reaching_it():
    run = _run("a3c", 1, 1, [(10, -21), (20, 5), (30, 18), (40, 12), (50, 19)])
    assert time_to_score(run.evals, 18) == 30 and time_to_score(run.evals, 20) is None


def test_speedup_table_on_known_inputs():
    runs = [
        _run("a3c", 1, 1, [(100, 0), (400, 18)]), _run("a3c", 1, 2, [(300, 0), (600, 19)]),  # median 500
        _run("a3c", 2, 1, [(100, 0), (250, 18)]), _run("a3c", 2, 2, [(200, 0), (260, 0)]),   # one of two: 250
        _run("a3c", 4, 1, [(50, 10)]),                                                      # never reached
        _run("nq", 2, 1, [(80, 20)]),                                                       # no 1-thread run
    ]
    rows = {(r["algo"], r["threads"]): r for r in speedup_table(runs, 18)}
    assert rows[("a3c", 1)]["seconds"] == 500 and rows[("a3c", 1)]["speedup"] == pytest.approx(1.0)
    assert rows[("a3c", 2)]["seconds"] == 250 and rows[("a3c", 2)]["speedup"] == pytest.approx(2.0)
    assert (rows[("a3c", 2)]["runs"], rows[("a3c", 2)]["reached"]) == (2, 1)
    assert rows[("a3c", 4)]["seconds"] is None and rows[("a3c", 4)]["speedup"] is None
    assert rows[("nq", 2)]["seconds"] == 80 and rows[("nq", 2)]["speedup"] is None


def test_report_over_real_runs_lists_the_unfinished_one(tmp_path):
    logdir = tmp_path / "runs"
    for threads in (1, 2):
        done = run_train("--game", "CartPole-v1", "--algo", "a3c", "--threads", threads, "--frames", 4000,
                         "--eval-every", 2000, "--logdir", logdir)
        assert done.returncode == 0, done.stderr[-2000:]
    # a run whose main process is killed outright: no summary.json, only its event files
    cut = logdir / "cut"
    proc = start_train(cut, "--game", "CartPole-v1", "--threads", 1, "--frames", 10**9, "--eval-every", 2000,
                       "--video-steps", 0)
    children = spawned_children(proc.pid)
    deadline = time.time() + 120  # the evaluator writes checkpoint.pt at each periodic evaluation: a curve point
    while not (cut / "checkpoint.pt").exists() and time.time() < deadline:
        time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert not wait_gone(children, 10), "orphaned children kept running"
    assert not (cut / "summary.json").exists()

    assert main(["--logdir", str(logdir)]) == 0
    report = (logdir / "report.md").read_text()
    for png in ("curves_frames.png", "curves_wall.png", "speedup.png", "fps.png"):
        assert (logdir / png).stat().st_size > 5000 and f"({png})" in report
    runs = {r.path.name: r for r in read_runs(logdir)}
    assert runs["cut"].status == "unfinished (no summary.json)" and runs["cut"].evals  # curve from event files
    assert "| cut | a3c | 1 | 1 | unfinished (no summary.json) |" in report
    assert "| a3c | 1 | 2 | " in report and "| a3c | 2 | 1 | " in report  # runs per thread count


def test_report_keeps_lstm_and_normalized_runs_apart(tmp_path):
    """Runs of one algorithm with another network, --obs-normalize or --value-normalize are their own rows (read
    off config.yaml)."""
    for name, extra in (("ff", ""), ("lstm", "net: lstm\n"), ("lstm-norm", "net: lstm\nobs_normalize: true\n"),
                        ("vnorm", "value_normalize: true\n"), ("both", "obs_normalize: true\nvalue_normalize: true\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.yaml").write_text(f"game: Pong\nalgo: a3c\nthreads: 2\nseed: 1\n{extra}")
    assert {r.path.name: r.algo for r in read_runs(tmp_path)} == {"ff": "a3c", "lstm": "a3c-lstm",
                                                                  "lstm-norm": "a3c-lstm-norm", "vnorm": "a3c-vnorm",
                                                                  "both": "a3c-norm-vnorm"}


def test_report_errors_are_one_line(tmp_path, capsys):
    assert main(["--logdir", str(tmp_path / "none")]) == 2
    assert main(["--logdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"report: error: --logdir {tmp_path / 'none'} is not a directory",
                   f"report: error: no run dirs (folders with a config.yaml) under {tmp_path}, or none readable"]


def test_best_episode_video_is_saved_and_logged(tmp_path):
    run = tmp_path / "run"
    proc = run_train("--game", "CartPole-v1", "--threads", 1, "--frames", 2000, "--eval-every", 1000,
                     "--eval-episodes", 1, "--video-steps", 40, "--run-dir", run)
    assert proc.returncode == 0, proc.stderr[-2000:]
    from PIL import Image
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    gif = Image.open(run / "best_episode.gif")
    assert gif.n_frames > 5 and gif.size == (300, 200)
    acc = EventAccumulator(str(run))
    acc.Reload()
    assert acc.Images("eval/best_episode")[-1].encoded_image_string[:6] == b"GIF89a"


def test_curves_redraws_a_figure_from_evaluation_csvs_and_refuses_bad_ones_in_one_line(tmp_path, capsys):
    import matplotlib.image

    from hogwild_dqn.tools import curves

    one = tmp_path / "one.csv"
    one.write_text("# a run\nframes,mean_return,wall_seconds\n250000,-21,100\n500000,-15.5,210\n")
    two = tmp_path / "two.csv"
    two.write_text("run,frames,wall_seconds,mean_return\na,1,2,3\nb,1,2,4\nb,2,3,5\n")
    out = tmp_path / "fig.png"
    assert curves.main([f"{one}=one run", str(two), "--by", "run", "--line", "18", "--out", str(out)]) == 0
    assert "(3 curves)" in capsys.readouterr().out  # one, and two split by its run column
    image = matplotlib.image.imread(out)
    assert image.shape[0] > 100 and image.std() > 0
    out.unlink()
    for args, message in [([str(tmp_path / "none.csv")], "does not exist"),
                          ([str(one), "--by", "run"], "no input has a column run"),
                          ([str(tmp_path)], "is not a file"),
                          ([str(two), "--x", "wall_seconds"], None)]:
        code = curves.main([*args, "--out", str(out)])
        err = capsys.readouterr().err
        if message is None:
            assert code == 0 and out.exists()
        else:
            assert code == 2 and err.startswith("curves: error: ") and message in err and err.count("\n") == 1
    for i, text in enumerate(["frames,mean_return,wall_seconds\n1,x,2\n", "frames,mean_return,wall_seconds\n1,2\n"]):
        (tmp_path / f"bad{i}.csv").write_text(text)  # a word, then a short row
        assert curves.main([str(tmp_path / f"bad{i}.csv"), "--out", str(tmp_path / "bad.png")]) == 2
        assert "not a number" in capsys.readouterr().err and not (tmp_path / "bad.png").exists()
    assert curves.main([str(one), "--out", str(tmp_path / "no" / "fig.png")]) == 2
    assert capsys.readouterr().err.startswith("curves: error: --out ")


def test_curves_draws_a_suite_record_and_refuses_a_json_that_is_not_one(tmp_path, capsys):
    """The benchmark's records are what a suite keeps: a figure is drawn from them, one line per record (or per seed),
    with the periodic evaluations and the final one that the record holds."""
    from hogwild_dqn.tools import curves

    record = Path(__file__).parent.parent / "docs" / "benchmark-ppo-epochs4" / "records" / "SpaceInvaders-ppo-s1.json"
    rows = curves.read_record(record)
    kept = json.loads(record.read_text())
    assert [r["frames"] for r in rows] == [e["frames"] for e in kept["evals"]] and len(rows) >= 20
    assert rows[-1]["kind"] == "final" and rows[-1]["mean_return"] == kept["final_eval"]["mean_return"]
    assert {r["seed"] for r in rows} == {1} and rows[0]["kind"] == "periodic"
    out = tmp_path / "fig.png"
    assert curves.main([f"{record}=PPO", "--by", "seed", "--x", "wall_seconds", "--out", str(out)]) == 0
    assert "(1 curves)" in capsys.readouterr().out and out.stat().st_size > 1000
    for text, message in [('{"evals": [', "not a readable JSON record"), ('{"frames": 1}', "not a run record"),
                          ('[1, 2]', "not a run record"), ('{"evals": [{"frames": 1, "wall_seconds": 2}]}', "lacks"),
                          ('{"evals": [{"frames": 1, "wall_seconds": 2, "mean_return": null}]}', "not a number")]:
        (tmp_path / "bad.json").write_text(text)
        assert curves.main([str(tmp_path / "bad.json"), "--out", str(tmp_path / "bad.png")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("curves: error: ") and message in err and err.count("\n") == 1, err
        assert not (tmp_path / "bad.png").exists()


def test_curves_prints_the_notebooks_table_of_periodic_evaluations_from_records(tmp_path, capsys):
    """--table: one row a record, its periodic evaluations at whole millions of frames (the final one left out), a
    dash where a record has no evaluation there; nothing to tabulate is one line and exit 2."""
    from hogwild_dqn.tools import curves

    record = Path(__file__).parent.parent / "docs" / "screens" / "pqn-lambda95" / "Pong-pqn-s1.json"
    evals = json.loads(record.read_text())["evals"]
    short = tmp_path / "short.csv"  # evaluations at 1M and 2.5M only, and a final one at 2M that must not show
    short.write_text("frames,wall_seconds,mean_return,kind\n1004000,10,-20,periodic\n2500000,25,-5,periodic\n"
                     "2000000,30,7,final\n")
    assert curves.main([f"{record}=pqn", f"{short}=short", "--table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| frames (M) | " + " | ".join(map(str, range(1, 10))) + " |" and len(lines) == 4
    at = {round(e["frames"] / 1e6): e["mean_return"] for e in evals
          if not e["final"] and e["frames"] % 1_000_000 < 20_000}
    assert lines[2] == "| pqn | " + " | ".join(f"{at[m]:,.1f}" for m in range(1, 10)) + " |"
    assert lines[3] == "| short | -20.0 | " + " | ".join(["—"] * 8) + " |"
    (tmp_path / "none.csv").write_text("frames,wall_seconds,mean_return\n500000,5,1\n")
    assert curves.main([str(tmp_path / "none.csv"), "--table"]) == 2
    assert capsys.readouterr().err.startswith("curves: error: no input has a periodic evaluation at a whole million")
    assert curves.main([str(record)]) == 2 and "required: --out" in capsys.readouterr().err


def test_every_tool_shows_scores_over_runs_and_tells_a_done_run_one_way(tmp_path):
    """tools.spread and tools.run_done, shared by the report, the benchmark suite and the ablation: one value has
    no std (an std of one seed is not 0), missing values are counted, and only a run with its score is done."""
    from hogwild_dqn.tools.output import spread
    from hogwild_dqn.tools.runs import run_done

    assert spread([]) == spread([None]) == "—" and spread([9.0]) == "9.0"
    assert spread([100.0, 200.0]) == "150.0 ± 70.7" and spread([210.0, None]) == "210.0 (1 of 2 runs)"
    assert not run_done(tmp_path)  # no summary.json
    for text in ('{"status": "fini', "[1]", "{}"):  # cut while written by hand, or not a summary: not done
        (tmp_path / "summary.json").write_text(text)
        assert not run_done(tmp_path)
    for status, final, want in (("finished", {"mean_return": 1.0}, True), ("solved: confirmed", {}, True),
                                ("unscored: finished, but the final evaluation was cut", None, False),
                                ("finished", None, False), ("interrupted (SIGINT)", {}, False)):
        (tmp_path / "summary.json").write_text(json.dumps({"status": status, "final_eval": final}))
        assert run_done(tmp_path) is want, status
