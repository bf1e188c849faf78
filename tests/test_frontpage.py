"""The README and docs/results.md: their results tables are the ones the records give (generated, never typed), and
the README stays a front page (at most 130 lines, none over 120 bytes)."""

import json
import re
import shutil
import statistics
import sys

from hogwild_dqn.tools.frontpage import (
    COLUMNS,
    END,
    SHOWN,
    START,
    SUITES_END,
    SUITES_START,
    finals,
    folders,
    pooled_iqm,
    suites_table,
    table,
)
from hogwild_dqn.tools.output import seeds_said
from hogwild_dqn.tools.runs import suite_folder
from hogwild_dqn.tools.suites import SIX
from tests.conftest import ROOT, run_cmd


def test_the_readme_table_is_the_records_and_follows_them(tmp_path):
    check = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.frontpage", "--check"], 120)
    assert check.returncode == 0, check.stderr
    readme = (ROOT / "README.md").read_text()
    assert table() in readme.split(START)[1].split(END)[0]
    copy_checkout(tmp_path)
    record = tmp_path / COLUMNS[0].records / "Breakout-ppo-s1.json"  # the default's
    summary = json.loads(record.read_text())
    summary["final_eval"]["mean_return"] = 1000.0  # another Breakout seed 1: the table follows the record
    record.write_text(json.dumps(summary))
    others = [json.loads(p.read_text())["final_eval"]["mean_return"]
              for p in record.parent.glob("Breakout-ppo-s[23].json")]
    assert f" | {statistics.mean([1000.0, *others]):,.1f} ± " in row(table(tmp_path), "Breakout")
    stale = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.frontpage", "--check", "--root", tmp_path], 120)
    assert stale.returncode == 1 and "README.md's results table is not the records'" in stale.stderr
    assert "results.md" not in stale.stderr  # Breakout's score is not in results.md's table: it is still the records'
    wrote = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.frontpage", "--root", tmp_path], 120)
    assert wrote.returncode == 0 and table(tmp_path) in (tmp_path / "README.md").read_text()


def copy_checkout(root):
    """README.md, docs/results.md and every folder of records and reports their tables read, under `root`."""
    for folder in {suite_folder(ROOT / f) for f in folders()}:
        shutil.copytree(folder, root / folder.relative_to(ROOT), dirs_exist_ok=True)
    for page in ("README.md", "docs/results.md"):
        (root / page).write_text((ROOT / page).read_text())


def test_results_tables_of_the_suites_are_the_records_and_follow_them(tmp_path):
    """results.md's table of the Atari suites: each suite's protocol, runs and pooled IQM as its records and report
    give them; a suite that loses a run shows how many it has, not an IQM, and --check finds results.md stale."""
    results = (ROOT / "docs" / "results.md").read_text()
    assert suites_table() == results.split(SUITES_START)[1].split(SUITES_END)[0].strip()
    default = row(suites_table(), SHOWN[0].label).split(" | ")
    assert default[1].startswith("sticky actions 0.25, ") and "FIRE reset" in default[1]
    assert default[2:4] == ["18", row(table(), "Atari IQM").split(" | ")[1]]
    assert row(suites_table(), "A3C").split(" | ")[1] == "not recorded"  # its records predate the protocol's field
    copy_checkout(tmp_path)
    (tmp_path / SHOWN[0].records / "Pong-ppo-s3.json").unlink()  # 17 runs of the six games, and BattleZone's
    assert row(suites_table(tmp_path), SHOWN[0].label).split(" | ")[2:4] == ["17", "17 of 18 runs"]
    assert row(table(tmp_path), "Atari IQM").split(" | ")[1] == "17 of 18 runs"
    stale = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.frontpage", "--check", "--root", tmp_path], 120)
    assert stale.returncode == 1 and "docs/results.md's results table is not the records'" in stale.stderr
    wrote = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.frontpage", "--root", tmp_path], 120)
    assert wrote.returncode == 0 and suites_table(tmp_path) in (tmp_path / "docs" / "results.md").read_text()


def test_a_suite_without_all_its_runs_shows_how_many_it_has_not_an_iqm(tmp_path):
    """An IQM over a few games would read as the suite's: until every game has its seeds, the count of runs."""
    records = tmp_path / COLUMNS[0].records
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


def test_a_suite_without_its_report_links_to_none(tmp_path):
    """A suite whose first runs are recorded before its report is written: a dash, not a link to a missing page."""
    copy_checkout(tmp_path)
    (suite_folder(tmp_path / SHOWN[0].records) / "benchmark.md").unlink()
    cells = row(suites_table(tmp_path), SHOWN[0].label).split(" | ")
    assert cells[3] == "—" and cells[5] == "—"  # its IQM read from the report, and the report's link
    assert "[benchmark.md](" in row(suites_table(), SHOWN[0].label)


def test_a_suite_of_one_seed_shows_its_iqm_without_an_interval():
    """A suite that runs seed 1 only (the 2016 row) is whole with one run a game: its IQM, said to have no interval,
    from its seed-1 runs alone; the same records read as a three-seed suite are a count of runs."""
    records = ROOT / "docs" / "benchmark-pqn-sticky" / "records"  # seed 1 of six games, and BeamRider's seed 2
    report = suite_folder(records) / "benchmark.md"  # its seed-1 report: "0.215 (one run a game, ...)"
    seed1 = finals(records, "pqn", (1,))
    assert sorted(seed1) == sorted(SIX) and all(len(v) == 1 for v in seed1.values())
    assert pooled_iqm(report, seed1, (1,)) == "**0.215** (one seed: no interval)"
    assert pooled_iqm(report, finals(records, "pqn"), (1, 2, 3)) == "7 of 18 runs"
    assert pooled_iqm(report, finals(records, "pqn", (2,)), (2,)) == "1 of 6 runs"


def row(markdown: str, name: str) -> str:
    """The table's row of `name`."""
    return next(line for line in markdown.splitlines() if line.startswith(f"| {name} "))


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 130, len(lines)
    assert [line for line in lines if len(line.encode()) > 120] == []  # bytes, as the project's check counts


def test_atari5s_row_is_its_checked_in_reports_estimate():
    """Each column's Atari-5 cell is its checked-in report's estimate, with the interval over runs where the report
    has one (several seeds) and the paper's band where it has not (one seed); a dash where the column has no report
    (tests/test_benchmark.py writes a report with the real report tool, which needs the benchmark extra)."""
    cells = [c.removesuffix(" |") for c in row(table(), "Atari-5:").split(" | ")[1:]]
    assert len(cells) == len(COLUMNS)
    for cell, suite in zip(cells, COLUMNS, strict=True):
        if not suite.atari5:
            assert cell == "—"
            continue
        report = (ROOT / suite.atari5 / "benchmark.md").read_text()
        m = re.match(r"([\d.]+) \((95% CI|band) ([\d.]+)-([\d.]+); (\d+) seeds?\)$", cell)
        estimate, kind, low, high, seeds = m.groups()
        assert f"x {seeds_said(int(seeds))};" in report
        assert f"57 games (Aitchison et al. 2023): {estimate}**" in report
        assert (f"CI over runs {low} to {high})" if kind == "95% CI" else f"±10.4%: {low} to {high};") in report
        assert (kind == "band") == (seeds == "1")  # one run a game: no interval over runs


def test_the_suites_tables_links_to_the_runs_stories_reach_their_sections():
    """SHOWN names each suite's story by a heading's anchor, typed: a renamed heading must fail here."""
    for suite in SHOWN:
        page, anchor = suite.told.split("#")
        headings = re.findall(r"^#+ (.+)$", (ROOT / "docs" / page).read_text(), re.M)
        slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}  # GitHub's
        assert anchor in slugs, suite.told
