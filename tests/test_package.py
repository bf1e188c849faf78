"""The package as a user installs it: `pip install .` gives console commands that train from any directory with
the presets it carries, and its declared dependencies are the requirements files'."""

import json
import os
import subprocess
import sys
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import ROOT, run_cmd

COMMANDS = ("hogwild-train", "hogwild-play", "hogwild-report", "hogwild-bench", "hogwild-benchmark")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """`pip install .` of the checkout into a folder of its own (its dependencies are this venv's)."""
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--target", str(target), str(ROOT)], capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert done.returncode == 0, done.stderr
    return target


def _requirements(name: str) -> set[Requirement]:
    lines = (ROOT / name).read_text().splitlines()
    return {Requirement(line) for line in lines if line.strip() and not line.startswith("#")}


def test_the_installed_commands_train_from_any_directory_with_the_packaged_presets(installed, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(installed)}
    done = run_cmd([installed / "bin" / "hogwild-train", "--game", "CartPole-v1", "--frames", "10000", "--logdir",
                    "runs", "--no-progress"], 300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    preset = done.stdout.splitlines()[0].split(":")[0]
    assert Path(preset) == installed / "hogwild_dqn" / "configs" / "cartpole.yaml"  # not the checkout's
    (run,) = (tmp_path / "runs").iterdir()
    assert json.loads((run / "summary.json").read_text())["final_eval"]["episodes"] == 30

    bad = run_cmd([installed / "bin" / "hogwild-train", "--frames", "-5"], 60, cwd=tmp_path, env=env)
    assert bad.returncode == 2 and bad.stderr.strip() == "hogwild-train: error: --frames must be a positive " \
                                                         "integer, got -5"
    for command in COMMANDS[1:]:
        shown = run_cmd([installed / "bin" / command, "--help"], 60, cwd=tmp_path, env=env)
        assert shown.returncode == 0 and "usage:" in shown.stdout, (command, shown.stderr)


def test_the_packages_dependencies_are_the_requirements_files(installed):
    (info,) = installed.glob("hogwild_dqn-*.dist-info")
    meta = Parser().parsestr((info / "METADATA").read_text())
    declared = [Requirement(d) for d in meta.get_all("Requires-Dist")]
    assert {d for d in declared if d.marker is None} == _requirements("requirements.txt")
    # nothing only the tests need is installed with the package: pytest and ruff are the dev extra's
    assert not {d.name for d in declared if d.marker is None} & {"pytest", "ruff"}
    for extra in ("cluster", "mujoco", "baselines", "benchmark", "dev"):
        got = {Requirement(str(d).split(";")[0]) for d in declared if d.marker and d.marker.evaluate({"extra": extra})}
        assert got == _requirements(f"requirements-{extra}.txt"), extra


def test_the_package_is_licensed_and_versioned(installed):
    """MIT (LICENSE, declared in the metadata), Python 3.11 or later (tools/benchmark.py uses datetime.UTC), and
    `hogwild-train --version` names the package's version."""
    import hogwild_dqn

    (info,) = installed.glob("hogwild_dqn-*.dist-info")
    meta = Parser().parsestr((info / "METADATA").read_text())
    assert meta["License-Expression"] == "MIT" and meta["Requires-Python"] == ">=3.11"
    assert meta["Version"] == hogwild_dqn.__version__ and (ROOT / "CHANGELOG.md").read_text().count(
        f"## {hogwild_dqn.__version__} ") == 1
    assert list(info.rglob("LICENSE"))
    shown = run_cmd([installed / "bin" / "hogwild-train", "--version"], 60, env={**os.environ,
                                                                                "PYTHONPATH": str(installed)})
    assert shown.returncode == 0 and shown.stdout.strip() == f"hogwild-train {hogwild_dqn.__version__}"
