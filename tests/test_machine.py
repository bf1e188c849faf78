"""What a suite's record says of the machine a run ran on: the bare emulator's speed before each session, and the
share of the CPU that other processes took during it (a busy process of someone else's counts, the run's own
processes do not)."""

import subprocess
import sys
import time

from hogwild_dqn.tools.machine import Session, bare_emulator, sessions_line

BUSY = "import time\nt = time.time()\nwhile time.time() - t < 2.0:\n    pass"


def test_the_bare_emulator_is_timed_on_atari_games_only():
    assert bare_emulator("Pong") > 500  # the real ALE, random actions, frame skip 4
    assert bare_emulator("CartPole-v1") is None


def test_other_work_is_the_cpu_that_the_runs_own_processes_did_not_use():
    mine = Session("CartPole-v1")
    subprocess.run([sys.executable, "-c", BUSY], check=True)  # a run's process: waited for, so it is ours
    ours = mine.end()
    theirs = Session("CartPole-v1")
    other = subprocess.Popen([sys.executable, "-c", BUSY])  # someone else's, still running at the end
    time.sleep(2.2)
    shared = theirs.end()
    other.wait()
    assert 0 <= ours["other_work_cpu_share"] <= 1 and ours["bare_emulator_fps"] is None
    assert shared["other_work_cpu_share"] > ours["other_work_cpu_share"] + 0.15, (ours, shared)


def test_a_runs_sessions_in_a_few_words():
    one = {"wall_seconds": 100.0, "bare_emulator_fps": 8106, "other_work_cpu_share": 0.1}
    two = {"wall_seconds": 300.0, "bare_emulator_fps": 11055, "other_work_cpu_share": 0.5}
    assert sessions_line([one]) == " (bare 8.1k, 10% other work)"
    assert sessions_line([one, two]) == " (2 sessions, bare 8.1k/11.1k, 40% other work)"  # weighted by wall time
    assert sessions_line([{**one, "bare_emulator_fps": None}]) == " (10% other work)"
    assert sessions_line(None) == sessions_line([]) == ""
    cut = {"wall_seconds": None, "bare_emulator_fps": 4970, "other_work_cpu_share": None}  # killed outright
    assert sessions_line([cut, two]) == " (2 sessions, 1 cut without an end, bare 5.0k/11.1k, 50% other work)"
    assert sessions_line([cut]) == " (1 cut without an end, bare 5.0k)"
