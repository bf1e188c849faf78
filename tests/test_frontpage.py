"""The README: its results table is the one the records give (generated, never typed), and it stays a front page
(at most 130 lines, none over 120 characters)."""

import json
import re
import shutil
import statistics
import sys

from hogwild_dqn.tools import suite_folder
from hogwild_dqn.tools.frontpage import END, SOURCES, START, table
from tests.conftest import ROOT, run_cmd


def test_the_readme_table_is_the_records_and_follows_them(tmp_path):
    check = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.frontpage", "--check"], 120)
    assert check.returncode == 0, check.stderr
    readme = (ROOT / "README.md").read_text()
    assert table() in readme.split(START)[1].split(END)[0]
    for folder in {suite_folder(ROOT / f) for _, _, *folders in SOURCES for f in folders if f and (ROOT / f).is_dir()}:
        shutil.copytree(folder, tmp_path / folder.relative_to(ROOT), dirs_exist_ok=True)
    (tmp_path / "README.md").write_text(readme)
    record = tmp_path / SOURCES[0][2] / "Breakout-ppo-s1.json"  # the default's
    summary = json.loads(record.read_text())
    summary["final_eval"]["mean_return"] = 1000.0  # another Breakout seed 1: the table follows the record
    record.write_text(json.dumps(summary))
    others = [json.loads(p.read_text())["final_eval"]["mean_return"]
              for p in record.parent.glob("Breakout-ppo-s[23].json")]
    assert f" | {statistics.mean([1000.0, *others]):,.1f} ± " in row(table(tmp_path), "Breakout")
    stale = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.frontpage", "--check", "--root", tmp_path], 120)
    assert stale.returncode == 1 and "is not the records'" in stale.stderr
    wrote = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.frontpage", "--root", tmp_path], 120)
    assert wrote.returncode == 0 and table(tmp_path) in (tmp_path / "README.md").read_text()


def test_a_suite_without_all_its_runs_shows_how_many_it_has_not_an_iqm(tmp_path):
    """An IQM over a few games would read as the suite's: until every game has its seeds, the count of runs."""
    _, _, folder, *_ = SOURCES[0]
    records = tmp_path / folder
    records.mkdir(parents=True)
    summary = json.loads((ROOT / "docs" / "benchmark-ppo" / "records" / "Qbert-ppo-s1.json").read_text())
    (records / "Qbert-ppo-s1.json").write_text(json.dumps(summary))
    (records / "Qbert-ppo-s2.json").write_text(json.dumps({**summary, "seed": 2}))
    shutil.copy(ROOT / "docs" / "benchmark-ppo" / "benchmark.md", suite_folder(records) / "benchmark.md")  # an IQM
    made = table(tmp_path)
    assert row(made, "Atari IQM").split(" | ")[1] == "2 of 18 runs"
    assert made.splitlines()[2].startswith("| Atari IQM ")  # the headline leads, the games under it
    assert row(made, "Qbert").split(" | ")[1] == f"{summary['final_eval']['mean_return']:,.1f} ± 0.0 (2 seeds)"
    assert row(made, "Pong").split(" | ")[1] == "—"


def row(markdown: str, name: str) -> str:
    """The table's row of `name`."""
    return next(line for line in markdown.splitlines() if line.startswith(f"| {name} "))


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 130, len(lines)
    assert [line for line in lines if len(line) > 120] == []


def test_atari5s_row_is_its_checked_in_reports_estimate():
    """The row is Atari-5's checked-in report's estimate and interval over runs (tests/test_benchmark.py writes a
    report with the real report tool, which needs the benchmark extra, and reads it back)."""
    column, folder = next((i, five) for i, (*_, five) in enumerate(SOURCES, 1) if five)  # the one column with it
    cells = row(table(), "Atari-5:").split(" | ")
    estimate, low, high, seeds = re.match(r"([\d.]+) \(95% CI ([\d.]+)-([\d.]+); (\d+) seeds\)$",
                                          cells[column].removesuffix(" |")).groups()
    report = (ROOT / folder / "benchmark.md").read_text()
    assert f"x {seeds} seeds" in report
    assert [c.removesuffix(" |") for i, c in enumerate(cells[1:], 1) if i != column] == ["—"] * (len(SOURCES) - 1)
    assert f"57 games (Aitchison et al. 2023): {estimate}**" in report
    assert f"CI over runs {low} to {high})" in report
