"""make ablation's script on real (tiny) runs: the 2 x 2 settings, a table row each, the plot; finished runs
are kept on a second call."""

from hogwild_dqn.tools.ablation import SETTINGS, main


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
