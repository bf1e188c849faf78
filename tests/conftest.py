"""Helpers to run train.py for real, in a subprocess, as a user would, and to look at its processes."""

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
# The second tier (`make test-slow`, and .ci/run): the learning proofs and what needs their trained agent (play),
# the cluster, the benchmark suite, the optional extras' tasks and the soak, each minutes long. `make test` runs
# the rest: the features' proofs on real processes with tiny budgets.
SLOW_MODULES = {"test_learning", "test_lstm", "test_cluster", "test_benchmark", "test_continuous", "test_soak",
                "test_baselines", "test_ablation", "test_play_trained", "test_peer_sf"}
_started: list[subprocess.Popen] = []  # every start_train of the running test


def pytest_collection_modifyitems(items) -> None:
    """Mark the second tier's tests `slow` (pytest -m slow / -m "not slow")."""
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _no_trainer_left_behind():
    """A test that fails half-way (a timeout, an assert) must not leave its train.py training under the next."""
    yield
    kill_started()


def kill_started() -> None:
    """Kill every command the running test started (run_cmd, run_train, start_train) that is still running,
    with every process it started."""
    while _started:
        proc = _started.pop()
        if proc.poll() is None:
            try:
                tree = [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]
            except psutil.NoSuchProcess:
                tree = []
            for p in tree:
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
            proc.wait(timeout=30)


def run_cmd(cmd: list, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """Run a command from the repo root to its end and capture its output, as subprocess.run does, but tracked:
    however the test ends (a timeout, an assert), the command and every process it started are killed."""
    kwargs.setdefault("cwd", ROOT)
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)
    _started.append(proc)
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_train(*args, timeout=600, **kwargs) -> subprocess.CompletedProcess:
    """Run `python train.py ARGS` from the repo root; capture its output."""
    return run_cmd([sys.executable, ROOT / "train.py", "--no-progress", *args], timeout, **kwargs)


def run_play(*args, make=False) -> subprocess.CompletedProcess:
    """`python -m hogwild_dqn.play ARGS`, or with make=True `make play ARGS` (ARGS then make's variables)."""
    cmd = (["make", "--no-print-directory", "play", *args] if make
           else [sys.executable, "-m", "hogwild_dqn.play", *map(str, args)])
    return run_cmd(cmd, 600)


def start(cmd: list, **kwargs) -> subprocess.Popen:
    """Start a command from the repo root in the background, tracked as run_cmd's are."""
    proc = subprocess.Popen([str(c) for c in cmd], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kwargs)
    _started.append(proc)
    return proc


def start_train(run: Path, *args, **kwargs) -> subprocess.Popen:
    """Start train.py in the background; return once its last worker (by --threads, else 2) has begun logging."""
    args = [str(a) for a in args]
    last = int(args[args.index("--threads") + 1]) - 1 if "--threads" in args else 1
    proc = start([sys.executable, ROOT / "train.py", "--no-progress", "--run-dir", run, *args], **kwargs)
    deadline = time.time() + 120
    while not list(run.glob(f"events.out.tfevents.*.worker{last}")) and time.time() < deadline:
        time.sleep(0.3)
    time.sleep(1)
    return proc


def spawned_children(pid: int) -> list[psutil.Process]:
    """The trainer's spawned children in start order: worker0, worker1, ..., evaluator."""
    kids = [p for p in psutil.Process(pid).children() if "spawn_main" in " ".join(p.cmdline())]
    return sorted(kids, key=lambda p: (p.create_time(), p.pid))


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(procs: list[psutil.Process], seconds: float) -> list[psutil.Process]:
    """Wait up to `seconds` for the processes to end; return those still running."""
    deadline = time.time() + seconds
    while [p for p in procs if alive(p)] and time.time() < deadline:
        time.sleep(0.1)
    return [p for p in procs if alive(p)]


def read_summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())


@pytest.fixture(scope="session")
def cartpole_q1(tmp_path_factory) -> Path:
    """One short real q1 run on CartPole-v1 (1 worker, 1,000 frames) for the tests that read a Q method's run
    without changing it (play's epsilon, the probe's refusal): trained once, not once per test."""
    run = tmp_path_factory.mktemp("shared") / "cartpole-q1"
    proc = run_train("--game", "CartPole-v1", "--algo", "q1", "--threads", 1, "--frames", 1000, "--eval-every", 1000,
                     "--eval-episodes", 1, "--final-eval-episodes", 1, "--run-dir", run)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run


CARTPOLE_A3C_STOP = 400  # the shared run's --stop-return: a strong agent for play, reached well before the budget


@pytest.fixture(scope="session")
def cartpole_a3c(tmp_path_factory) -> Path:
    """One real A3C run on CartPole-v1 (2 workers, seed 1) for every test that needs a trained agent: the
    learning test (>= 195 within 100k frames), --stop-return (the run ends itself at the first evaluation
    >= 400, far below its 300k-frame budget) and play. Tests that change a run work on a copy. Its learning
    rate anneals over the 300k frames (a 100k-frame run's anneals faster)."""
    run = tmp_path_factory.mktemp("shared") / "cartpole-a3c"
    proc = run_train("--game", "CartPole-v1", "--algo", "a3c", "--threads", 2, "--frames", 300_000, "--seed", 1,
                     "--stop-return", CARTPOLE_A3C_STOP, "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run
