"""make ablation's script on real (tiny) runs: the 2 x 2 settings, a table row each, the plot; finished runs
are kept on a second call."""

from hogwild_dqn.tools.ablation import SETTINGS, main, table


def test_ablation_runs_the_four_settings_and_writes_table_and_plot(tmp_path, capsys):
    args = ["--seeds", "1", "--frames", "2000", "--eval-every", "1000", "--threads", "1", "--logdir", str(tmp_path)]
    assert main(args) == 0
    md = (tmp_path / "ablation.md").read_text()
    for name, (folder, flags) in SETTINGS.items():
        assert f"| {name} | 1 |" in md
        config = (tmp_path / folder / "s1" / "config.yaml").read_text()
        assert ("replay: false" in config) == ("--no-replay" in flags)
        assert ("target: false" in config) == ("--no-target" in flags)
    assert (tmp_path / "ablation.png").stat().st_size > 5000
    stamp = (tmp_path / "replay-target" / "s1" / "summary.json").stat().st_mtime
    capsys.readouterr()
    assert main(args) == 0 and "== " not in capsys.readouterr().out  # nothing run again
    assert (tmp_path / "replay-target" / "s1" / "summary.json").stat().st_mtime == stamp


def test_the_table_scores_the_final_evaluation_even_where_no_periodic_one_ran():
    """A short or slow run can end before the evaluator plays a periodic evaluation (best_eval_return None, as
    on a loaded CI machine): its row still gives the final evaluation, and the best column says how many runs
    it covers."""
    def run(final, best, evals):
        return {"final_eval": {"mean_return": final}, "best_eval_return": best,
                "evals": [{"frames": f, "mean_return": m} for f, m in evals]}
    rows = table({"a": [run(200.0, 210.0, [(1000, 210.0), (2000, 200.0)]), run(100.0, None, [(2000, 100.0)])],
                  "b": [run(9.0, None, [(2000, 9.0)])]}, 195).splitlines()
    assert rows[2] == "| a | 2 | 150.0 ± 70.7 | 210.0 (1 of 2 runs) | 1,000 | 1/2 |"
    assert rows[3] == "| b | 1 | 9.0 | — | — | 0/1 |"
