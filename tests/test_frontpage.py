"""The README: its results table is the one the records give (generated, never typed), and it stays a front page
(at most 130 lines, none over 120 characters)."""

import json
import shutil
import statistics
import sys

from hogwild_dqn.tools.frontpage import END, START, table
from tests.conftest import ROOT, run_cmd


def test_the_readme_table_is_the_records_and_follows_them(tmp_path):
    check = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.frontpage", "--check"], 120)
    assert check.returncode == 0, check.stderr
    readme = (ROOT / "README.md").read_text()
    assert table() in readme.split(START)[1].split(END)[0]
    for folder in ("docs/benchmark-ppo", "docs/ppo_pong_epochs2", "docs/benchmark-mujoco-ppo", "docs/benchmark",
                   "docs/pong_confirmed", "docs/benchmark-mujoco"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    (tmp_path / "README.md").write_text(readme)
    record = tmp_path / "docs" / "benchmark-ppo" / "records" / "Breakout-ppo-s1.json"
    summary = json.loads(record.read_text())
    summary["final_eval"]["mean_return"] = 1000.0  # another Breakout seed 1: the table follows the record
    record.write_text(json.dumps(summary))
    others = [json.loads(p.read_text())["final_eval"]["mean_return"]
              for p in record.parent.glob("Breakout-ppo-s[23].json")]
    assert f"| Breakout | {statistics.mean([1000.0, *others]):,.1f} ± " in table(tmp_path)
    stale = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.frontpage", "--check", "--root", tmp_path], 120)
    assert stale.returncode == 1 and "is not the records'" in stale.stderr
    wrote = run_cmd([sys.executable, "-m", "hogwild_dqn.tools.frontpage", "--root", tmp_path], 120)
    assert wrote.returncode == 0 and table(tmp_path) in (tmp_path / "README.md").read_text()


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 130, len(lines)
    assert [line for line in lines if len(line) > 120] == []
