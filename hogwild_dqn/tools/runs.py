"""What the tools know of runs, once: how a tool starts a training run (TRAIN, train), resumes or starts it in its run
dir (resume_or_start) and checks that a kept run is the one asked for, whether a run needs nothing more (ended,
done, run_done), and what a run's summary or record is (summary_at, read_json)."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from hogwild_dqn.checkpoint import readable_evals
from hogwild_dqn.config import ConfigError, is_number, load
from hogwild_dqn.exits import terminal_gone
from hogwild_dqn.rundir import in_use

# How a tool starts a training run: the trainer's own command, from the current directory (so relative --logdir
# and --run-dir mean what the user meant), a checkout or an installed package alike.
TRAIN = (sys.executable, "-m", "hogwild_dqn.train")


def sessions_file(run: Path) -> Path:
    """Where a suite keeps the sessions of the run in `run` (when, on which machine and code): beside the run
    dir, which is the trainer's."""
    return run.with_name(f"{run.name}.sessions.json")


# What a run's config may differ in from the command a tool would start it with and still be that run: where it
# is kept and how it is watched, not what it learns or how it is scored.
NOT_THE_RUN = frozenset({"logdir", "run_dir", "eval_every", "eval_episodes", "eval_envs", "video_steps",
                         "final_eval_seconds", "cluster", "sync_seconds", "max_restarts", "force", "progress",
                         "log_every"})


def other_settings(kept: dict | None, start: list[str]) -> str | None:
    """How the run whose config is `kept` (a run dir's config.yaml, a record's "config") differs from the one the
    train command `start` would make, in a few words (None: the same, or nothing kept to tell). A tool that kept
    or resumed it as the run it was asked for would put another run in its table."""
    if not isinstance(kept, dict):
        return None
    want = yaml.safe_load(yaml.safe_dump(load(start[len(TRAIN):])[0].to_dict()))  # as config.yaml holds them
    differ = [f"{k} {kept[k]!r} there, {v!r} here" for k, v in want.items()
              if k in kept and k not in NOT_THE_RUN and kept[k] != v]
    return "; ".join(differ[:3]) + (f" (and {len(differ) - 3} more)" if len(differ) > 3 else "") if differ else None


def kept_config(run: Path) -> dict | None:
    """The config of the run a run dir keeps: its config.yaml where it has a checkpoint or a summary to resume or
    keep (a dir cut before its first checkpoint keeps nothing: resume_or_start sets it aside), else None."""
    if not ((run / "checkpoint.pt").is_file() or (run / "summary.json").is_file()):
        return None
    cfg = read_yaml_file(run / "config.yaml")
    return cfg if isinstance(cfg, dict) else None


def check_same_run(run: Path, start: list[str], kept: dict | None = None) -> None:
    """Refuse (ConfigError) the run dir `run` where its run (`kept`: its config, by default kept_config's) is not
    the one `start` would make: another game, frame budget, worker count or flag."""
    differ = other_settings(kept if kept is not None else kept_config(run), start)
    if differ:
        raise ConfigError(f"{run} holds a run of other settings than this one ({differ}); give another --logdir, or "
                          "move it aside")


def read_yaml_file(path: Path):
    """A YAML file's contents, or None where it is missing or unreadable."""
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return None


def train(cmd: list[str], log: Path | None = None) -> int:
    """Run one run's command to its end, its output appended to `log` (None: on this console). Ctrl-C, SIGTERM
    and SIGHUP (as SIGTERM) are handed to it once each (it runs in a session of its own, so a terminal's Ctrl-C
    does not reach it twice) and it stops as a run does: its checkpoint and summary written, ready to be
    resumed. Return its exit status, 128 + N where a signal N killed it."""
    if log is None:
        proc = subprocess.Popen(cmd, start_new_session=True)
    else:
        with log.open("a") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def hang_up(signum, frame) -> None:
        """The terminal is gone: the run stops as at SIGTERM (left alone it would train on, orphaned, in a run dir
        the next suite wants to resume), and what the tool prints from here goes nowhere rather than failing
        (EIO); a suite's chain.log and records still get it all."""
        terminal_gone()
        proc.send_signal(signal.SIGTERM)

    handlers = {sig: signal.signal(sig, lambda signum, frame: proc.send_signal(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:  # under nohup it stays ignored
        handlers[signal.SIGHUP] = signal.signal(signal.SIGHUP, hang_up)
    try:
        rc = proc.wait()
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    # killed by a signal it did not catch (a second SIGTERM during its stop): the shell's 128 + N, so a run
    # stopped either way stops the suite (STOPPED) rather than letting it start the next run
    return 128 - rc if rc < 0 else rc


def resume_or_start(run: Path, start: list[str]) -> list[str]:
    """The command that brings the run in `run` to its end: resume it from its checkpoint (a run that was cut),
    else `start` it, with a dir cut before its first checkpoint set aside as <run>.cut-<time>, and the sessions
    of that attempt with it: the run that starts owes them nothing, its record must not count them. A run dir
    a train still holds (one orphaned by an earlier suite) is neither resumed nor set aside: ConfigError."""
    if in_use(run):
        raise ConfigError(f"run dir {run} is in use by another session (a train still running in it, perhaps "
                          "an earlier suite's); stop that one or let it end, then start again")
    if (run / "checkpoint.pt").is_file():
        return [*TRAIN, "--resume", str(run), "--no-progress"]
    cut = run.with_name(f"{run.name}.cut-{int(time.time())}")
    if run.exists():
        run.rename(cut)
    if sessions_file(run).exists():
        sessions_file(run).rename(sessions_file(cut))
    return start


def ended(status: str, final) -> bool:
    """A run that needs nothing more: it ran all its frames or stopped at a confirmed --stop-return ("solved:
    ...", evaluation.stop_reason), and has its score, `final` (summary.json's final_eval). An unscored run (its
    final evaluation cut) or one that failed is never done: make benchmark resumes it, the reports do not count
    it."""
    return (status == "finished" or status.startswith("solved:")) and final is not None


def done(summary: dict) -> bool:
    """A summary.json of a run that needs nothing more (ended, with its score)."""
    return ended(summary["status"], summary.get("final_eval"))


def suite_folder(records: Path) -> Path:
    """A suite's folder, which names it and holds its report (benchmark.md): its records' folder, or the one above
    where they sit in records/ (docs/benchmark-sticky/records: docs/benchmark-sticky; docs/screens/ppo-vnorm)."""
    return records.parent if records.name == "records" else records


def read_json(path: Path) -> dict | None:
    """A JSON file of a run (summary.json, a record), or None where there is none or it cannot be read."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


SUMMARY_KEYS = ("game", "algo", "seed", "status", "frames", "wall_seconds")  # every summary.json of ours has them


def summary_at(path: Path) -> dict | None:
    """A run's summary.json or its record, or None where there is none or the file is not one (unreadable, or not an
    object with a summary's keys, a game and status that are text, finite numbers for its frames and wall time, and
    where it has a score, evaluations or a confirmed stop, their numbers), so that what is not a run's summary (or
    one edited by hand) is passed over rather than read half-way."""
    s = read_json(path)
    if (not isinstance(s, dict) or not all(k in s for k in SUMMARY_KEYS) or not isinstance(s["status"], str)
            or not isinstance(s["game"], str)):
        return None
    final, stop, evals = s.get("final_eval"), s.get("confirmed"), s.get("evals", [])
    if not (is_number(s["frames"]) and is_number(s["wall_seconds"])):
        return None
    if final is not None and not (isinstance(final, dict)
                                  and all(is_number(final.get(k)) for k in ("mean_return", "std_return", "episodes"))):
        return None
    if not readable_evals(evals):
        return None
    if stop is not None and not (isinstance(stop, dict) and is_number(stop.get("frames"))
                                 and is_number(stop.get("wall_seconds"))):
        return None
    return s


def run_done(run: Path) -> bool:
    """A run dir whose summary.json says it needs nothing more (done)."""
    summary = read_json(run / "summary.json")
    return isinstance(summary, dict) and isinstance(summary.get("status"), str) and done(summary)
