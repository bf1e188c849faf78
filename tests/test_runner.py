"""The runner on real processes: resume continues a run; Ctrl-C stops cleanly with a checkpoint."""

import os
import signal
import subprocess
import sys
import time

import torch

from tests.conftest import ROOT, read_summary, run_train


def test_resume_continues_frames_and_logs(tmp_path):
    run = tmp_path / "run"
    first = run_train("--game", "CartPole-v1", "--algo", "nq", "--threads", 1, "--frames", 6000,
                      "--eval-every", 3000, "--eval-episodes", 2, "--run-dir", run)
    assert first.returncode == 0, first.stderr[-2000:]
    before = read_summary(run)
    events_before = {p.name for p in run.glob("events.out.tfevents.*")}
    again = run_train("--resume", run, "--frames", 9000)
    assert again.returncode == 0, again.stderr[-2000:]
    after = read_summary(run)
    assert after["frames"] >= 9000 and after["evals"][: len(before["evals"])] == before["evals"]
    assert after["evals"][-1]["frames"] == after["frames"] and after["wall_seconds"] > before["wall_seconds"]
    assert events_before < {p.name for p in run.glob("events.out.tfevents.*")}  # appended beside the old ones
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ckpt["frames"] == after["frames"] and ckpt["target_epoch"] == after["frames"] // 1000
    done = run_train("--resume", run, "--frames", 9000)
    assert done.returncode == 2 and "raise --frames" in done.stderr


def _start_training(run, *args) -> subprocess.Popen:
    """Start train.py in the background and return once both workers have begun logging."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), "--no-progress", "--run-dir", str(run), *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not list(run.glob("events.out.tfevents.*.worker1")) and time.time() < deadline:
        time.sleep(0.5)
    return proc


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def test_sigint_stops_everything_with_checkpoint(tmp_path):
    run = tmp_path / "run"
    proc = _start_training(run, "--game", "Pong", "--threads", "2", "--frames", "10000000",
                           "--eval-every", "5000000")
    time.sleep(3)  # let the workers learn for a moment
    children = _children(proc.pid)
    assert len(children) >= 3  # two workers and the evaluator (and multiprocessing's helper)
    t0 = time.time()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.time() - t0 < 10 and proc.returncode == 130, err[-2000:]
    assert "interrupted" in out
    s = read_summary(run)
    assert s["status"] == "interrupted (SIGINT)" and s["frames"] > 0
    assert torch.load(run / "checkpoint.pt", weights_only=True)["frames"] == s["frames"]
    deadline = time.time() + 5
    while [c for c in children if _alive(c)] and time.time() < deadline:
        time.sleep(0.2)
    assert not [_cmdline(c) for c in children if _alive(c)]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited already
    except FileNotFoundError:
        return False


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read().replace("\0", " ")
    except FileNotFoundError:
        return "(gone)"


def test_killed_worker_is_noticed_and_run_stops(tmp_path):
    run = tmp_path / "run"
    proc = _start_training(run, "--game", "CartPole-v1", "--threads", "2", "--frames", "100000000",
                           "--eval-every", "50000000")
    time.sleep(1)
    spawned = sorted(p for p in _children(proc.pid) if "spawn_main" in _cmdline(p))
    assert len(spawned) == 3, [_cmdline(p) for p in _children(proc.pid)]  # worker0, worker1, evaluator
    t0 = time.time()
    os.kill(spawned[0], signal.SIGKILL)  # workers start first: the lowest pid is worker0
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and time.time() - t0 < 15
    assert "worker0 died (killed by signal 9)" in out
    assert read_summary(run)["status"] == "worker0 died (killed by signal 9)"
    assert (run / "checkpoint.pt").is_file()
