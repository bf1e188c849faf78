"""The run directory: its name, the checks before a run writes into it, and summary.json's contents."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from hogwild_dqn.config import Config, ConfigError


def new_run_dir(cfg: Config, threads: int) -> Path:
    """<logdir>/<game>-<algo>-t<threads>-s<seed>-<timestamp>, with a suffix if that name is taken."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = f"{cfg.game.replace('/', '_')}-{cfg.algo}-t{threads}-s{cfg.seed}-{stamp}"
    root = Path(cfg.logdir)
    for i in range(1, 1000):
        path = root / (base if i == 1 else f"{base}-{i}")
        try:
            path.mkdir(parents=True)
            return path
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
        for stale in path.glob(".*.tmp"):  # a write that was killed half-way; the real file is intact
            stale.unlink()
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
    return path


def make_summary(cfg: Config, threads: int, reason: str, frames: int, wall: float, prior: dict, evals: list,
                 best: float) -> dict:
    """summary.json: totals over every session of the run, and every evaluation."""
    return {
        "game": cfg.game, "algo": cfg.algo, "threads": threads, "seed": cfg.seed, "status": reason,
        "frames": frames, "wall_seconds": round(prior["wall_seconds"] + wall, 2),
        "frames_per_second": round((frames - prior["frames"]) / max(wall, 1e-9), 1),  # this session's
        "best_eval_return": best if evals else None,
        "evaluator_device": next((e["device"] for e in reversed(evals) if "device" in e), prior["device"]),
        "evals": [{k: e[k] for k in ("frames", "wall_seconds", "mean_return", "std_return", "episodes")}
                  for e in evals],
    }
