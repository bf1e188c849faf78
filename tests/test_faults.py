"""Faults while training, done for real: SIGKILL, out of memory, signals to the main process, NaN."""

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import torch

from tests import conftest
from tests.conftest import alive, read_summary, run_train, spawned_children, start_train, wait_gone

LONG = ["--game", "CartPole-v1", "--threads", 2, "--frames", 10**9, "--eval-every", 10**8]


def test_killed_worker_is_restarted_and_training_finishes(tmp_path):
    run = tmp_path / "run"
    proc = start_train(run, "--game", "CartPole-v1", "--threads", 2, "--frames", 10000, "--eval-every", 5000)
    worker0 = spawned_children(proc.pid)[0]
    t0 = time.time()
    worker0.kill()
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-2000:]
    assert ("worker0 died (killed by signal 9); restart 1 of 3, on new random streams (seed 1, worker 0, restart 1)"
            in err)
    assert read_summary(run)["frames"] >= 10000 and time.time() - t0 < 120


def test_worker_out_of_memory_is_logged_with_traceback_and_restarted(tmp_path):
    run = tmp_path / "run"
    proc = start_train(run, "--game", "Pong", "--algo", "a3c", "--threads", 2, "--frames", 10**9,
                       "--eval-every", 10**8)
    worker1 = spawned_children(proc.pid)[1]
    # the kernel refuses the worker any further memory: its next large allocation raises
    worker1.rlimit(psutil.RLIMIT_AS, (worker1.memory_info().vms, psutil.RLIM_INFINITY))
    log_file, deadline = run / "errors.log", time.time() + 60
    while not (log_file.exists() and "--- worker1 " in log_file.read_text()):
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"no report of worker1's death: {proc.communicate()[1][-2000:]}")
        time.sleep(0.2)
    time.sleep(3)
    assert proc.poll() is None  # restarted, still training
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    log = (run / "errors.log").read_text()
    assert "Traceback (most recent call last)" in log and "worker1" in log
    assert "worker1 died (" in err and "restart 1 of 3, on new random streams (seed 1, worker 1, restart 1)" in err


def test_restarts_used_up_stop_the_run_with_a_checkpoint(tmp_path):
    run = tmp_path / "run"
    proc = start_train(run, *LONG, "--max-restarts", 0)
    t0 = time.time()
    spawned_children(proc.pid)[0].kill()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and time.time() - t0 < 15
    reason = "worker0 died (killed by signal 9) and the 0 restarts allowed are used up"
    assert reason in out and read_summary(run)["status"] == reason
    assert torch.load(run / "checkpoint.pt", weights_only=True)["frames"] > 0


def test_killed_evaluator_is_restarted_while_training_goes_on(tmp_path):
    run = tmp_path / "run"
    proc = start_train(run, "--game", "CartPole-v1", "--threads", 2, "--frames", 10000, "--eval-every", 2500)
    spawned_children(proc.pid)[-1].kill()
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-2000:]
    assert "evaluator died (killed by signal 9); restarting it, training goes on" in err
    s = read_summary(run)
    assert s["frames"] >= 10000 and s["evals"][-1]["frames"] == s["frames"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _listing(path: Path) -> set[str]:
    return set(os.listdir(path))


def test_sigterm_and_sigint_stop_everything_and_leave_nothing_behind(tmp_path):
    for sig, status in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        run, tmp = tmp_path / f"run{sig}", tmp_path / f"tmp{sig}"
        tmp.mkdir()
        shm_before = _listing(Path("/dev/shm"))
        proc = start_train(run, "--game", "Pong", "--algo", "a3c", "--threads", 2, "--frames", 10**9,
                           "--eval-every", 10**8, env={**os.environ, "TMPDIR": str(tmp)})
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 3
        t0 = time.time()
        proc.send_signal(sig)
        proc.wait(timeout=30)
        left = wait_gone(children, 0)  # gone by the time train.py returns: no grace (the resource tracker was not)
        out, err = proc.communicate(timeout=30)
        assert time.time() - t0 < 10 and proc.returncode == status, err[-2000:]
        assert not left, [" ".join(p.cmdline()) for p in left]
        s = read_summary(run)
        assert s["status"].startswith(("terminated", "interrupted")) and s["frames"] > 0
        assert torch.load(run / "checkpoint.pt", weights_only=True)["frames"] == s["frames"]
        assert not wait_gone(children, 5), "orphan processes"
        assert _listing(Path("/dev/shm")) - shm_before == set()
        assert _listing(tmp) == set() and not list(run.glob(".*.tmp"))
    assert Path(tempfile.gettempdir()).exists()


def test_a_run_whose_output_reader_goes_away_stops_saved_as_at_sigterm(tmp_path):
    """`hogwild-train ... 2>&1 | head -1`: the progress line's next write meets a broken pipe, and the run stops as a
    SIGTERM stops it (checkpoint, summary), exit 141, without a traceback."""
    run = tmp_path / "run"
    proc = conftest.start([sys.executable, conftest.ROOT / "train.py", "--game", "CartPole-v1", "--threads", 1,
                           "--frames", 10**8, "--eval-every", 10**6, "--run-dir", run])
    _training(run)
    proc.stderr.close()  # the reader of the progress line is gone: its next write (within 30 s) fails
    _stopped_saved_as_its_reader_went_away(proc, run)


def _training(run: Path) -> None:
    deadline = time.time() + 120
    while not list(run.glob("events.out.tfevents.*.worker0")) and time.time() < deadline:
        time.sleep(0.3)


def _stopped_saved_as_its_reader_went_away(proc, run: Path) -> None:
    out = proc.stdout.read()
    assert proc.wait(timeout=120) == 141, out
    assert out.strip().splitlines()[-1].startswith("stopped: its output's reader went away (a broken pipe): ")
    s = read_summary(run)
    assert s["status"] == "stopped: its output's reader went away (a broken pipe)" and s["frames"] > 0
    assert torch.load(run / "checkpoint.pt", weights_only=True)["frames"] == s["frames"]


def test_without_a_progress_line_a_closed_stderr_stops_the_run_saved_at_its_next_line(tmp_path):
    """With --no-progress nothing writes to stderr until a child dies: the restart's line meets the broken pipe, and
    the run stops saved as when the progress line's reader goes away."""
    run = tmp_path / "run"
    proc = conftest.start([sys.executable, conftest.ROOT / "train.py", *LONG, "--no-progress", "--run-dir", run])
    _training(run)
    proc.stderr.close()
    spawned_children(proc.pid)[0].kill()  # the runner's next stderr line: "worker0 died ...; restart 1 of 3"
    _stopped_saved_as_its_reader_went_away(proc, run)


def test_a_line_that_met_a_closed_stderr_stops_the_run_at_the_next_line_that_may_stop():
    """A child's traceback is said (stop=False) before its restart line: the traceback's write meets the broken
    pipe and sends stderr to /dev/null, where the restart line's write succeeds; the run must stop there all the
    same. A real pipe whose reader is closed, in a process of its own."""
    script = (
        "import os, sys\n"
        "from hogwild_dqn.console import OutputClosed, say\n"
        "r, w = os.pipe(); os.close(r); os.dup2(w, 2)\n"
        "say('a traceback', stop=False)\n"
        "try:\n"
        "    say('worker0 died; restart 1 of 3')\n"
        "except OutputClosed:\n"
        "    print('stopped')\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=conftest.ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "stopped", proc.stdout + proc.stderr


def test_a_closed_terminal_stops_the_run_saved_unless_nohup_ignores_it(tmp_path):
    """SIGHUP to the whole process group, as a terminal that closes sends it: the run stops as at SIGTERM, saved,
    exit 129; under nohup (SIGHUP ignored) the run goes on."""
    for ignored in (False, True):
        run = tmp_path / f"run-{ignored}"
        hup = signal.SIG_IGN if ignored else signal.SIG_DFL
        proc = start_train(run, "--game", "CartPole-v1", "--threads", 1, "--frames", 10**8, "--eval-every", 10**6,
                           start_new_session=True, preexec_fn=lambda hup=hup: signal.signal(signal.SIGHUP, hup))
        children = psutil.Process(proc.pid).children(recursive=True)
        os.killpg(proc.pid, signal.SIGHUP)
        if ignored:
            time.sleep(3)
            assert proc.poll() is None and all(c.is_running() for c in children)
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == (143 if ignored else 129), err[-2000:]
        assert not wait_gone(children, 5), "orphan processes"
        s = read_summary(run)
        assert s["status"] == ("terminated (SIGTERM)" if ignored else "hung up (SIGHUP)") and s["frames"] > 0
        assert torch.load(run / "checkpoint.pt", weights_only=True)["frames"] == s["frames"]


def test_nan_stops_training_and_keeps_the_last_good_checkpoint(tmp_path):
    run = tmp_path / "run"
    good = run_train("--game", "CartPole-v1", "--threads", 2, "--frames", 4000, "--eval-every", 2000,
                     "--eval-episodes", 2, "--run-dir", run)
    assert good.returncode == 0, good.stderr[-2000:]
    sha = hashlib.sha256((run / "checkpoint.pt").read_bytes()).hexdigest()
    # a learning rate of 1e30 blows the weights up within a couple of updates: a real NaN/Inf in the loss
    bad = run_train("--resume", run, "--frames", 100000, "--lr", 1e30)
    assert bad.returncode == 1, bad.stderr[-2000:]
    line = bad.stdout.strip().splitlines()[-1]
    assert "non-finite" in line and "at update" in line and "global frame" in line
    assert line.startswith(("worker0: ", "worker1: "))
    assert hashlib.sha256((run / "checkpoint.pt").read_bytes()).hexdigest() == sha
    assert read_summary(run)["status"].startswith(("worker0: non-finite", "worker1: non-finite"))


def test_a_sigint_while_the_children_start_still_stops_the_run_with_its_summary(tmp_path):
    """SIGINT the moment the first of 7 children exists (the rest still starting): before the console's handler
    was in place before the first start, this was a KeyboardInterrupt traceback with no summary."""
    run = tmp_path / "run"
    proc = conftest.start([sys.executable, conftest.ROOT / "train.py", "--no-progress", "--run-dir", run,
                           "--game", "CartPole-v1", "--threads", 6, "--frames", 10**9, "--eval-every", 10**8])
    deadline = time.time() + 120
    while not spawned_children(proc.pid) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.002)
    started = spawned_children(proc.pid)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert len(started) < 7, "every child had started before the signal: the test proved nothing"
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert read_summary(run)["status"] == "interrupted (SIGINT)"
    assert not wait_gone(started, 5)


def test_an_evaluator_orphaned_during_its_games_stops_within_seconds(tmp_path):
    """The runner SIGKILLed while the evaluator plays (100,000 CartPole games an evaluation): the workers and the
    evaluator, which now asks for its parent between steps of a game too, are gone within 5 s."""
    run = tmp_path / "run"
    proc = start_train(run, "--game", "CartPole-v1", "--threads", 2, "--frames", 10**9, "--eval-every", 2000,
                       "--eval-episodes", 100000, "--video-steps", 0)
    children = spawned_children(proc.pid)
    deadline = time.time() + 120
    while not list(run.glob("events.out.tfevents.*.evaluator")) and time.time() < deadline:
        time.sleep(0.3)
    time.sleep(3)  # the first evaluation (at 2,000 frames) is under way: its 100,000 games last hours
    assert len(children) == 3 and all(c.is_running() for c in children)
    proc.kill()
    proc.wait(timeout=10)
    t0 = time.time()
    left = wait_gone(children, 5)
    names = {c.pid: n for c, n in zip(children, ("worker0", "worker1", "evaluator"), strict=True)}
    assert not left, f"{[names[c.pid] for c in left]} still running {time.time() - t0:.0f} s after the runner's SIGKILL"


def test_a_test_that_times_out_leaves_no_trainer_behind(tmp_path):
    """run_train's timeout (or any failure) in a test: the autouse fixture kills train.py and its children."""
    with pytest.raises(subprocess.TimeoutExpired):
        run_train("--game", "CartPole-v1", "--threads", 2, "--frames", 10**9, "--run-dir", tmp_path / "run",
                  timeout=12)
    trainer = psutil.Process(conftest._started[-1].pid)
    tree = [trainer, *trainer.children(recursive=True)]
    assert len(tree) >= 3  # train.py, its workers and evaluator
    conftest.kill_started()
    assert wait_gone(tree, 10) == []


@pytest.mark.parametrize("sig, status, name", [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")])
def test_a_signal_during_the_final_evaluation_cuts_it_and_the_run_is_saved(tmp_path, sig, status, name):
    """The workers are done and the evaluator plays the final games: a signal then ends those games, and the
    checkpoint and summary are written as always (no traceback); --resume then plays the final evaluation."""
    run = tmp_path / "run"
    proc = start_train(run, "--game", "CartPole-v1", "--threads", 2, "--frames", 6000, "--eval-every", 3000,
                       "--final-eval-episodes", 100000)
    workers, evaluator = spawned_children(proc.pid)[:2], spawned_children(proc.pid)[-1]
    assert not wait_gone(workers, 120) and evaluator.is_running()  # the final evaluation is under way
    time.sleep(1)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == status and "Traceback" not in err, err[-2000:]
    assert f"{name}: the final evaluation is cut short; the run is saved without it" in err
    cut = read_summary(run)
    assert cut["status"] == f"unscored: interrupted ({name}) during the final evaluation; --resume plays it"
    assert cut["final_eval"] is None
    assert torch.load(run / "checkpoint.pt", weights_only=True)["frames"] == cut["frames"] >= 6000
    if sig != signal.SIGINT:
        return  # the resume of a cut final evaluation is one path, whichever signal cut it: proven once

    resumed = run_train("--resume", run, "--final-eval-episodes", 5)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = read_summary(run)
    assert summary["status"] == "finished" and summary["final_eval"]["episodes"] == 5
    assert summary["frames"] == cut["frames"]  # nothing more to train: the resumed session only evaluates


def test_a_final_evaluation_cut_by_its_time_cap_leaves_the_run_unscored_not_done(tmp_path):
    """--final-eval-seconds runs out: the run ends with exit 4 and an "unscored" status, never "finished"; the
    benchmark's and the report's test of a finished run refuse it; --resume plays the final evaluation and the run is
    done."""
    from hogwild_dqn.tools.runs import done, ended

    run = tmp_path / "run"
    proc = run_train("--game", "CartPole-v1", "--threads", 2, "--frames", 4000, "--eval-every", 2000,
                     "--final-eval-episodes", 100000, "--final-eval-seconds", 3, "--run-dir", run, timeout=300)
    assert proc.returncode == 4, (proc.returncode, proc.stderr[-2000:])
    assert "final evaluation took over --final-eval-seconds 3" in proc.stderr and "Traceback" not in proc.stderr
    cut = read_summary(run)
    assert cut["status"] == "unscored: finished, but the final evaluation was cut; --resume plays it"
    assert cut["final_eval"] is None and not ended(cut["status"], cut["final_eval"]) and not done(cut)
    assert proc.stdout.strip().splitlines()[-1].startswith("unscored: finished")
    resumed = run_train("--resume", run, "--final-eval-episodes", 5, "--final-eval-seconds", 600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = read_summary(run)
    assert summary["status"] == "finished" and summary["final_eval"]["episodes"] == 5
    assert ended(summary["status"], summary["final_eval"]) and done(summary)


def test_a_full_disk_is_one_line_and_the_last_good_checkpoint_is_kept(tmp_path):
    """A resumed session whose files cannot grow past half the checkpoint's size (RLIMIT_FSIZE: the kernel
    refuses the write with EFBIG, as a full disk refuses with ENOSPC): the run stops with exit 1, one line per
    file it could not write (no traceback, no restart of the evaluator), and the checkpoint as it was."""
    import resource

    run = tmp_path / "run"
    first = run_train("--game", "CartPole-v1", "--threads", 1, "--frames", 2000, "--eval-every", 1000, "--hidden", 256,
                      "--eval-episodes", 1, "--final-eval-episodes", 1, "--run-dir", run)
    assert first.returncode == 0, first.stderr[-2000:]
    ckpt, summary = run / "checkpoint.pt", (run / "summary.json").read_text()
    sha, limit = _sha(ckpt), ckpt.stat().st_size // 2

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = run_train("--resume", run, "--frames", 8000, preexec_fn=small_files)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"train.py: error: cannot write {ckpt}: File too large; checkpoint.pt is left as it was" in proc.stderr
    assert "restart" not in proc.stderr  # a full disk stays full: the evaluator is not restarted into it
    assert _sha(ckpt) == sha and (run / "summary.json").read_text() == summary and not list(run.glob(".*.tmp"))
    assert run_train("--resume", run, "--frames", 4000, "--final-eval-episodes", 1).returncode == 0  # room again


@pytest.fixture
def small_disk(tmp_path):
    """A real filesystem of 8 MiB (a tmpfs mounted for the test), to be filled; skipped where mounting is not
    allowed (not root)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or 'mount failed'}")
    yield disk
    conftest.kill_started()
    subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path, leave: int = 0) -> None:
    """Fill the filesystem of `disk` until `leave` bytes are free (a file `fill`, removed to make room)."""
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(disk / "fill", "ab") as f:
        try:
            f.write(b"\0" * max(0, free - leave))
        except OSError:
            pass


def _hashes(run: Path) -> dict:
    return {p.name: _sha(p) for p in run.iterdir() if p.is_file()}


SMALL = ["--game", "CartPole-v1", "--threads", 1, "--eval-every", 1000, "--eval-episodes", 1,
         "--final-eval-episodes", 2]


def test_a_disk_already_full_at_a_resume_is_one_line_and_loses_nothing(small_disk):
    """The issue's case on a real full filesystem: a resume whose disk filled to the last byte ends with one line
    naming the first file it could not write, exit 1, no traceback; every file as it was; room again, the same
    resume runs."""
    run = small_disk / "run"
    assert run_train(*SMALL, "--frames", 2000, "--run-dir", run).returncode == 0
    before = _hashes(run)
    _fill(small_disk)
    proc = run_train("--resume", run, "--frames", 4000)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines() == [f"train.py: error: cannot write {run / 'config.yaml'}: No space "
                                                "left on device; config.yaml is left as it was"]
    assert _hashes(run) == before and not list(run.glob(".*.tmp"))
    (small_disk / "fill").unlink()
    assert run_train("--resume", run, "--frames", 4000).returncode == 0


def test_a_disk_that_fills_during_a_run_stops_it_with_a_line_per_file(small_disk):
    """120 KiB left after the start: the processes that cannot write stop with one line each naming the file (an
    event file, a checkpoint, best.pt), nothing is restarted into the full disk, exit 1; every file of the run is
    whole (the checkpoint loads, summary.json parses); room again, --resume goes on."""
    run = small_disk / "run"
    assert run_train(*SMALL, "--frames", 2000, "--run-dir", run).returncode == 0
    _fill(small_disk, leave=120 * 1024)
    proc = run_train("--resume", run, "--frames", 10**6)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "restart" not in proc.stderr, proc.stderr
    assert lines and all(line.startswith("train.py: error: ") and "cannot write " in line
                         and "No space left on device" in line for line in lines), lines
    kept = torch.load(run / "checkpoint.pt", weights_only=False)["frames"]  # the evaluator's last, or the first's
    json.loads((run / "summary.json").read_text())
    assert not list(run.glob(".*.tmp"))
    (small_disk / "fill").unlink()
    assert run_train("--resume", run, "--frames", kept + 2000).returncode == 0


def test_a_video_on_a_full_disk_is_one_line_and_keeps_the_last_one(small_disk):
    run = small_disk / "run"
    assert run_train(*SMALL, "--frames", 2000, "--run-dir", run).returncode == 0
    _fill(small_disk)
    proc = conftest.run_play(run, "--episodes", "1")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines() == [f"play: error: cannot write {run / 'play.mp4'}: No space left on "
                                                "device; no play.mp4 was written"]
    assert not list(run.glob(".play.mp4*"))


def test_a_video_into_a_read_only_folder_is_one_line_naming_why(small_disk):
    """ffmpeg opens its file only at the first frame and then says "Broken pipe": the OS's own reason instead."""
    run = small_disk / "run"
    assert run_train(*SMALL, "--frames", 2000, "--run-dir", run).returncode == 0
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    proc = conftest.run_play(run, "--episodes", "1")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines() == [f"play: error: cannot write {run / 'play.mp4'}: Read-only file "
                                                "system; no play.mp4 was written"]


def test_the_run_files_and_event_writers_on_a_full_disk(small_disk, capfd):
    """atomic_bytes (config.yaml, summary.json, GIFs, records) keeps the file as it was; a tensorboard writer
    that cannot write says which event file, once, and its thread prints no traceback."""
    from hogwild_dqn.files import WriteFailed, atomic_bytes
    from hogwild_dqn.metrics import make_writer

    kept = small_disk / "record.json"
    atomic_bytes(b'{"score": 1}', kept)
    writer = make_writer(small_disk, "worker0")  # its event file exists before the disk fills
    _fill(small_disk)
    with pytest.raises(WriteFailed, match=r"record.json: No space left on device; record.json is left as it was"):
        atomic_bytes(b'{"score": 2}' * 10_000, kept)
    assert kept.read_bytes() == b'{"score": 1}' and not list(small_disk.glob(".*.tmp"))
    with pytest.raises(WriteFailed, match=r"cannot write .*events\.out\.tfevents\..*\.worker0: No space left on "
                                          r"device; the event file keeps what was written before"):
        for step in range(100_000):
            writer.add_scalar("charts/x", float(step), step)
            if step % 1000 == 0:
                writer.flush()
    writer.close()  # the failure was reported: not again
    with pytest.raises(WriteFailed, match=r"cannot write .*events\.out\.tfevents\..*\.runner: No space left"):
        make_writer(small_disk, "runner")
    assert "Traceback" not in capfd.readouterr().err


def _fail_with(size: int) -> None:
    raise ValueError("x" * size)


def test_a_child_whose_traceback_outgrows_its_pipe_still_exits_and_says_why():
    """The runner reads a worker's pipe once the worker has exited: a traceback larger than the pipe's buffer
    (64 KiB) must not leave the worker blocked in its send, alive for good, with the run waiting on it."""
    import torch.multiprocessing as mp

    from hogwild_dqn.exits import FAILED
    from hogwild_dqn.processes import run_child

    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=run_child, args=("worker0", send, _fail_with, 1_000_000))
    child.start()
    child.join(timeout=60)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive and child.exitcode == FAILED
    kind, text = recv.recv()
    assert kind == "error" and text.startswith("Traceback") and "ValueError: xxx" in text and len(text) < 10_000
    reason = text.strip().splitlines()[-1]  # the runner's one line on why the worker died (Processes.why)
    assert reason.startswith("ValueError: xxx") and " [...] " in reason and len(reason) < 2_100


# A frozen child: SIGSTOP, the state of a process stuck in a system call or a frozen cgroup. It answers no signal but
# SIGKILL, and marks no progress.
HUNG = ["--game", "CartPole-v1", "--threads", 2, "--hang-seconds", 8, "--video-steps", 0]  # no GIF: its encoding
# marks no progress, and on a loaded machine it can take longer than such a short limit


def _wait_line(proc: subprocess.Popen, lines: list, text: str, seconds: float) -> float:
    """Read proc's stderr into `lines` until a line holds `text`; return when (time.time())."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        line = proc.stderr.readline()
        lines.append(line)
        if text in line:
            return time.time()
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"no line with {text!r} within {seconds} s: {''.join(lines)[-2000:]}")


def test_a_frozen_worker_is_noticed_killed_and_replaced_and_the_run_finishes(tmp_path):
    run = tmp_path / "run"
    proc = start_train(run, *HUNG, "--frames", 300_000, "--eval-every", 100_000)  # long enough to freeze
    worker0 = spawned_children(proc.pid)[0]
    worker0.suspend()
    t0, lines = time.time(), []
    noticed = _wait_line(proc, lines, "worker0 hung (no progress for ", 30)
    out, err = proc.communicate(timeout=180)
    err = "".join(lines) + err
    assert proc.returncode == 0, err[-2000:]
    # --hang-seconds 8 from its last step, a moment before the freeze; the runner checks every 0.25 s
    assert 7.5 <= noticed - t0 < 15, noticed - t0
    assert re.search(r"worker0 hung \(no progress for \d+ s, --hang-seconds 8; it was (playing|learning)\); restart 1 "
                     r"of 3, on new random streams \(seed 1, worker 0, restart 1\)", err), err[-2000:]
    assert not alive(worker0)  # killed, not left stopped
    s = read_summary(run)
    assert s["frames"] >= 300_000 and s["final_eval"]["episodes"] == 30
    assert 0 < s["longest_silence_seconds"]["worker1"] < 8 <= s["longest_silence_seconds"]["worker0"]


def test_sigint_with_every_child_frozen_ends_the_run_within_the_grace_with_nothing_left(tmp_path):
    run = tmp_path / "run"
    proc = start_train(run, *LONG)  # the default --hang-seconds: the stop itself must end the frozen children
    children = psutil.Process(proc.pid).children(recursive=True)  # the resource tracker too
    for child in spawned_children(proc.pid):  # both workers and the evaluator
        child.suspend()
    time.sleep(1)
    t0 = time.time()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    took = time.time() - t0
    # JOIN_SECONDS 8, then one TERM_SECONDS 2 for all three (not 2 s each: 14 s), then SIGKILL
    assert proc.returncode == 130 and took < 13, (took, err[-2000:])
    assert not wait_gone(children, 0), "a child left behind"
    s = read_summary(run)
    assert s["status"] == "interrupted (SIGINT)"
    assert torch.load(run / "checkpoint.pt", weights_only=True)["frames"] == s["frames"] > 0


def test_a_second_sigint_ends_the_run_at_once_saying_what_was_not_saved(tmp_path):
    run = tmp_path / "run"
    proc = start_train(run, *LONG)
    children = psutil.Process(proc.pid).children(recursive=True)
    spawned_children(proc.pid)[0].suspend()  # the first SIGINT then waits JOIN_SECONDS for it
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    time.sleep(1)
    t0 = time.time()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and time.time() - t0 < 4, err[-2000:]
    assert err.strip().splitlines()[-1] == ("train.py: SIGINT again: stopped at once, its processes killed; not "
                                            "written: the final checkpoint and summary.json; it has no checkpoint")
    assert not wait_gone(children, 0), "a child left behind"
    assert not (run / "summary.json").exists() and not list(run.glob(".*.tmp"))
    assert (run / "config.yaml").exists()  # what was written before stays


def test_a_frozen_evaluator_is_replaced_and_does_not_stop_the_run_from_ending(tmp_path):
    run = tmp_path / "run"
    proc = start_train(run, *HUNG, "--frames", 200_000, "--eval-every", 50_000)  # long enough to freeze
    evaluator = spawned_children(proc.pid)[-1]
    evaluator.suspend()
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-2000:]
    assert "evaluator hung (no progress for " in err and "; restarting it, training goes on" in err
    assert not alive(evaluator)
    s = read_summary(run)
    assert s["final_eval"]["episodes"] == 30 and s["final_eval"]["frames"] == s["frames"]


def test_an_evaluator_frozen_in_the_final_evaluation_leaves_the_run_saved_and_unscored(tmp_path):
    run = tmp_path / "run"
    proc = start_train(run, *HUNG, "--frames", 100_000, "--eval-every", 100_000, "--final-eval-episodes", 100_000)
    *workers, evaluator = spawned_children(proc.pid)
    assert not wait_gone(workers, 240)  # the workers done: the evaluator plays its final games
    time.sleep(1)
    evaluator.suspend()
    t0 = time.time()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4 and time.time() - t0 < 15, err[-2000:]  # exits.UNSCORED
    assert "evaluator hung (no progress for " in err and "the final evaluation is lost" in err
    assert not alive(evaluator)
    s = read_summary(run)
    assert s["final_eval"] is None and s["frames"] >= 100_000
    assert torch.load(run / "checkpoint.pt", weights_only=True)["frames"] == s["frames"]
