"""Checkpoints: atomic under SIGKILL, resume continues exactly where the run stopped, bad files refused."""

import hashlib
import os
import re
import shutil
import signal
import sys
import time

import pytest
import torch
import torch.multiprocessing as mp
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from hogwild_dqn.checkpoint import atomic_save
from hogwild_dqn.config import ConfigError
from hogwild_dqn.tools.runs import resume_or_start
from tests.conftest import ROOT, read_summary, run_train, spawned_children, start, start_train


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    """One 1,000-frame CartPole run for the tests that only read its checkpoint or refuse a changed copy of it:
    each copies it (one run shared, not one each)."""
    run = tmp_path_factory.mktemp("short") / "run"
    proc = run_train("--game", "CartPole-v1", "--threads", 1, "--frames", 1000, "--eval-every", 1000,
                     "--eval-episodes", 1, "--final-eval-episodes", 1, "--run-dir", run)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run


def _write_forever(path: str) -> None:
    version = 0
    while True:
        version += 1
        atomic_save({"version": version, "blob": torch.full((2_000_000,), float(version))}, path)


def test_kill_during_write_leaves_previous_checkpoint(tmp_path):
    path = tmp_path / "checkpoint.pt"
    ctx = mp.get_context("spawn")
    for attempt in range(5):
        writer = ctx.Process(target=_write_forever, args=(str(path),))
        writer.start()
        while not path.exists():
            time.sleep(0.01)
        time.sleep(0.05 + 0.13 * attempt)  # land the kill at different points of a write
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(timeout=10)
        ckpt = torch.load(path, weights_only=True)  # always a whole file: an old version or the new one
        assert ckpt["version"] >= 1 and bool((ckpt["blob"] == float(ckpt["version"])).all())


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_resume_continues_frames_schedules_and_logs(tmp_path):
    run = tmp_path / "run"
    first = run_train("--game", "CartPole-v1", "--algo", "nq", "--threads", 2, "--frames", 6000,
                      "--eval-every", 3000, "--eval-episodes", 2, "--run-dir", run)
    assert first.returncode == 0, first.stderr[-2000:]
    before = read_summary(run)
    saved = torch.load(run / "checkpoint.pt", weights_only=True)
    events_before = {p.name for p in run.glob("events.out.tfevents.*")}
    again = run_train("--resume", run, "--frames", 20000)  # enough that a worker starting late still finds frames left
    assert again.returncode == 0, again.stderr[-2000:]
    after = read_summary(run)
    assert after["frames"] >= 20000 and after["evals"][: len(before["evals"])] == before["evals"]
    assert after["evals"][-1]["frames"] == after["frames"] and after["wall_seconds"] > before["wall_seconds"]
    # the last line's rate is this session's, and says so: the run's total over this session's seconds misleads
    assert f"{after['frames']} frames, {after['frames'] - before['frames']} trained in this session's" in again.stdout
    assert events_before < {p.name for p in run.glob("events.out.tfevents.*")}  # appended beside the old ones
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ckpt["frames"] == after["frames"] and ckpt["target_epoch"] == after["frames"] // 1000
    assert torch.equal(ckpt["worker_eps"], saved["worker_eps"])  # each worker kept its exploration
    # each worker went on from its own frame count, on random streams of its own for the new session
    assert (saved["worker_frames"] > 0).all() and int(saved["worker_frames"].sum()) == before["frames"]
    assert (ckpt["worker_frames"] > saved["worker_frames"]).all() and int(ckpt["worker_frames"].sum()) == ckpt["frames"]
    assert (ckpt["worker_seed"] != saved["worker_seed"]).all()
    assert ckpt["config"]["frames"] == 20000 and ckpt["optimizer"]["square_avg"][0].abs().sum() > 0
    # the learning rate goes on from where the first session's schedule (to 0 at 6,000 frames) stood, down to 0
    # at 20,000: no jump up to the rate 20,000 frames would have given from the start
    lr, f0 = saved["config"]["lr"], before["frames"]
    assert ckpt["lr_start"][0] == f0 and ckpt["lr_start"][1] == pytest.approx(lr * max(0, 1 - f0 / 6000))
    rates = EventAccumulator(str(run)).Reload().Scalars("charts/learning_rate")
    after_resume = [e.value for e in rates if e.step > f0]
    assert after_resume and max(after_resume) <= lr * max(0, 1 - f0 / 6000) + 1e-9
    done = run_train("--resume", run, "--frames", 20000)
    assert done.returncode == 2 and "raise --frames" in done.stderr


def test_a_session_killed_outright_keeps_its_evaluations_and_wall_time(tmp_path):
    """A machine that restarts kills every process at once, so no summary.json is written: the resume takes that
    session's evaluations and wall time from checkpoint.pt, which the evaluator writes after each evaluation."""
    run = tmp_path / "run"
    proc = start_train(run, "--game", "CartPole-v1", "--algo", "a3c", "--threads", 1, "--frames", 10**9,
                       "--eval-every", 2000, "--eval-episodes", 1, "--video-steps", 0)
    procs = [proc.pid, *(p.pid for p in spawned_children(proc.pid))]
    deadline, saved = time.time() + 120, {}
    while len(saved.get("evals", [])) < 2 and time.time() < deadline:
        time.sleep(0.5)
        saved = torch.load(run / "checkpoint.pt", weights_only=True) if (run / "checkpoint.pt").exists() else {}
    for pid in procs:
        os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert len(saved["evals"]) >= 2 and not (run / "summary.json").exists()
    saved = torch.load(run / "checkpoint.pt", weights_only=True)  # the last one written before the kill
    assert all(e["frames"] >= 2000 * (k + 1) for k, e in enumerate(saved["evals"]))
    assert saved["wall_seconds"] >= saved["evals"][-1]["wall_seconds"] > 0

    again = run_train("--resume", run, "--frames", saved["frames"] + 4000)
    assert again.returncode == 0, again.stderr[-2000:]
    after = read_summary(run)
    assert after["evals"][: len(saved["evals"])] == saved["evals"] and after["evals"][-1]["final"]
    assert after["wall_seconds"] > saved["wall_seconds"]
    assert after["best_eval_return"] >= max(e["mean_return"] for e in saved["evals"])


def test_checkpoint_of_another_game_or_shape_is_refused(tmp_path, short_run):
    a = short_run
    # a's checkpoint in run dirs of another game and of another network width (their config.yaml says so)
    for name, edit, message in (("b", {"game": "Acrobot-v1"}, "is for CartPole-v1/a3c, not Acrobot-v1/a3c"),
                                ("c", {"hidden": 32}, "does not fit this network")):
        target = tmp_path / name
        shutil.copytree(a, target)
        cfg = yaml.safe_load((target / "config.yaml").read_text())
        cfg.update(edit)
        (target / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        sha = _sha(target / "checkpoint.pt")
        proc = run_train("--resume", target, "--frames", 2000)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert message in proc.stderr and str(target / "checkpoint.pt") in proc.stderr
        assert _sha(target / "checkpoint.pt") == sha


def test_truncated_checkpoint_is_refused(tmp_path, short_run):
    run = tmp_path / "run"
    shutil.copytree(short_run, run)
    data = (run / "checkpoint.pt").read_bytes()
    (run / "checkpoint.pt").write_bytes(data[: len(data) // 2])
    proc = run_train("--resume", run, "--frames", 2000)
    assert proc.returncode == 2 and "truncated or corrupted" in proc.stderr and "Traceback" not in proc.stderr
    assert (run / "checkpoint.pt").read_bytes() == data[: len(data) // 2]


def test_a_checkpoint_names_its_format_and_code_and_a_newer_format_is_refused(tmp_path, short_run):
    """checkpoint.pt holds its format number, the package's and libraries' versions and the checkout's commit;
    a file of a newer or unknown format is one line and exit 2 for --resume and hogwild-play, and stays as it
    was; a file of format 1 (0.5.0 and before: no such keys) still resumes."""
    import subprocess
    import sys

    import hogwild_dqn
    from hogwild_dqn.checkpoint import FORMAT, read_checkpoint
    from hogwild_dqn.config import ConfigError
    from tests.conftest import ROOT, run_cmd

    run = tmp_path / "run"
    shutil.copytree(short_run, run)
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    assert ckpt["format"] == FORMAT == 2 and ckpt["commit"].split("+")[0] == head.strip()
    assert ckpt["versions"]["hogwild_dqn"] == hogwild_dqn.__version__
    assert ckpt["versions"]["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert ckpt["versions"]["ale_py"] and ckpt["versions"]["gymnasium"]
    # each format refused by the one reader of checkpoints, and by both commands (one process each)
    for fmt, command in ((FORMAT + 1, "resume"), ("2", "play")):
        newer = tmp_path / f"newer{fmt}"
        shutil.copytree(run, newer)
        torch.save({**ckpt, "format": fmt, "versions": {**ckpt["versions"], "hogwild_dqn": "9.0.0"}},
                   newer / "checkpoint.pt")
        sha = _sha(newer / "checkpoint.pt")
        message = (f"has format {fmt!r} (written by hogwild_dqn 9.0.0); this is hogwild_dqn "
                   f"{hogwild_dqn.__version__}, which reads formats 1-{FORMAT}")
        with pytest.raises(ConfigError, match=re.escape(message)):
            read_checkpoint(newer / "checkpoint.pt")
        proc = (run_train("--resume", newer, "--frames", 2000) if command == "resume" else
                run_cmd([sys.executable, "-m", "hogwild_dqn.play", newer, "--episodes", 1], 120))
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert message in proc.stderr
        assert _sha(newer / "checkpoint.pt") == sha
    old = {k: v for k, v in ckpt.items() if k not in ("format", "versions", "commit")}
    torch.save(old, run / "checkpoint.pt")
    proc = run_train("--resume", run, "--frames", 2000, "--final-eval-episodes", 1)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert torch.load(run / "checkpoint.pt", weights_only=True)["format"] == 2


def _sleep(seconds: float, report) -> None:  # a Child's target: the report pipe comes last
    time.sleep(seconds)


def test_the_runner_writes_checkpoint_pt_only_once_the_evaluator_is_gone(tmp_path):
    """checkpoint.pt has two writers, the evaluator (at its evaluations) and the runner (at the end): the runner's
    write is refused while an evaluator process lives, so that no evaluation can land after it."""
    from hogwild_dqn.config import Config
    from hogwild_dqn.envs import env_spec
    from hogwild_dqn.processes import Child, Processes
    from hogwild_dqn.rundir import Run
    from hogwild_dqn.shared import new_shared_state

    cfg = Config(game="CartPole-v1")
    spec, ctx = env_spec(cfg), mp.get_context("spawn")
    procs = Processes(ctx, Run(cfg, spec, tmp_path, 1), new_shared_state(cfg, spec, 1), with_evaluator=False)
    procs.evaluator = Child(ctx, "evaluator", _sleep, (120,))  # a real process standing where the evaluator runs
    try:
        with pytest.raises(RuntimeError, match="still written by the evaluator"):
            procs.write_checkpoint({"frames": 1})
        assert not (tmp_path / "checkpoint.pt").exists()
    finally:
        procs.evaluator.proc.kill()
        procs.evaluator.proc.join(timeout=10)
    procs.write_checkpoint({"frames": 1})
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=True) == {"frames": 1}


@pytest.mark.parametrize("text, message", [("{\"status\": ", "cannot be read"),
                                           ("[1, 2]", "is not a run's summary (a JSON list)"),
                                           ('{"frames": null, "evals": []}', "(its frames is None)"),
                                           ('{"evals": [1, 2]}', "(its evals is [1, 2])"),
                                           ('{"wall_seconds": NaN}', "(its wall_seconds is nan)")])
def test_a_resume_over_an_unreadable_summary_is_one_line_and_keeps_the_run(tmp_path, short_run, text, message):
    """summary.json holds the earlier sessions' record: one that cannot be read stops the resume in one line,
    with every file of the run as it was, rather than a traceback or a guess."""
    run = tmp_path / "run"
    shutil.copytree(short_run, run)
    (run / "summary.json").write_text(text)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    proc = run_train("--resume", run, "--frames", 3000, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr and "move it aside" in proc.stderr and "Traceback" not in proc.stderr
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("edit, message", [
    ({"frames": -5}, "its frames is -5"), ({"frames": "abc"}, "its frames is 'abc'"),
    ({"lr_start": "x"}, "its lr_start is 'x'"), ({"config": 5}, "its config is 5"),
    ({"target_epoch": "x"}, "its target_epoch is 'x'"), ({"worker_frames": [1, 2]}, "its worker_frames is [1, 2]"),
    ({"best_eval_return": "x"}, "its best_eval_return is 'x'"), (None, "of the run's values (")])
def test_a_resume_from_an_edited_checkpoint_or_a_cut_config_is_one_line_and_keeps_the_run(tmp_path, short_run, edit,
                                                                                          message):
    """A checkpoint whose values were edited or damaged, or a config.yaml cut short (None: its last lines gone,
    which would have resumed on the defaults of every value it lost), stops the resume in one line with every file
    of the run as it was: never a traceback, and never a run that goes on from a negative frame count."""
    run = tmp_path / "run"
    shutil.copytree(short_run, run)
    if edit is None:
        lines = (run / "config.yaml").read_text().splitlines()
        (run / "config.yaml").write_text("\n".join(lines[:len(lines) - 60]) + "\n")
    else:
        ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
        torch.save({**ckpt, **edit}, run / "checkpoint.pt")
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    proc = run_train("--resume", run, "--frames", 3000, "--eval-every", 1000, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_a_write_cut_short_that_cannot_be_removed_stops_the_resume_in_one_line(tmp_path, short_run):
    """A resume removes the temporary files of writes cut short; one it cannot remove (here a folder of that name)
    is said in one line, with the run as it was."""
    run = tmp_path / "run"
    shutil.copytree(short_run, run)
    (run / ".checkpoint.pt.x.tmp").mkdir()
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    proc = run_train("--resume", run, "--frames", 3000, "--eval-every", 1000, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"train.py: error: cannot resume {run}: .checkpoint.pt.x.tmp, a write cut short, cannot be removed (Is a "
        "directory); remove it, or make the dir writable"], proc.stderr
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_a_run_dir_holds_one_session_at_a_time(tmp_path, short_run):
    """A second session in a run dir a train still runs in (a resume started twice; a train orphaned by its suite,
    found by the next suite) is refused in one line before it touches a file; the suite neither resumes such a
    dir nor sets it aside. Once the first session ends, the run resumes as any other."""
    run = tmp_path / "run"
    shutil.copytree(short_run, run)
    earlier = set(run.glob("events.out.tfevents.*"))
    first = start([sys.executable, ROOT / "train.py", "--no-progress", "--resume", run, "--frames", 10**9])
    deadline = time.time() + 120
    while not set(run.glob("events.out.tfevents.*.worker0")) - earlier and time.time() < deadline:
        time.sleep(0.3)
    writing = run / ".checkpoint.pt.1.tmp"
    writing.write_bytes(b"the first session's write, half-way")
    second = run_train("--resume", run, timeout=120)
    assert second.returncode == 2 and len(second.stderr.strip().splitlines()) == 1, second.stderr
    assert f"run dir {run} is in use by another session" in second.stderr and writing.exists()
    with pytest.raises(ConfigError, match="is in use by another session"):
        resume_or_start(run, ["start"])
    assert run.is_dir() and not list(tmp_path.glob("run.cut-*"))
    writing.unlink()
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=120)
    assert first.returncode == 143
    assert resume_or_start(run, ["start"])[-3:] == ["--resume", str(run), "--no-progress"]
