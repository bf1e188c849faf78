"""The machine a suite's run ran on, as its record names it: its cores and CPU, the bare emulator's speed when each
session of the run began (the machine's speed then, which varies up to 3x between machines and days), and the
share of its CPU that other work took meanwhile (a run sharing the machine is slower for that, not for its code)."""

from __future__ import annotations

import os
import platform
import resource
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil

EMULATOR_SECONDS = 3.0  # the bare emulator's timing before each session: a few seconds of the run's game


def describe() -> str:
    """Cores, CPU model and Python, as a run's start line names them."""
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}"


def bare_emulator(game: str) -> float | None:
    """Frames/s of the game's bare emulator here and now (envs.emulator_fps, random actions); None off Atari."""
    from hogwild_dqn.config import Config, game_kind

    if game_kind(game) != "atari":
        return None
    from hogwild_dqn.envs import emulator_fps

    return round(emulator_fps(Config(game=game), EMULATOR_SECONDS))


def _busy_seconds() -> float:
    """CPU seconds every process on the machine has used since boot (guest time is inside user time already)."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0) + getattr(t, "steal", 0.0)


def _our_seconds() -> float:
    """CPU seconds of this process and of every descendant that has ended (a run's train.py, its workers and
    evaluator: each process is waited for by its parent)."""
    mine, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def utc_now() -> str:
    """The time now as chain.log and the sessions stamp it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Session:
    """One session of a run (its start, or a resume) as the machine saw it: the bare emulator before it, and at
    its end the share of the machine's CPU that processes other than the run's used meanwhile."""

    def __init__(self, game: str):
        self.start, self.emulator = utc_now(), bare_emulator(game)
        self.t0, self.busy0, self.ours0 = time.time(), _busy_seconds(), _our_seconds()

    def begun(self) -> dict:
        """The session as the record keeps it until it ends: one cut without an end (the machine stopped, a
        SIGKILL) keeps this, so the record still counts it, with its wall time and other work unknown."""
        return {"start": self.start, "end": None, "wall_seconds": None, "bare_emulator_fps": self.emulator,
                "other_work_cpu_share": None}

    def end(self) -> dict:
        """The session as the record keeps it."""
        wall = max(time.time() - self.t0, 1e-9)
        other = (_busy_seconds() - self.busy0) - (_our_seconds() - self.ours0)
        share = min(1.0, max(0.0, other / (wall * (os.cpu_count() or 1))))
        return {"start": self.start, "end": utc_now(), "wall_seconds": round(wall, 1),
                "bare_emulator_fps": self.emulator, "other_work_cpu_share": round(share, 3)}


def sessions_line(sessions: list[dict]) -> str:
    """The sessions of a run in a few words: the bare emulator's frames/s (each session's), how many were cut
    without an end, and the share of the CPU other work took over the ended ones, or nothing for a run recorded
    before sessions were."""
    if not sessions:
        return ""
    emulator = "/".join(f"{s['bare_emulator_fps'] / 1000:.1f}k" for s in sessions if s.get("bare_emulator_fps"))
    ended = [s for s in sessions if s.get("wall_seconds") is not None]
    wall = sum(s["wall_seconds"] for s in ended)
    share = sum(s["other_work_cpu_share"] * s["wall_seconds"] for s in ended) / max(wall, 1e-9)
    cut = len(sessions) - len(ended)
    said = [f"{len(sessions)} sessions" if len(sessions) > 1 else "", f"{cut} cut without an end" if cut else "",
            f"bare {emulator}" if emulator else "", f"{share:.0%} other work" if ended else ""]
    return f" ({', '.join(filter(None, said))})"


if __name__ == "__main__":
    import sys

    from hogwild_dqn.commands import not_a_command

    sys.exit(not_a_command(__spec__.name, "`python -m hogwild_dqn.tools.benchmark`"))
