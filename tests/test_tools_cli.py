"""The tools' bad input: one line on stderr and exit status 2, as train.py's, with nothing written or lost; and files
that are not a run's summary passed over, not read half-way."""

import argparse
import json
import shutil
import signal
import sys
import time

import pytest

from hogwild_dqn.tools import ablation, bench, curves, frontpage, report, soak
from hogwild_dqn.tools.benchmark import keep
from hogwild_dqn.tools.suite_report import run_name
from tests.conftest import run_cmd, start

TOOLS = {"ablation": ablation.main, "bench": bench.main, "curves": curves.main, "frontpage": frontpage.main,
         "report": report.main, "soak": soak.main}


@pytest.mark.parametrize("name, args, message", [
    *((name, ["--no-such-flag"], "unrecognized arguments: --no-such-flag") for name in TOOLS if name != "curves"),
    ("curves", ["a.csv"], "the following arguments are required: --out"),
    ("curves", ["a.csv", "--out", "a.png", "--line", "inf"], "--line must be a finite score, got inf"),
    ("bench", ["--threads", "0"], "--threads, --envs, --repeats and --seconds must be positive"),
    ("bench", ["--game", "Pongg"], "--game 'Pongg' is unknown; did you mean Pong"),
    ("bench", ["--game", "CartPole-v1"], "--game CartPole-v1: bench measures ALE games"),
    ("bench", ["--seconds", "inf"], "--seconds must be positive (and --seconds finite)"),
    ("bench", ["--warmup", "nan"], "--warmup must be a finite number of seconds, 0 or more"),
    ("bench", ["--with", '"--lr'], "--with '\"--lr': No closing quotation"),
    ("report", ["--score", "abc"], "argument --score: invalid float value: 'abc'"),
    ("soak", ["--interval", "-1"], "--interval must be a positive number of seconds"),
    ("ablation", ["--frames", "0"], "--frames, --eval-every and --threads must be positive"),
])
def test_a_tools_bad_flag_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, name, args, message):
    monkeypatch.chdir(tmp_path)  # a tool that wrongly went on would write here
    assert TOOLS[name](args) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"{name}: error: ") and captured.err.count("\n") == 1, captured.err
    assert message in captured.err and captured.out == ""
    assert list(tmp_path.iterdir()) == []


def test_a_bench_out_that_cannot_be_a_folder_is_told_before_any_measurement(tmp_path, capsys):
    taken = tmp_path / "bench.md"
    taken.write_text("an earlier table")
    for out in (taken, taken / "sub"):
        assert bench.main(["--game", "Pong", "--algos", "a3c", "--threads", "1", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"bench: error: --out {out} cannot be a folder here") and err.count("\n") == 1
    assert taken.read_text() == "an earlier table"


def test_curves_into_a_folder_is_refused_in_one_line(tmp_path, capsys):
    data = tmp_path / "a.csv"
    data.write_text("frames,mean_return,wall_seconds\n1,2,3\n")
    (tmp_path / "fig.png").mkdir()
    assert curves.main([str(data), "--out", str(tmp_path / "fig.png")]) == 2
    assert "needs an existing folder and a .png" in capsys.readouterr().err
    # a folder no one may write into, root included (sysfs's top): the figure's failed write is one line too
    assert curves.main([str(data), "--out", "/sys/fig.png"]) == 2
    err = capsys.readouterr().err  # Permission denied, or Read-only file system where /sys is mounted so
    assert err.startswith("curves: error: cannot write /sys/fig.png: ") and err.count("\n") == 1, err
    # rows that parse as numbers but none finite: nothing to draw, not "wrote fig.png (1 curves)"
    data.write_text("frames,mean_return,wall_seconds\n1,nan,3\n2,inf,4\n")
    assert curves.main([str(data), "--out", str(tmp_path / "nan.png")]) == 2
    assert capsys.readouterr().err == f"curves: error: {data}: no row has a finite mean_return to draw\n"
    assert not (tmp_path / "nan.png").exists()


def test_the_reports_pass_over_what_is_not_a_runs_summary(tmp_path, cartpole_q1, capsys):
    """A run dir whose config.yaml or summary.json is not one is said in a line and left out of the sweep's report;
    the front page's table leaves out a record without a score's keys."""
    shutil.copytree(cartpole_q1, tmp_path / "good")
    for name, config, summary in (("bad-yaml", "game: [oops\n", None), ("list-yaml", "- a\n", None),
                                  ("bad-json", None, '{"status": '), ("list-json", None, "[1]"),
                                  ("empty-json", None, "{}")):
        run = tmp_path / name
        shutil.copytree(cartpole_q1, run)
        if config:
            (run / "config.yaml").write_text(config)
        if summary:
            (run / "summary.json").write_text(summary)
    good = json.loads((cartpole_q1 / "summary.json").read_text())
    for name, edit in (("evals-text", {"evals": "abc"}), ("eval-frames-text", {"evals": [{"frames": "x"}]}),
                       ("eval-no-mean", {"evals": [{**good["evals"][0], "mean_return": None}]}),
                       ("threads-null", {"threads": None}), ("final-text", {"final_eval": {"mean_return": "abc"}}),
                       ("confirmed-text", {"confirmed": {"frames": "x", "wall_seconds": 1}}),
                       ("final-nan", {"final_eval": {**good["final_eval"], "mean_return": float("nan")}}),
                       ("final-no-std", {"final_eval": {k: v for k, v in good["final_eval"].items()
                                                        if k != "std_return"}}),
                       ("frames-text", {"frames": "abc"}), ("wall-inf", {"wall_seconds": float("inf")}),
                       ("threads-negative", {"threads": -3})):
        shutil.copytree(cartpole_q1, tmp_path / name)
        (tmp_path / name / "summary.json").write_text(json.dumps({**good, **edit}))  # NaN, Infinity: as json reads
    config = (cartpole_q1 / "config.yaml").read_text()
    for name, line in (("algo-number", "algo: 5"), ("seed-text", "seed: abc")):  # a run without its summary
        shutil.copytree(cartpole_q1, tmp_path / name)
        (tmp_path / name / "summary.json").unlink()
        (tmp_path / name / "config.yaml").write_text(config + line + "\n")
    assert [r.path.name for r in report.read_runs(tmp_path)] == ["good"]
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 18 and all(line.startswith("report: passed over ") for line in said), said

    records = tmp_path / "records"
    records.mkdir()
    good = json.loads((cartpole_q1 / "summary.json").read_text())
    (records / "a.json").write_text(json.dumps(good))
    (records / "b.json").write_text(json.dumps({"algo": "q1", "status": "finished", "final_eval": {}}))
    (records / "c.json").write_text("[1]")
    (records / "d.json").write_text(json.dumps({**good, "final_eval": {"episodes": 30}}))  # a score without its mean
    (records / "e.json").write_text(json.dumps({**good, "final_eval": {"mean_return": "abc"}}))  # a mean not a number
    (records / "f.json").write_text(json.dumps({**good, "confirmed": {"frames": "x"}}))  # a stop without its numbers
    infinite = {**good["final_eval"], "mean_return": float("inf")}  # json writes Infinity, and reads it
    (records / "g.json").write_text(json.dumps({**good, "final_eval": infinite}))
    assert frontpage.finals(records, "q1") == {"CartPole-v1": [good["final_eval"]["mean_return"]]}
    assert frontpage.confirmed(records) == "—"


def test_the_sweep_report_is_of_one_game_and_the_front_page_of_a_checkout(tmp_path, capsys):
    """Runs of several games under one --logdir would share one speedup table, timed against one game's score:
    refused in one line, --game picks one. A --score that no run can reach (nan, inf) is refused too. The front
    page refuses a --root without the records folders rather than wiping the table's cells."""
    for game in ("Pong", "CartPole-v1"):
        (tmp_path / game).mkdir()
        (tmp_path / game / "config.yaml").write_text(f"game: {game}\nalgo: a3c\nthreads: 1\nseed: 1\n")
    assert report.main(["--logdir", str(tmp_path)]) == 2
    assert report.main(["--logdir", str(tmp_path), "--game", "Zork"]) == 2
    assert report.main(["--logdir", str(tmp_path), "--score", "nan"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"report: error: runs of 2 games under {tmp_path} (CartPole-v1, Pong): a sweep's report is of "
                      "one game; choose it with --game")
    assert err[1] == f"report: error: --game Zork: no run of it under {tmp_path} (its games: CartPole-v1, Pong)"
    assert err[2] == "report: error: --score must be a finite number, got nan" and len(err) == 3
    assert report.main(["--logdir", str(tmp_path), "--game", "Pong"]) == 0
    assert "# Sweep report: Pong" in (tmp_path / "report.md").read_text()

    root = tmp_path / "checkout"
    root.mkdir()
    (root / "README.md").write_text(frontpage.START + "\nold table\n" + frontpage.END + "\n")
    assert frontpage.main(["--root", str(root)]) == 2
    assert "no such records folder" in capsys.readouterr().err
    assert (root / "README.md").read_text() == frontpage.START + "\nold table\n" + frontpage.END + "\n"


def test_a_record_of_another_run_is_kept_not_overwritten(tmp_path, cartpole_q1, capsys):
    """keep() writes an ended run's record; where the record is another run of the same name (its evaluations
    are not continued by the run dir's), it is left as it was, and said."""
    name = run_name("CartPole-v1", "q1", 1)
    logdir, records = tmp_path / "runs", tmp_path / "records"
    shutil.copytree(cartpole_q1, logdir / name)
    args = argparse.Namespace(logdir=logdir, record=records)
    keep(args, name)
    summary = json.loads((logdir / name / "summary.json").read_text())
    kept = json.loads((records / f"{name}.json").read_text())
    assert kept["evals"] == summary["evals"] and kept["config"]["algo"] == "q1"
    keep(args, name)  # the same run again: written again, unchanged
    assert json.loads((records / f"{name}.json").read_text()) == kept
    (records / f"{name}.json").write_text(json.dumps({**kept, "evals": kept["evals"][:-1]}))
    keep(args, name)  # the record of its first session, the run gone on since (resumed): the record follows it
    assert json.loads((records / f"{name}.json").read_text()) == kept
    other = {**kept, "evals": [{**e, "mean_return": e["mean_return"] + 1} for e in kept["evals"]]}
    (records / f"{name}.json").write_text(json.dumps(other))
    keep(args, name)
    assert json.loads((records / f"{name}.json").read_text()) == other
    err = capsys.readouterr().err
    assert "is kept as it is" in err and "holds another run" in err and err.count("\n") == 1


def test_the_bare_emulator_takes_the_game_as_train_does():
    """bench and the suite's records time the emulator of the game as --game names it, in any of train's spellings."""
    from hogwild_dqn.config import Config
    from hogwild_dqn.envs import emulator_fps

    assert all(emulator_fps(Config(game=game), 0.2) > 0 for game in ("pong", "ALE/Pong-v5", "Pong"))


def test_a_published_file_without_its_columns_is_told_before_the_suite_runs(tmp_path, monkeypatch, capsys):
    from hogwild_dqn.tools import benchmark

    monkeypatch.chdir(tmp_path)
    scores = tmp_path / "scores.csv"
    scores.write_text("game,score\nPong,1\n")
    assert benchmark.main(["--games", "Pong", "--seeds", "1", "--published", str(scores)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("benchmark: error: --published: ") and err.count("\n") == 1, err
    assert "lacks the column(s) algorithm, protocol, seeds, source" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.csv"]


def test_a_report_that_cannot_be_written_keeps_the_one_before(tmp_path, cartpole_q1):
    """Files that cannot grow past 4 KiB (RLIMIT_FSIZE: the kernel refuses with EFBIG, as a full disk with ENOSPC):
    the sweep's report fails in one line, exit 1, and report.md and its figures stay the earlier report's, whole."""
    import hashlib
    import resource
    import subprocess
    import sys

    logdir = tmp_path / "runs"
    shutil.copytree(cartpole_q1, logdir / "q1")
    command = [sys.executable, "-m", "hogwild_dqn.tools.report", "--logdir", str(logdir)]
    assert subprocess.run(command, capture_output=True, text=True, timeout=120).returncode == 0
    outputs = sorted(p for p in logdir.iterdir() if p.is_file())
    assert any(p.suffix == ".png" for p in outputs) and (logdir / "report.md") in outputs
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in outputs}

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, preexec_fn=small_files)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.startswith("report: error: cannot write ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "File too large" in proc.stderr and "is left as it was" in proc.stderr
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in outputs} == before
    assert sorted(p for p in logdir.iterdir() if p.is_file()) == outputs  # no temporary file left behind
    # files written whole (a temporary file, then a rename) keep a new file's usual 0644, not mkstemp's 0600
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in [*outputs, cartpole_q1 / "summary.json"])


def test_curves_print_titles_and_labels_as_written(tmp_path):
    """A $ in a title or label is text: matplotlib would read a pair of them as math and fail on what is not."""
    data = tmp_path / "a.csv"
    data.write_text("frames,mean_return,wall_seconds\n1,2,3\n4,5,6\n")
    assert curves.main([f"{data}=cost $5{{", "--out", str(tmp_path / "fig.png"), "--title", r"$\foo{$"]) == 0
    assert (tmp_path / "fig.png").stat().st_size > 1000


def test_the_ablation_stops_its_run_as_a_train_stops_and_refuses_a_kept_run_of_other_settings(tmp_path):
    """Ctrl-C (SIGINT) during the ablation reaches its real DQN run once, which saves itself (checkpoint and
    summary) as a train stopped by hand does, and the ablation says so in one line; run again with another frame
    budget, it refuses that kept run in one line rather than putting it in a table of other runs, and writes
    nothing."""
    logdir = tmp_path / "abl"
    run = logdir / "replay-target" / "s1"
    cmd = [sys.executable, "-m", "hogwild_dqn.tools.ablation", "--seeds", "1", "--threads", "1", "--eval-every",
           "10000", "--logdir", logdir]
    proc = start([*cmd, "--frames", "200000"])
    deadline = time.time() + 120
    while not list(run.glob("events.out.tfevents.*.worker0")) and time.time() < deadline:
        time.sleep(0.3)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (f"ablation: stopped; the run in {run} is kept and resumes when the same "
                                            "command is run again")
    assert json.loads((run / "summary.json").read_text())["status"] != "finished"
    assert (run / "checkpoint.pt").is_file()
    before = {p: p.read_bytes() for p in run.iterdir() if p.is_file()}
    again = run_cmd([*cmd, "--frames", "300000"], 120)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1, again.stderr
    assert (f"ablation: error: {run} holds a run of other settings than this one (frames 200000 there, 300000 here)"
            in again.stderr)
    assert {p: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
    assert not (logdir / "ablation.md").exists()


def test_a_ctrl_c_in_a_tools_own_work_is_one_line_and_130():
    """Ctrl-C while bench measures the bare emulator (its own work, no run of its own to stop): one line, no
    traceback, and the shell's 130."""
    # as a terminal's Ctrl-C finds it, even where this test runs in the background (SIGINT ignored, inherited)
    proc = start([sys.executable, "-m", "hogwild_dqn.tools.bench", "--game", "Pong", "--algos", "a3c", "--threads",
                  "1", "--seconds", "20", "--warmup", "2", "--repeats", "1"],
                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "bench: stopped (Ctrl-C)"


@pytest.mark.parametrize("module", ["atari5", "bench_evaluator", "bench_points", "machine", "published",
                                    "suite_report", "suites"])
def test_a_tools_part_run_as_a_command_names_the_command_to_run(module):
    """`python -m` of a module only other tools import said nothing and exited 0."""
    proc = run_cmd([sys.executable, "-m", f"hogwild_dqn.tools.{module}"], timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    line, = proc.stderr.strip().splitlines()
    assert line.startswith(f"{module}: error: hogwild_dqn.tools.{module} is part of another tool, not a command; "
                           "run `python -m hogwild_dqn.tools.bench")
