"""The benchmark suite over real runs: its report (final scores, human-normalized IQM with its interval), the
skipping of done runs, the resumption of a stopped one, and bad input."""

import csv
import json
import re
import shutil
import signal
import statistics
import sys
import time

import imageio.v2 as imageio
import pytest
import yaml

from hogwild_dqn.rundir import in_use
from hogwild_dqn.tools import atari5
from hogwild_dqn.tools.frontpage import COLUMNS, table
from hogwild_dqn.tools.suite_report import HUMAN_REFERENCE, resampled_alike, units
from tests.conftest import ROOT, kill_started, run_cmd, start
from tests.test_frontpage import row

# the suite's report is rliable's (with scipy): an optional extra, which `make test` installs
pytest.importorskip("rliable", reason="the benchmark extra is not installed: make install-benchmark")
trim_mean = pytest.importorskip("scipy.stats").trim_mean

SUITE = ["--games", "CartPole-v1", "--algo", "a3c", "--frames", "10000", "--reference", "CartPole-v1=22,500",
         "--reps", "2000"]
TRAIN = ["--", "--eval-every", "5000", "--final-eval-episodes", "5"]


def benchmark(*args, timeout=300):
    return run_cmd([sys.executable, "-m", "hogwild_dqn.tools.benchmark", *map(str, args)], timeout)


def iqm_line(report: str) -> re.Match:
    """The IQM pooled over every run, with its interval."""
    return re.search(r"IQM of human-normalized final scores, pooled over the \d+ runs \(rliable\): ([-\d.]+) \(95% "
                     r"stratified-bootstrap CI ([-\d.]+) to ([-\d.]+)", report)


def game_iqm_line(report: str) -> re.Match:
    """The IQM of the games' mean scores (each game one value), with its interval."""
    return re.search(r"IQM of the games' mean human-normalized final scores: ([-\d.]+) \(95% stratified-bootstrap "
                     r"CI ([-\d.]+) to ([-\d.]+)", report)


def test_the_report_scores_each_run_by_its_final_evaluation_and_aggregates_with_the_iqm(tmp_path):
    seeds, record = (1, 2, 3, 4), tmp_path / "record"  # four runs: the IQM drops the lowest and the highest
    done = benchmark(*SUITE, "--seeds", *seeds, "--logdir", tmp_path, *TRAIN)
    assert done.returncode == 0, done.stderr
    summaries = {s: json.loads((tmp_path / f"CartPole-v1-a3c-s{s}" / "summary.json").read_text()) for s in seeds}
    finals = [summaries[s]["final_eval"]["mean_return"] for s in seeds]
    assert all(summaries[s]["final_eval"]["episodes"] == 5 for s in seeds)

    rows = list(csv.DictReader((tmp_path / "benchmark.csv").open()))
    assert [float(r["final_mean"]) for r in rows] == finals
    normalized = [(f - 22) / (500 - 22) for f in finals]
    assert [float(r["human_normalized"]) for r in rows] == pytest.approx(normalized, abs=1e-4)

    report = (tmp_path / "benchmark.md").read_text()
    iqm, low, high = map(float, iqm_line(report).groups())
    assert iqm == pytest.approx(trim_mean(normalized, 0.25), abs=1e-3)
    assert low <= iqm <= high and low >= min(normalized) - 1e-3 and high <= max(normalized) + 1e-3
    game_iqm, _, _ = map(float, game_iqm_line(report).groups())
    assert game_iqm == pytest.approx(sum(normalized) / len(normalized), abs=1e-3)  # one game: its mean
    assert (tmp_path / "benchmark_profile.png").stat().st_size > 0
    starts = (tmp_path / "chain.log").read_text().count(" start ")

    # Every run is done: none runs; --record, given now, keeps the runs that ended before it
    again = benchmark(*SUITE, "--seeds", *seeds, "--logdir", tmp_path, "--record", record, *TRAIN)
    assert again.returncode == 0 and (tmp_path / "chain.log").read_text().count(" start ") == starts == 4
    assert sorted(p.name for p in record.glob("*.json")) == [f"CartPole-v1-a3c-s{s}.json" for s in seeds]

    # A clone elsewhere has no run dirs, only the record: nothing runs again and the report is the same
    clone = tmp_path / "clone"
    elsewhere = benchmark(*SUITE, "--seeds", *seeds, "--logdir", clone, "--record", record, *TRAIN)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert not (clone / "chain.log").exists() and not list(clone.glob("CartPole-v1-a3c-s*"))
    assert [float(r["final_mean"]) for r in csv.DictReader((clone / "benchmark.csv").open())] == finals
    assert iqm_line((clone / "benchmark.md").read_text())[1] == iqm_line(report)[1]  # the point estimate


def start_suite(logdir, frames=40_000, train=TRAIN):
    """A one-run suite of `frames` started in the background; returned once its last worker logs."""
    run = logdir / "CartPole-v1-a3c-s1"
    proc = start([sys.executable, "-m", "hogwild_dqn.tools.benchmark", *SUITE, "--frames", str(frames), "--seeds",
                  "1", "--logdir", logdir, *train])
    deadline = time.time() + 120
    while not list(run.glob("events.out.tfevents.*.worker1")) and time.time() < deadline:
        time.sleep(0.3)
    return proc, run


def test_a_stopped_suite_resumes_its_cut_run_from_the_checkpoint(tmp_path):
    proc, run = start_suite(tmp_path)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)  # as Ctrl-C: the suite hands it to the run, which stops as runs do
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "run the same command again to resume" in err
    cut = json.loads((run / "summary.json").read_text())
    assert cut["status"] == "interrupted (SIGINT)" and 0 < cut["frames"] < 40_000

    record = tmp_path / "record"
    done = benchmark(*SUITE, "--frames", "40000", "--seeds", 1, "--logdir", tmp_path, "--record", record, *TRAIN)
    assert done.returncode == 0, done.stderr
    assert f"--resume {run}" in (tmp_path / "chain.log").read_text()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["frames"] >= 40_000
    kept = json.loads((record / f"{run.name}.json").read_text())  # once ended: its summary, sessions and values
    sessions, values = kept.pop("sessions"), kept.pop("config")
    assert kept == summary and len(sessions) == 2  # the session cut by Ctrl-C and the resumed one
    assert all(0 <= s["other_work_cpu_share"] <= 1 and s["bare_emulator_fps"] is None for s in sessions)
    assert all(re.fullmatch(r"[0-9a-f]{7,}(\+changes)?|version .+", s["code"]) for s in sessions)
    assert values == yaml.safe_load((run / "config.yaml").read_text()) and values["eval_every"] == 5000
    assert f"--resume {run}" in (record / "chain.log").read_text()
    assert (tmp_path / "chain.log").read_text().count("% of the CPU") == 2
    row = [line for line in (tmp_path / "benchmark.md").read_text().splitlines() if "(2 sessions, " in line]
    assert len(row) == 1 and row[0].startswith("| CartPole-v1 |") and "% other work)" in row[0]
    assert summary["wall_seconds"] > cut["wall_seconds"] and summary["final_eval"]["episodes"] == 5
    # the same suite asked with another frame budget: its ended run (or, with the run dir gone, its record) is not
    # that suite's run, so it is refused in one line, not kept as done, and nothing is written
    shutil.move(tmp_path / "benchmark.md", tmp_path / "before.md")
    for where in ("run dir", "record"):
        if where == "record":
            shutil.move(run, tmp_path / "elsewhere")
        again = benchmark(*SUITE, "--frames", "80000", "--seeds", 1, "--logdir", tmp_path, "--record", record, *TRAIN)
        assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1, again.stderr
        assert f"{run} holds a run of other settings than this one (frames 40000 there, 80000 here)" in again.stderr
        assert not (tmp_path / "benchmark.md").exists()


def test_a_hang_up_stops_the_suites_run_as_sigterm_does(tmp_path):
    """The suite's terminal closed: its run stops and is saved as at SIGTERM, rather than training on, orphaned, in
    a run dir the next suite would resume; the suite's own words go to chain.log, not to the gone terminal."""
    proc, run = start_suite(tmp_path)
    time.sleep(2)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "benchmark: stopped" not in err, err
    cut = json.loads((run / "summary.json").read_text())
    assert cut["status"] == "terminated (SIGTERM)" and 0 < cut["frames"] < 40_000
    assert f"end {run.name} rc=143" in (tmp_path / "chain.log").read_text() and not in_use(run)


def test_a_run_killed_by_sigterm_counts_as_stopped(tmp_path):
    """A run that dies of SIGTERM uncaught (Popen's -15) reads as one that caught it (143): the suite stops."""
    from hogwild_dqn.exits import STOPPED
    from hogwild_dqn.tools.benchmark import train
    suicide = "import os, signal; signal.signal(signal.SIGTERM, signal.SIG_DFL); os.kill(os.getpid(), signal.SIGTERM)"
    rc = train([sys.executable, "-c", suicide], tmp_path / "run.log")
    assert rc == 143 and rc in STOPPED
    assert train([sys.executable, "-c", "raise SystemExit(4)"], tmp_path / "run.log") == 4


def test_a_session_killed_outright_stays_in_the_record(tmp_path):
    """A session that ends with no chance to say so (the machine stops, SIGKILL) is still counted: its record
    names it cut, and the row of its run says so."""
    _, run = start_suite(tmp_path)
    deadline = time.time() + 120
    while not (run / "checkpoint.pt").is_file() and time.time() < deadline:  # as a machine's stop mid-run
        time.sleep(0.3)
    kill_started()  # SIGKILL to the suite, its run (a session of its own), the run's workers and evaluator
    killed = json.loads((tmp_path / f"{run.name}.sessions.json").read_text())
    assert [s["end"] for s in killed] == [None] and killed[0]["wall_seconds"] is None

    record = tmp_path / "record"
    done = benchmark(*SUITE, "--frames", "40000", "--seeds", 1, "--logdir", tmp_path, "--record", record, *TRAIN)
    assert done.returncode == 0, done.stderr
    sessions = json.loads((record / f"{run.name}.json").read_text())["sessions"]
    assert sessions[0] == killed[0] and sessions[1]["end"] and sessions[1]["wall_seconds"] > 0
    report = (tmp_path / "benchmark.md").read_text()
    row = [line for line in report.splitlines() if "1 cut without an end" in line]
    assert len(row) == 1 and row[0].startswith("| CartPole-v1 |") and "(2 sessions, " in row[0]
    assert f"Code of the runs, as their records' sessions name it: {sessions[0]['code']} (1 run)." in report


def test_an_attempt_cut_before_its_first_checkpoint_is_set_aside_with_its_sessions(tmp_path):
    """A run killed before its first checkpoint starts over: its dir and its sessions are set aside together
    (<run>.cut-<time>), and the record of the run that ends names only its own session, not the attempt's."""
    _, run = start_suite(tmp_path, 2_000_000, ["--", "--eval-every", "2000000"])  # no checkpoint before the end
    kill_started()
    assert run.is_dir() and not (run / "checkpoint.pt").exists()
    attempt = json.loads((tmp_path / f"{run.name}.sessions.json").read_text())
    assert [s["end"] for s in attempt] == [None]

    record = tmp_path / "record"
    done = benchmark(*SUITE, "--seeds", 1, "--logdir", tmp_path, "--record", record, *TRAIN)
    assert done.returncode == 0, done.stderr
    cut = sorted(p.name for p in tmp_path.glob(f"{run.name}.cut-*"))
    assert len(cut) == 2 and cut[1] == f"{cut[0]}.sessions.json" and (tmp_path / cut[0]).is_dir()
    assert json.loads((tmp_path / cut[1]).read_text()) == attempt
    sessions = json.loads((record / f"{run.name}.json").read_text())["sessions"]
    assert len(sessions) == 1 and sessions[0]["end"] and sessions[0]["start"] > attempt[0]["start"]
    assert "cut without an end" not in (tmp_path / "benchmark.md").read_text()


@pytest.mark.parametrize("args, said", [
    (["--reference", "Pong=1"], "--reference 'Pong=1': expected GAME=RANDOM,HUMAN"),
    (["--reference", "Pong=nan,1"], "--reference 'Pong=nan,1': the random and human scores must be finite numbers"),
    (["--reference", "Pong=1,inf"], "the random and human scores must be finite numbers"),
    (["--frames", "0"], "must be positive"),
    (["--record", "pytest.ini"], "--record pytest.ini: not a directory"),
    (["--games", "CartPole-v1", "--", "--lr", "-1"], "train.py refused the run CartPole-v1-ppo-s1: train.py: error"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, said):
    done = benchmark("--logdir", tmp_path, "--seeds", 1, *args)
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_iqm_of_the_games_means_and_the_pooled_one_from_the_a3c_suites_records(tmp_path):
    """The repository's A3C suite (six games x 3 seeds, docs/benchmark/records): the IQM over the six games' means
    drops the best and the worst game; the pooled one the 4 best and 4 worst of the 18 runs."""
    records = ROOT / "docs" / "benchmark" / "records"
    done = benchmark("--algo", "a3c", "--logdir", tmp_path / "none", "--record", records, "--out", tmp_path,
                     "--report-only", "--reps", "2000")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader((tmp_path / "benchmark.csv").open()))
    by_game = {}
    for r in rows:
        by_game.setdefault(r["game"], []).append(float(r["human_normalized"]))
    assert len(by_game) == 6 and all(len(v) == 3 for v in by_game.values())
    report = (tmp_path / "benchmark.md").read_text()
    game_iqm, game_low, game_high = map(float, game_iqm_line(report).groups())
    means = sorted(sum(v) / 3 for v in by_game.values())
    assert game_iqm == pytest.approx(sum(means[1:5]) / 4, abs=1e-3)  # the middle four games of six
    assert game_low <= game_iqm <= game_high
    pooled, low, high = map(float, iqm_line(report).groups())
    assert pooled == pytest.approx(trim_mean([x for v in by_game.values() for x in v], 0.25), abs=1e-3)
    assert low <= pooled <= high and pooled != pytest.approx(game_iqm, abs=1e-3)
    again = benchmark("--algo", "a3c", "--logdir", tmp_path / "none", "--record", records, "--out", tmp_path / "again",
                      "--report-only", "--reps", "2000")  # the same records: the same intervals, to the digit
    second = (tmp_path / "again" / "benchmark.md").read_text()
    assert again.returncode == 0 and iqm_line(report).group(0) == iqm_line(second).group(0)
    assert game_iqm_line(report).group(0) == game_iqm_line(second).group(0)
    for game in by_game:  # each seed's wall minutes as its run measured them, never a mean over machines
        row = next(line for line in report.splitlines() if line.startswith(f"| {game} |"))
        assert row.endswith(" | " + ", ".join(f"s{r['seed']} {r['wall_minutes']}" for r in rows if r["game"] == game)
                            + " |")


def test_rliables_resamples_are_seeded_and_the_callers_generator_is_left_as_found():
    """rliable draws from numpy's global generator: seeded inside, the same draws every time; outside, the caller's
    sequence goes on as if nothing had drawn."""
    import numpy as np

    np.random.seed(7)
    with resampled_alike():
        first = np.random.rand(4)
    with resampled_alike():
        second = np.random.rand(4)
    after = np.random.rand()
    np.random.seed(7)
    assert (first == second).all() and after == np.random.rand()


def test_one_run_a_game_gives_the_iqm_without_an_interval_over_runs(tmp_path):
    """Seed 1 alone of the A3C suite: the bootstrap resamples seeds within each game and has nothing to resample, so
    the report gives the IQMs, and the probability of improvement over another suite's seed 1, without an interval."""
    records = ROOT / "docs" / "benchmark" / "records"
    done = benchmark("--algo", "a3c", "--seeds", 1, "--logdir", tmp_path / "none", "--record", records, "--out",
                     tmp_path, "--report-only", "--reps", "200", "--compare", ROOT / "docs" / "benchmark-ppo" /
                     "records")
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "benchmark.md").read_text()
    assert iqm_line(report) is None and game_iqm_line(report) is None and "resamples" not in report
    said = "(one run a game, so no interval over runs)"
    assert re.search(r"pooled over the 6 runs \(rliable\): [-\d.]+ " + re.escape(said), report)
    assert re.search(r"IQM of the games' mean human-normalized final scores: [-\d.]+ " + re.escape(said), report)
    assert re.search(r"^\| a3c, this suite \(1 seed\) \| .* \| [-\d.]+ \(one run a game\) \|", report, re.M)
    assert re.search(r"with probability \*\*[\d.]+\*\* " + re.escape(said[:-1]) + "; rliable's", report)
    assert (tmp_path / "benchmark_beside.png").stat().st_size > 0


def test_the_headline_is_the_pooled_iqm_and_other_suites_and_published_rows_stand_beside(tmp_path):
    """The PPO suite's records beside the A3C suite's (--compare) and the published rows (docs/published): the
    report opens with the pooled IQM; each row's IQM is the trimmed mean of its runs x games (the published
    algorithms' from their per-seed rows, the same reference scores); the probability that a PPO run beats an A3C
    run is rliable's, checked against its definition game by game."""
    ppo, a3c = ROOT / "docs" / "benchmark-ppo" / "records", ROOT / "docs" / "benchmark" / "records"
    done = benchmark("--algo", "ppo", "--logdir", tmp_path / "none", "--record", ppo, "--out", tmp_path,
                     "--report-only", "--reps", "2000", "--compare", a3c)
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "benchmark.md").read_text()
    first = report.split("\n\n")[1]
    assert first.startswith("**IQM of human-normalized final scores, pooled over the 18 runs (rliable): ")
    assert "Code of the runs" not in report  # these records are older than sessions: none names its code
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in report.splitlines()
            if line.startswith("| ") and " (9" not in line and "IQM (95% CI)" not in line}
    games = ["Pong", "Breakout", "SpaceInvaders", "BeamRider", "Qbert", "Seaquest"]
    ref = {"Pong": (-20.7, 14.6), "Breakout": (1.7, 30.5), "SpaceInvaders": (148.0, 1668.7),
           "BeamRider": (363.9, 16926.5), "Qbert": (163.9, 13455.0), "Seaquest": (68.4, 42054.7)}
    seeds = list(csv.DictReader((ROOT / "docs" / "published" / "atari_10m_seeds.csv").open()))
    rainbow = [(float(r["score"]) - ref[r["game"]][0]) / (ref[r["game"]][1] - ref[r["game"]][0]) for r in seeds
               if r["algorithm"] == "Rainbow (Dopamine TF)" and r["game"] in games]
    row = next(v for k, v in rows.items() if k.startswith("Rainbow (Dopamine TF)"))
    assert float(row[2].split(" ")[0]) == pytest.approx(trim_mean(rainbow, 0.25), abs=1e-3) == pytest.approx(0.498,
                                                                                                          abs=1e-3)
    published = list(csv.DictReader((ROOT / "docs" / "published" / "atari_10m.csv").open()))

    def means(algorithm: str) -> list[str]:  # the first five games' means as the table shows them
        by_game = {r["game"]: float(r["score"]) for r in published if r["algorithm"] == algorithm}
        return [f"{by_game[g]:.1f}" for g in games[:5]]

    assert "sticky 0.25" in row[1] and row[3:8] == means("Rainbow (Dopamine TF)")
    # a source with means and no runs' own scores (OpenAI baselines' plotted curves): its means, no IQM
    row = rows["PPO2 (OpenAI baselines) (means of 6 runs)"]
    assert row[2] == "—" and row[3:8] == means("PPO2 (OpenAI baselines)")
    assert not any(r["algorithm"] == "PPO2 (OpenAI baselines)" for r in seeds)
    # each side named by its algorithm and its suite's folder: two suites of one algorithm stay apart
    poi = re.search(r"P\(ppo \(benchmark-ppo\) > a3c \(benchmark\)\): .* with probability \*\*([\d.]+)\*\* "
                    r"\(95% CI ([\d.]+) to ([\d.]+)", report)
    ours = list(csv.DictReader((tmp_path / "benchmark.csv").open()))
    theirs = [json.loads(p.read_text()) for p in a3c.glob("*.json")]
    by_game = []
    for g in games:
        x = [float(r["human_normalized"]) for r in ours if r["game"] == g]
        y = [(t["final_eval"]["mean_return"] - ref[g][0]) / (ref[g][1] - ref[g][0]) for t in theirs if t["game"] == g]
        by_game.append(sum((a > b) + 0.5 * (a == b) for a in x for b in y) / (len(x) * len(y)))
    assert float(poi.group(1)) == pytest.approx(sum(by_game) / len(games), abs=1e-3)
    assert float(poi.group(2)) <= float(poi.group(1)) <= float(poi.group(3))
    # the games where PPO's mean is below A3C's by more than A3C's std over seeds, from the records themselves
    lower = []
    for g in games:
        mine = statistics.mean(float(r["final_mean"]) for r in ours if r["game"] == g)
        y = [t["final_eval"]["mean_return"] for t in theirs if t["game"] == g]
        if mine < statistics.mean(y) - statistics.stdev(y):
            lower.append(g)
    verdict = next(line for line in report.splitlines() if line.startswith("- Game by game against a3c (benchmark)"))
    assert lower and re.findall(r"(\w+) \([-\d.]+ against [-\d.]+ ± [\d.]+\)", verdict) == lower
    assert f"on {len(lower)} of the 6 games: " in verdict
    assert (tmp_path / "benchmark_beside.png").stat().st_size > 10_000
    assert "](benchmark_improvement.png)" in report  # rliable's figure of that probability, drawn
    assert (tmp_path / "benchmark_improvement.png").stat().st_size > 10_000


def test_a_suite_whose_records_are_its_own_folder_is_named_by_that_folder(tmp_path):
    """Records kept in docs/screens/ppo-vnorm (no `records` below it) name their suite ppo-vnorm, not screens; a
    suite in docs/benchmark-sticky/records is benchmark-sticky."""
    vnorm, sticky = ROOT / "docs" / "screens" / "ppo-vnorm", ROOT / "docs" / "benchmark-sticky" / "records"
    done = benchmark("--suite", "atari-sticky", "--seeds", "1", "2", "3", "--logdir", tmp_path / "none", "--record",
                     vnorm, "--out", tmp_path, "--report-only", "--reps", "200", "--compare", sticky)
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "benchmark.md").read_text()
    assert "- P(ppo (ppo-vnorm) > ppo (benchmark-sticky)): " in report
    assert "(screens)" not in report
    # records of 10M frames and 2 workers are not tabled under another budget's header
    other = benchmark("--suite", "atari-sticky", "--logdir", tmp_path / "none", "--record", vnorm, "--out",
                      tmp_path / "other", "--report-only", "--reps", "200", "--frames", 50000, "--threads", 7)
    assert other.returncode == 2 and other.stderr == (
        "benchmark: error: Pong seed 1 was run with 10,000,000 frames and 2 workers, not this report's --frames 50000 "
        "--threads 7: give the runs' own\n") and not (tmp_path / "other").exists()


def test_atari5s_estimate_stands_in_each_row_with_its_band_and_its_interval_over_runs(tmp_path):
    """A suite of Atari-5's five games: each row gives the paper's estimate of the 57-game median from its games'
    mean scores, the band of the paper's error, and the estimate's 95% interval over runs, which holds the estimate;
    a row whose runs agree on every game has an interval of one point. The records are one real record of the
    sticky suite, its game, seed and score set for each run."""
    base = json.loads((ROOT / "docs" / "benchmark-sticky" / "records" / "Qbert-ppo-s1.json").read_text())
    apart = {"BattleZone": [16000, 22000, 28000], "DoubleDunk": [-18, -15, -12], "NameThisGame": [4000, 6000, 8000],
             "Phoenix": [3000, 5000, 7000], "Qbert": [6000, 9000, 12000]}
    rows, reports = {}, {}
    for name, scores in (("apart", apart), ("agree", {g: [statistics.mean(v)] * 3 for g, v in apart.items()})):
        records = tmp_path / name / "records"
        records.mkdir(parents=True)
        for game, runs in scores.items():
            for seed, score in enumerate(runs, 1):
                record = dict(base, game=game, seed=seed, final_eval=dict(base["final_eval"], mean_return=score))
                (records / f"{game}-ppo-s{seed}.json").write_text(json.dumps(record))
        done = benchmark("--suite", "atari5", "--logdir", tmp_path / "none", "--record", records, "--out",
                         tmp_path / name, "--report-only", "--reps", "2000")
        assert done.returncode == 0, done.stderr
        reports[name] = report = (tmp_path / name / "benchmark.md").read_text()
        assert "| Atari-5: 57-game median (band; CI over runs) |" in report
        rows[name] = {line.split(" | ")[0][2:]: line.split(" | ")[-1] for line in report.splitlines()
                      if line.startswith("| ") and "57-game" not in line and "---" not in line}
    estimate = atari5.estimate({g: statistics.mean(v) for g, v in apart.items()})
    cells = [re.fullmatch(r"([\d.]+) \(([\d.]+)-([\d.]+); ([\d.]+)-([\d.]+)\) \|", rows[k]["ppo, this suite (3 seeds)"])
             for k in ("apart", "agree")]
    point, low, high, ci_low, ci_high = map(float, cells[0].groups())
    assert (point, low, high) == pytest.approx(estimate, abs=5e-4)
    assert ci_low < point < ci_high and ci_high - ci_low > 0.05
    assert cells[1].group(1) == cells[1].group(4) == cells[1].group(5) == cells[0].group(1)
    # the report says it under its IQM, the estimate bold: what a suite of these games is run for
    assert (f"**Atari-5's estimate of the median human-normalized score over the 57 games (Aitchison et al. 2023): "
            f"{cells[0].group(1)}** (the paper's band of ±10.4%: {cells[0].group(2)} to {cells[0].group(3)}; 95% "
            f"stratified-bootstrap CI over runs {cells[0].group(4)} to {cells[0].group(5)})") in reports["apart"]
    # a published algorithm's row: the estimate from its games' means, the interval from its per-seed rows
    published = [r for r in csv.DictReader((ROOT / "docs" / "published" / "atari_10m.csv").open())
                 if r["algorithm"] == "IQN (Dopamine TF)"]
    iqn = re.fullmatch(r"([\d.]+) \(([\d.]+)-([\d.]+); ([\d.]+)-([\d.]+)\) \|",
                       next(v for k, v in rows["apart"].items() if k.startswith("IQN (Dopamine TF)")))
    expected = atari5.estimate({r["game"]: float(r["score"]) for r in published if r["game"] in atari5.GAMES})
    assert float(iqn.group(1)) == pytest.approx(expected[0], abs=5e-4)
    assert float(iqn.group(4)) <= float(iqn.group(1)) <= float(iqn.group(5))


def test_before_every_game_has_its_seeds_the_iqm_is_said_to_be_partial(tmp_path):
    """BeamRider's three seeds and Pong's first of the 2-epoch suite: the IQM over BeamRider alone is given, but
    as what it is (not bold, the games it covers named first), never as the suite's headline."""
    records, suite = tmp_path / "records", ROOT / "docs" / "benchmark-ppo" / "records"
    records.mkdir()
    for name in ["BeamRider-ppo-s1", "BeamRider-ppo-s2", "BeamRider-ppo-s3", "Pong-ppo-s1"]:
        (records / f"{name}.json").write_text((suite / f"{name}.json").read_text())
    a3c = ROOT / "docs" / "benchmark" / "records"
    done = benchmark("--algo", "ppo", "--logdir", tmp_path / "none", "--record", records, "--out", tmp_path,
                     "--report-only", "--reps", "200", "--compare", a3c)
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "benchmark.md").read_text()
    first = report.split("\n\n")[1]
    assert first.startswith("So far, not yet the suite's: 1 of its 6 games has all their seeds (BeamRider). IQM of "
                            "human-normalized final scores, pooled over the 3 runs (rliable): ")
    assert "**" not in first and first.endswith("Not yet in them: Pong, Breakout, SpaceInvaders, Qbert, Seaquest.")
    assert "Beside other algorithms on BeamRider (IQM pooled" in report
    # A3C's row over BeamRider alone: the IQM of three runs trims none, so it is their mean human-normalized score
    theirs = [json.loads(f.read_text())["final_eval"]["mean_return"] for f in sorted(a3c.glob("BeamRider-*.json"))]
    random, human = HUMAN_REFERENCE["BeamRider"]
    row = next(line.split(" | ") for line in report.splitlines() if line.startswith("| a3c, "))
    assert len(theirs) == 3 and float(row[2].split()[0]) == pytest.approx(
        (statistics.mean(theirs) - random) / (human - random), abs=5e-4)


def test_the_report_of_a_suite_without_runs_says_so(tmp_path):
    done = benchmark("--logdir", tmp_path, "--report-only")
    assert done.returncode == 2 and "no finished or cut runs of this suite under" in done.stderr


def test_the_mujoco_suite_runs_sb3_a2c_beside_each_run_and_tables_both(tmp_path):
    """The continuous suite's shape on a short task: our run (the MuJoCo default, PPO), then SB3 A2C's with the
    same frames and seed, both ending with a final evaluation of the policy's mean, and the report's table of the
    two side by side."""
    pytest.importorskip("mujoco", reason="MuJoCo is an optional extra: make install-mujoco (make test installs it)")
    pytest.importorskip("stable_baselines3", reason="SB3 is an optional extra: make install-baselines (make test too)")
    done = benchmark("--suite", "mujoco", "--games", "InvertedPendulum-v5", "--seeds", 1, "--frames", 4000,
                     "--logdir", tmp_path, "--", "--eval-every", 2000, "--final-eval-episodes", 5)
    assert done.returncode == 0, done.stderr
    ours = json.loads((tmp_path / "InvertedPendulum-v5-ppo-s1" / "summary.json").read_text())
    sb3 = json.loads((tmp_path / "InvertedPendulum-v5-sb3_a2c-s1" / "summary.json").read_text())
    assert ours["final_eval"]["episodes"] == 5 and sb3["final_eval"]["episodes"] == 30
    assert sb3["status"] == "finished" and sb3["frames"] == 4000 and sb3["evals"][-1]["final"]
    cmd = (tmp_path / "chain.log").read_text()
    assert "sb3_a2c.py --game InvertedPendulum-v5 --frames 4000 --seed 1 --eval-every 200" in cmd
    assert "--frames 4000 --seed 1 --eval-every 200 --run-dir" in cmd  # ours: 20 evaluations too, unless told
    report = (tmp_path / "benchmark.md").read_text()
    row = [line for line in report.splitlines() if line.startswith("| InvertedPendulum-v5 |")][-1]  # beside SB3
    assert f"s1 {ours['final_eval']['mean_return']:.1f} / {sb3['final_eval']['mean_return']:.1f}" in row
    assert re.search(rf"\| s1 {ours['wall_seconds'] / 60:.1f} \(\d+% other work\) \| "
                     rf"s1 {sb3['wall_seconds'] / 60:.1f} \(\d+% other work\) \|", row), row  # each run's session
    rows = [(r["algo"], float(r["final_mean"]), r["best_periodic_eval"])
            for r in csv.DictReader((tmp_path / "benchmark.csv").open())]  # every run's final and best
    best = [("" if r["best_eval_return"] is None else str(r["best_eval_return"])) for r in (ours, sb3)]  # a run
    # of 4,000 steps can end before the evaluator's first periodic evaluation: the csv leaves the cell empty
    assert rows == [("ppo", ours["final_eval"]["mean_return"], best[0]),
                    ("sb3_a2c", sb3["final_eval"]["mean_return"], best[1])]
    assert "No IQM: these games have no random and human reference scores" in report
    assert report.startswith("# Benchmark: ppo, 2 workers, 4,000 steps, seeds 1\n")
    assert "![evaluations against frames, each run](benchmark_curves.png)" in report
    pixels = imageio.imread(tmp_path / "benchmark_curves.png")[..., :3]
    for color in ((31, 119, 180), (255, 127, 14)):  # ours (tab:blue) and SB3's (tab:orange) are drawn
        assert (pixels == color).all(-1).any(), color


def test_a_suite_counts_frames_and_games_only_when_every_game_is_atari():
    assert units(["Pong", "Breakout"]) == ("frames", "games")
    assert units(["Pong", "Hopper-v5"]) == units(["CartPole-v1"]) == ("steps", "episodes")


def test_the_fields_protocol_and_atari5_are_suites_whose_runs_all_play_sticky():
    """--suite atari-sticky (the six games) and atari5 (Atari-5's games) pass sticky actions 0.25 to every run,
    training and evaluation alike (one Config); a flag after `--` still has the last word."""
    from pathlib import Path

    from hogwild_dqn.tools.benchmark import parse, train_command
    from hogwild_dqn.tools.suites import SIX

    args = parse(["--suite", "atari-sticky"])
    assert tuple(args.games) == SIX and args.algo == "ppo" and args.frames == 10_000_000
    cmd = train_command(args, "Pong", 1, Path("r"))
    assert cmd[cmd.index("--sticky-actions") + 1] == "0.25"
    args = parse(["--suite", "atari5", "--seeds", "1", "--", "--sticky-actions", "0.1"])
    assert args.games == ["BattleZone", "DoubleDunk", "NameThisGame", "Phoenix", "Qbert"]
    cmd = train_command(args, "Phoenix", 1, Path("r"))
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--sticky-actions"] == ["0.25", "0.1"]
    assert "--sticky-actions" not in train_command(parse([]), "Pong", 1, Path("r"))


def test_the_frontpages_atari5_row_is_the_reports_estimate_with_its_interval_over_runs(tmp_path):
    """README's Atari-5 row reads the report as the real report tool writes it: two seeds a game give the estimate
    with its interval over runs."""
    column, folder = next((i, s.atari5) for i, s in enumerate(COLUMNS, 1) if s.atari5)  # the first column with it
    records = tmp_path / "records"
    records.mkdir()
    for game in atari5.GAMES:
        summary = json.loads((ROOT / "docs" / "benchmark-sticky" / "records" / f"{game}-ppo-s1.json").read_text())
        for seed, score in ((1, summary["final_eval"]["mean_return"]), (2, summary["final_eval"]["mean_return"] * 1.2)):
            s = {**summary, "seed": seed, "final_eval": {**summary["final_eval"], "mean_return": score}}
            (records / f"{game}-ppo-s{seed}.json").write_text(json.dumps(s))
    proc = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.benchmark", "--suite", "atari5", "--seeds", 1, 2,
                    "--logdir", tmp_path / "runs", "--record", records, "--out", tmp_path / folder, "--report-only",
                    "--reps", 1000], 300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cells = row(table(tmp_path), "Atari-5:").split(" | ")
    estimate, low, high = (float(x) for x in re.match(r"([\d.]+) \(95% CI ([\d.]+)-([\d.]+); 2 seeds\)$",
                                                      cells[column].removesuffix(" |")).groups())
    assert low <= estimate <= high
    assert [c.removesuffix(" |") for i, c in enumerate(cells[1:], 1) if i != column] == ["—"] * (len(COLUMNS) - 1)
