"""Atomic checkpoint files and their checked loading."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch

from hogwild_dqn.config import ConfigError


def atomic_save(obj, path: Path) -> None:
    """Write to a temporary file in the same dir, fsync, then rename: a kill mid-write keeps the old file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: Path, game: str, algo: str) -> dict:
    """Load a checkpoint written by this trainer; any problem is a one-line ConfigError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"checkpoint {path} does not exist")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, corrupted or not a torch file at all
        raise ConfigError(f"checkpoint {path} cannot be read ({type(e).__name__}); it is truncated or corrupted") \
            from None
    if not isinstance(ckpt, dict) or "model" not in ckpt or "frames" not in ckpt:
        raise ConfigError(f"checkpoint {path} is not a hogwild_dqn checkpoint")
    if ckpt.get("game") != game or ckpt.get("algo") != algo:
        raise ConfigError(f"checkpoint {path} is for {ckpt.get('game')}/{ckpt.get('algo')}, not {game}/{algo}")
    return ckpt
