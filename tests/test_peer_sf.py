"""The Sample Factory peer script (baselines/sf_appo.py) trains with Sample Factory's own Atari entry point in its
own venv and scores the last weights over whole games, as our final evaluation does."""

import json

import pytest

from tests.conftest import ROOT, run_cmd

SF_PYTHON = ROOT / ".venv-sf" / "bin" / "python"
if not SF_PYTHON.is_file():
    pytest.skip("the Sample Factory peer has a venv of its own: make install-sf (make test-slow installs it)",
                allow_module_level=True)


def sf_appo(*args, timeout: float):
    """`baselines/sf_appo.py ARGS` in the peer's venv, tracked as every command a test starts."""
    return run_cmd([SF_PYTHON, ROOT / "baselines" / "sf_appo.py", *args], timeout)


def test_sample_factory_trains_under_its_budget_and_its_last_weights_play_whole_games(tmp_path):
    run = tmp_path / "sf"
    proc = sf_appo("--game", "Breakout", "--seed", 1, "--frames", 20000, "--seconds", 240, "--episodes", 2,
                   "--run-dir", run, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads((run / "summary.json").read_text())
    assert (s["game"], s["seed"], s["status"], s["budget"], s["stopped_by"]) == (
        "Breakout", 1, "finished", {"frames": 20000, "seconds": 240}, "frames")
    assert 20_000 <= s["frames"] < 60_000 and s["frames_per_second"] > 0  # Sample Factory counts whole batches
    final = s["final_eval"]
    assert final["episodes"] == 2 and len(final["returns"]) == 2 and final["frames"] == s["frames"]
    # whole games, every life: a game of Breakout is 5 lives, and even an untrained agent's life lasts ~150 frames
    assert all(length >= 5 * 100 for length in final["lengths"]), final["lengths"]
    assert list((run / "sf" / "checkpoint_p0").glob("checkpoint_*.pth"))  # Sample Factory's own experiment dir
    assert f"sf_appo: Breakout seed 1: {s['frames']:,} frames" in proc.stdout
    # Once a run has scored a best, Sample Factory writes it into every checkpoint as a numpy scalar (it did at 2M
    # frames); such a checkpoint loads as the others do
    newest = sorted((run / "sf" / "checkpoint_p0").glob("checkpoint_*.pth"))[-1]
    rewrite = ("import sys, numpy, torch; s = torch.load(sys.argv[1], weights_only=False); "
               "s['best_performance'] = numpy.float64(4.64); torch.save(s, sys.argv[1])")
    assert run_cmd([SF_PYTHON, "-c", rewrite, newest], 120).returncode == 0  # in its venv: its numpy pickles it
    # a game cut at the cap is scored as it stands and the next one starts afresh
    proc = sf_appo("--game", "Breakout", "--eval-only", "--episodes", 2, "--max-episode-frames", 400, "--run-dir", run,
                   timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cut = json.loads((run / "summary.json").read_text())
    assert cut["final_eval"]["lengths"] == [400, 400] and cut["wall_seconds"] == s["wall_seconds"]


def test_the_wall_budget_stops_sample_factory_which_keeps_its_checkpoint(tmp_path):
    # Sample Factory 2.1.1's own --train_for_seconds never fires: the script stops it at --seconds
    run = tmp_path / "sf"
    proc = sf_appo("--game", "Breakout", "--seed", 2, "--frames", 10_000_000, "--seconds", 45, "--episodes", 1,
                   "--max-episode-frames", 400, "--run-dir", run, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads((run / "summary.json").read_text())
    assert s["stopped_by"] == "seconds" and 45 <= s["wall_seconds"] < 45 + 60, s
    assert 0 < s["frames"] < 10_000_000 and s["final_eval"]["episodes"] == 1


@pytest.mark.parametrize("args, said", [
    (["--game", "Foo"], "--game 'Foo': not one of Sample Factory's Atari games"),
    (["--game", "Breakout", "--seconds", "0"], "--seconds, --episodes and --max-episode-frames must be positive"),
    (["--game", "Breakout", "--eval-only"], "--eval-only: no Sample Factory experiment in"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, said):
    proc = sf_appo(*args, "--run-dir", tmp_path / "sf", timeout=120)
    assert proc.returncode == 2 and said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
