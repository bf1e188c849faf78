"""The Stable-Baselines3 A2C script (baselines/sb3_a2c.py) stops as our runs do, on a real CartPole run."""

import json
import signal
import sys
import time

import pytest

from tests.conftest import ROOT, start

pytest.importorskip("stable_baselines3")


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job of a non-interactive shell starts


@pytest.mark.parametrize("sig, status, rc", [(signal.SIGINT, "interrupted (SIGINT)", 130),
                                             (signal.SIGTERM, "terminated (SIGTERM)", 143)])
def test_a_signal_stops_the_run_with_its_summary_and_model_written(tmp_path, sig, status, rc):
    run = tmp_path / "sb3"
    proc = start([sys.executable, ROOT / "baselines" / "sb3_a2c.py", "--game", "CartPole-v1", "--frames", 10_000_000,
                  "--eval-every", 2000, "--eval-episodes", 1, "--run-dir", run], preexec_fn=ignore_sigint)
    deadline = time.time() + 120
    while not (run / "summary.json").is_file() and time.time() < deadline:  # written at the first evaluation
        time.sleep(0.3)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == rc, err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == status and 2000 <= summary["frames"] < 10_000_000
    assert summary["final_eval"] is None and (run / "model.zip").is_file()
    assert f"{status}: {summary['frames']} frames" in out
