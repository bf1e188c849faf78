"""Atomic checkpoint files and their checked loading."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from hogwild_dqn.config import ConfigError, first_line, is_number, read_yaml
from hogwild_dqn.files import atomic_bytes, atomic_write
from hogwild_dqn.schedules import resumed_lr
from hogwild_dqn.version import __version__, versions
from hogwild_dqn.version import commit as code_commit

# The checkpoint format this code writes and reads. 1: the files of 0.5.0 and before, which have no "format" key
# and load as they are. A change that older code would misread raises it; older code then refuses the file.
FORMAT = 2


def atomic_save(obj, path: Path) -> None:
    """torch.save through files.atomic_write: a kill mid-write, or a write that fails, keeps the old file (a
    failure raises WriteFailed)."""
    atomic_write(path, lambda f: torch.save(obj, f))


def atomic_json(obj, path: Path) -> None:
    """A JSON file of the run (summary.json), written as atomic_save writes a checkpoint."""
    atomic_bytes(json.dumps(obj, indent=2).encode(), path)


def checkpoint_state(model, target, cfg, spec, progress: dict) -> dict:
    """The one checkpoint format (single machine and cluster): copies, never live views, of the networks, and
    what a resume needs. `progress`: frames and best (the best evaluation mean), and where there are such
    things optimizer (its state dict), target_epoch, worker_eps, worker_seed and worker_frames (tensors: each
    worker's frames, their sum the global frames), lr_start (where this session's learning-rate line starts:
    frames, rate). A cluster checkpoint has no optimizer state and no per-worker exploration state or frames."""
    worker_eps, worker_seed = progress.get("worker_eps"), progress.get("worker_seed")
    worker_frames = progress.get("worker_frames")
    return {
        "model": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "target": None if target is None else {k: v.detach().clone() for k, v in target.state_dict().items()},
        "optimizer": progress.get("optimizer"), "target_epoch": progress.get("target_epoch", 0),
        "worker_eps": torch.zeros(0) if worker_eps is None else worker_eps.clone(),
        "worker_seed": torch.zeros(0, dtype=torch.int64) if worker_seed is None else worker_seed.clone(),
        "lr_start": progress.get("lr_start"),
        "worker_frames": torch.zeros(0, dtype=torch.int64) if worker_frames is None else worker_frames.clone(),
        "frames": progress["frames"], "best_eval_return": progress["best"], "game": cfg.game, "algo": cfg.algo,
        "obs_shape": list(spec.obs_shape), "n_actions": spec.n_actions,
        "continuous": spec.continuous, "config": cfg.to_dict(),
        "format": FORMAT, "versions": versions(), "commit": code_commit(),
    }


def snapshot(shared, frames: int, best: float, run) -> dict:
    """The checkpoint of a single-machine run from its shared state: a copy (never a live view) of everything
    needed to continue or to play the agent (the evaluator's periodic ones and the runner's final one).
    `shared`: the run's shared.SharedState; `run`: its rundir.Run."""
    return checkpoint_state(shared.model, shared.target, run.cfg, run.spec, {
        "frames": frames, "best": best, "optimizer": shared.optimizer.state_dict(),
        "target_epoch": int(shared.target_epoch[0]), "worker_eps": shared.worker_eps,
        "worker_seed": shared.worker_seed, "worker_frames": shared.worker_frames[: run.threads],
        "lr_start": run.prior.get("lr_start")})


def load_checkpoint(path: Path, game: str, algo: str) -> dict:
    """Load a checkpoint of this game and algorithm; any problem is a one-line ConfigError naming the file."""
    ckpt = read_checkpoint(path)
    if ckpt.get("game") != game or ckpt.get("algo") != algo:
        raise ConfigError(f"checkpoint {path} is for {ckpt.get('game')}/{ckpt.get('algo')}, not {game}/{algo}")
    return ckpt


def read_checkpoint(path: Path) -> dict:
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
    fmt = ckpt.get("format", 1)
    if not isinstance(fmt, int) or isinstance(fmt, bool) or not 1 <= fmt <= FORMAT:
        saved = ckpt.get("versions")
        made = saved.get("hogwild_dqn", "an unknown version") if isinstance(saved, dict) else "an unknown version"
        raise ConfigError(f"checkpoint {path} has format {fmt!r} (written by hogwild_dqn {made}); this is "
                          f"hogwild_dqn {__version__}, which reads formats 1-{FORMAT}: upgrade it")
    return _checked(ckpt, path)


def _checked(ckpt: dict, path: Path) -> dict:
    """The checkpoint whose values a resume or a player reads are of their kinds: one edited or damaged by hand
    is a one-line ConfigError, not a traceback later (or a run resumed from a negative frame count)."""
    def whole(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)

    lr_start = ckpt.get("lr_start")
    faults = [key for key, fine in (
        ("frames", whole(ckpt["frames"])),
        ("best_eval_return", number(ckpt.get("best_eval_return", 0.0))),
        ("target_epoch", whole(ckpt.get("target_epoch", 0))),
        ("config", isinstance(ckpt.get("config", {}), dict)),
        ("lr_start", lr_start is None or (isinstance(lr_start, (list, tuple)) and len(lr_start) == 2
                                          and whole(lr_start[0]) and number(lr_start[1]))),
        ("worker_frames", ckpt.get("worker_frames") is None or isinstance(ckpt["worker_frames"], torch.Tensor)),
        ("worker_eps", ckpt.get("worker_eps") is None or isinstance(ckpt["worker_eps"], torch.Tensor)),
        ("wall_seconds", "wall_seconds" not in ckpt or (number(ckpt["wall_seconds"]) and ckpt["wall_seconds"] >= 0)),
        ("evals", "evals" not in ckpt or readable_evals(ckpt["evals"])),
    ) if not fine]
    if faults:
        key = faults[0]
        raise ConfigError(f"checkpoint {path} is damaged: its {key} is {ckpt.get(key)!r:.60}; restore it from a copy "
                          "(best.pt is the best evaluation's)")
    return ckpt


def readable_evals(evals) -> bool:
    """Whether a list of evaluations read back (summary.json's, a checkpoint's, a record's) holds what a run's
    history reads of each: its frames and mean return, finite numbers (one edited by hand may not)."""
    return isinstance(evals, list) and all(
        isinstance(e, dict) and is_number(e.get("frames")) and is_number(e.get("mean_return")) for e in evals)


def earlier_summary(path: Path) -> dict:
    """summary.json of a run being resumed; a one-line ConfigError where it is not a summary (the run's earlier
    sessions are in it: better to stop than to guess)."""
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path} cannot be read ({first_line(e)[:100]}); move it aside to resume from the "
                          "checkpoint's own record of the run") from None
    if not isinstance(summary, dict):
        raise ConfigError(f"{path} is not a run's summary (a JSON {type(summary).__name__}); move it aside to "
                          "resume from the checkpoint's own record of the run")
    for key, kind in (("frames", int), ("wall_seconds", (int, float)), ("evals", list),
                      ("final_eval", (dict, type(None)))):
        value = summary.get(key)
        if key in summary and (isinstance(value, bool) or not isinstance(value, kind)
                               or (key == "wall_seconds" and not (math.isfinite(value) and value >= 0))
                               or (key == "evals" and not readable_evals(value))):
            raise ConfigError(f"{path} is not a run's summary (its {key} is {summary[key]!r:.40}); move it aside to "
                              "resume from the checkpoint's own record of the run")
    return summary


def resume_point(run_dir: Path, cfg) -> tuple[dict, dict]:
    """checkpoint.pt of a run to resume, and what its earlier sessions reached: frames, wall time, evaluations,
    best, evaluator device (the evaluations and the wall time from summary.json, or from the checkpoint where
    that is newer), and where this session's learning-rate line starts (lr_start: the rate the old schedule
    had reached, annealed from there to 0 at the new --frames)."""
    run_dir = Path(run_dir)
    ckpt = load_checkpoint(run_dir / "checkpoint.pt", cfg.game, cfg.algo)
    # config.yaml cut short (or emptied) would resume on the defaults of every value it lost: its checkpoint knows
    kept = read_yaml(run_dir / "config.yaml")
    missing = [k for k in ckpt.get("config", {}) if k not in kept]
    if missing:
        raise ConfigError(f"{run_dir / 'config.yaml'} lacks {len(missing)} of the run's values "
                          f"({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}): it was cut or edited; "
                          "restore it (checkpoint.pt's config holds them all) to resume")
    summary_path = run_dir / "summary.json"
    old = earlier_summary(summary_path) if summary_path.is_file() else {}
    # a run stopped during its final evaluation may be resumed with no frames to add: it plays that evaluation
    if int(ckpt["frames"]) >= cfg.frames and not (old and old.get("final_eval") is None):
        raise ConfigError(f"run {run_dir} already has {ckpt['frames']} frames; raise --frames to continue it")
    # a session killed outright (the machine restarted) wrote checkpoints but no summary: the checkpoint's own
    # record of the evaluations and the wall time is then the newer one
    history = ckpt if "evals" in ckpt and int(ckpt["frames"]) > int(old.get("frames", -1)) else old
    return ckpt, {"frames": int(ckpt["frames"]), "wall_seconds": float(history.get("wall_seconds", 0.0)),
                  "evals": list(history.get("evals", [])), "best": float(ckpt.get("best_eval_return", -math.inf)),
                  "device": old.get("evaluator_device"), "lr_start": resumed_lr(ckpt, int(ckpt["frames"]), cfg.lr)}
