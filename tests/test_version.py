"""What code a result names: the commit of the checkout it ran in (real git, a throwaway repository)."""

import subprocess

from hogwild_dqn.version import commit


def test_commit_is_marked_changed_by_code_but_not_by_docs(tmp_path, tmp_path_factory):
    """A suite writes its records under docs/, so a change there must not mark the next run's code as changed;
    a change to any other tracked file must, and untracked files never do."""
    def git(*a):
        return subprocess.run(["git", *a], cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    git("init", "-q")
    (tmp_path / "docs").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "docs" / "chain.log").write_text("start\n")
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    head = git("rev-parse", "--short", "HEAD")
    pkg = tmp_path / "pkg"  # asked from inside the package's folder, as the package asks
    (tmp_path / "docs" / "chain.log").write_text("start\nend\n")
    (tmp_path / "docs" / "new.json").write_text("{}\n")
    (pkg / "b.py").write_text("y = 2\n")
    assert commit.__wrapped__(pkg) == head
    (pkg / "a.py").write_text("x = 2\n")
    assert commit.__wrapped__(pkg) == head + "+changes"
    assert commit.__wrapped__(tmp_path / "docs") == head + "+changes"  # the whole checkout counts, wherever asked
    assert commit.__wrapped__(tmp_path_factory.mktemp("plain")) is None  # not a checkout: an installed package
