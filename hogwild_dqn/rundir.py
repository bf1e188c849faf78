"""The run: its directory (name, the checks before a run writes into it), what its processes know of it (Run),
(summary.json's contents are evaluation/scores.py's)."""

from __future__ import annotations

import fcntl
import math
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from hogwild_dqn.config import Config, ConfigError, first_line


def new_run_dir(cfg: Config, threads: int) -> Path:
    """<logdir>/<game>-<variant>-t<threads>-s<seed>-<timestamp> (variant: the algorithm, e.g. a3c-lstm), with a
    suffix if that name is taken."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = f"{cfg.game.replace('/', '_')}-{cfg.variant()}-t{threads}-s{cfg.seed}-{stamp}"
    root = Path(cfg.logdir)
    for i in range(1, 1000):
        path = root / (base if i == 1 else f"{base}-{i}")
        try:
            path.mkdir(parents=True)
            return hold(path)
        except FileExistsError:
            continue
        except OSError as e:
            raise ConfigError(f"cannot create run dir {path}: {e.strerror}") from None
    raise ConfigError(f"too many runs named {base} under {root}")


def prepare_run_dir(cfg: Config, threads: int, resume: str | None) -> Path:
    """A new run never writes into an existing run dir; --resume requires one."""
    if resume is not None:
        path = Path(resume)
        if not (path / "checkpoint.pt").is_file():
            raise ConfigError(f"cannot resume {path}: {path / 'checkpoint.pt'} does not exist")
        hold(path)
        for stale in path.glob(".*.tmp"):  # a write that was killed half-way; the real file is intact
            try:
                stale.unlink()
            except OSError as e:  # a folder of that name, a read-only dir: the run could not write here either
                raise ConfigError(f"cannot resume {path}: {stale.name}, a write cut short, cannot be removed "
                                  f"({e.strerror or first_line(e)}); remove it, or make the dir writable") from None
        return path
    if not cfg.run_dir:
        return new_run_dir(cfg, threads)
    path = Path(cfg.run_dir)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ConfigError(f"run dir {path} already exists; pass --resume {path} to continue it, "
                          "or choose another --run-dir")
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / ".write-test").touch()
        (path / ".write-test").unlink()
    except OSError as e:
        raise ConfigError(f"run dir {path} is not writable: {e.strerror}") from None
    return hold(path)


_HELD: dict[Path, int] = {}  # the run dirs this process holds, with their open descriptors: a hold lasts while
                             # its descriptor is open


def hold(path: Path) -> Path:
    """Hold `path` for this session: a second session in the same run dir (a train orphaned by its suite and
    still running, a resume started twice) would overwrite the first one's checkpoint and summary. The hold is
    the kernel's lock on the directory itself (flock): it writes nothing into the run, and it ends with the
    process, however that ends; children spawned later do not inherit it. A filesystem without flock goes
    unheld (its lock is local to a machine on NFS too: two machines sharing a log dir are not told)."""
    key = path.resolve()
    if key in _HELD:  # this process's own (a resume after a run, in one interpreter)
        return path
    try:
        fd = _lock(path)
    except BlockingIOError:
        raise ConfigError(f"run dir {path} is in use by another session (a train still running in it); "
                          "stop that one or let it end, then resume") from None
    if fd is not None:
        _HELD[key] = fd
    return path


def in_use(path: Path) -> bool:
    """Whether another process holds the run dir `path` (see hold)."""
    if path.resolve() in _HELD:
        return False
    try:
        fd = _lock(path)
    except BlockingIOError:
        return True
    if fd is not None:
        os.close(fd)  # closing lets go of the lock it took
    return False


def _lock(path: Path) -> int | None:
    """An open descriptor of the directory `path` holding its flock; None where none can be had (no such dir, a
    filesystem without flock). BlockingIOError where another process holds it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if isinstance(e, BlockingIOError):
            raise
        return None
    return fd


def no_prior() -> dict:
    """What a new run's earlier sessions reached: nothing (a resumed run's comes from checkpoint.resume_point)."""
    return {"frames": 0, "wall_seconds": 0.0, "evals": [], "best": -math.inf, "device": None, "lr_start": None}


@dataclass
class Run:
    """One session of a run as its processes see it (handed to every child at spawn)."""
    cfg: Config
    spec: Any                 # envs.EnvSpec (not imported: this module stays free of gymnasium)
    run_dir: Path
    threads: int              # worker processes (on this machine)
    prior: dict = field(default_factory=no_prior)  # what earlier sessions reached: frames, wall_seconds, evals,
                                                   # best, device, lr_start (None: 0 frames, --lr)
    session_start: float = field(default_factory=time.time)

    @property
    def clock0(self) -> float:
        """The run's wall seconds (earlier sessions included) count from here."""
        return self.session_start - self.prior["wall_seconds"]
