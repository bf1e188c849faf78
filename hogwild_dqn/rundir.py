"""The run: its directory (name, the checks before a run writes into it), what its processes know of it (Run),
and summary.json's contents."""

from __future__ import annotations

import math
import signal
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from hogwild_dqn import exits
from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.config import Config, ConfigError


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


def eval_record(e: dict) -> dict:
    """An evaluation as summary.json and checkpoint.pt keep it (without its games' scores or device)."""
    return {**{k: e[k] for k in ("frames", "wall_seconds", "mean_return", "std_return", "episodes")},
            "final": bool(e.get("final")), **({"confirmation": True} if e.get("confirmation") else {})}


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


def final_eval(evals: list[dict]) -> dict | None:
    """The run's score: the final evaluation (the last weights over --final-eval-episodes games) that ended this
    session, if it has one (an earlier session's, read back from summary.json on a resume, is a curve point)."""
    last = evals[-1] if evals else {}
    if not last.get("final") or "returns" not in last:
        return None
    return {k: last[k] for k in ("frames", "mean_return", "std_return", "episodes", "returns")}




def scored(status: int, reason: str, evals: list[dict]) -> tuple[int, str]:
    """A run that trained to its end (status 0) but whose final evaluation, its score, was cut (its time cap, a
    dead evaluator) is "unscored", exit 4, never done: `make benchmark` resumes it to play the evaluation."""
    if status != 0 or final_eval(evals) is not None:
        return status, reason
    return exits.UNSCORED, f"unscored: {reason}, but the final evaluation was cut; --resume plays it"


def cut_reason(signum: int) -> str:
    """The final status of a run whose final evaluation a signal cut (its exit status is the signal's)."""
    return f"unscored: interrupted ({signal.Signals(signum).name}) during the final evaluation; --resume plays it"


def final_line(final: dict | None) -> str:
    """The run's score as the last line of a run says it."""
    if final is None:
        return "no final evaluation"
    return f"final eval {final['mean_return']:g} ± {final['std_return']:.1f} over {final['episodes']} games"


def result_line(summary: dict) -> str:
    """The final evaluation and the best periodic one, as the last line of a run says them."""
    best = summary["best_eval_return"]
    return f"{final_line(summary['final_eval'])}, best periodic eval {'none' if best is None else format(best, 'g')}"


def done_line(summary: dict, prior_frames: int, prior_seconds: float) -> str:
    """The frames and seconds of a run as its last line says them, with its rate: the rate is this session's
    (summary.json's frames_per_second), so a resumed run's line says which frames and seconds were this session's,
    not the run's total beside them (which read as a rate several times too high)."""
    seconds, rate = summary["wall_seconds"] - prior_seconds, f"({summary['frames_per_second']:.0f} frames/s)"
    if not prior_frames:
        return f"{summary['frames']} frames in {seconds:.0f}s {rate}"
    trained = summary.get("frames_trained", summary["frames"])
    return f"{summary['frames']} frames, {trained - prior_frames} trained in this session's {seconds:.0f}s {rate}"


def is_periodic(e: dict) -> bool:
    """A periodic evaluation (--eval-episodes games, a curve point): neither a final evaluation nor the
    confirmation of a --stop-return."""
    return not e.get("final") and not e.get("confirmation")


def best_periodic(best: float, evals: list[dict]) -> float:
    """The best periodic evaluation (--eval-episodes games each; best.pt holds its weights): a point of the
    curve, not the run's score. `best`: earlier sessions' best."""
    return max([best] + [e["mean_return"] for e in evals if is_periodic(e)])


def confirmed(evals: list[dict]) -> dict | None:
    """Where the run's score was confirmed (--stop-return) in this session: the frames of the weights and the
    wall seconds when their confirmation games ended; None if none held (an earlier session's, read back from
    summary.json without its games' scores, is a curve point, as in final_eval)."""
    last = evals[-1] if evals else {}
    if not (last.get("confirmation") and last.get("final") and "returns" in last):
        return None
    return {k: last[k] for k in ("frames", "wall_seconds", "mean_return", "episodes")}


def make_summary(run: Run, reason: str, frames: int, evals: list, trained: int | None = None) -> dict:
    """summary.json: totals over every session of the run (`evals`: every evaluation, earlier sessions' too).
    `frames`: those of the weights kept (checkpoint.pt); `trained`: the frames trained, where more (a run
    stopped by a confirmation keeps the confirmed weights, and drops what was trained during their games)."""
    prior, wall = run.prior, time.time() - run.session_start
    best = best_periodic(prior["best"], evals) if evals else -math.inf
    trained = frames if trained is None else trained
    return {
        "game": run.cfg.game, "algo": run.cfg.algo, "threads": run.threads, "seed": run.cfg.seed, "status": reason,
        "protocol": getattr(run.spec, "protocol", run.cfg.game),  # the env as named with its scores
        **({"update_precision": run.cfg.update_precision()} if ALGORITHMS[run.cfg.algo].minibatches else {}),
        "frames": frames, "wall_seconds": round(prior["wall_seconds"] + wall, 2),
        "frames_per_second": round((trained - prior["frames"]) / max(wall, 1e-9), 1),  # this session's
        **({"frames_trained": trained} if trained != frames else {}),
        "confirmed": confirmed(evals),  # frames and wall seconds to the confirmed --stop-return
        "final_eval": final_eval(evals),  # the run's score: the last weights over --final-eval-episodes games
        "best_eval_return": best if math.isfinite(best) else None,  # None: no periodic evaluation yet
        "evaluator_device": next((e["device"] for e in reversed(evals) if "device" in e), prior["device"]),
        "evals": [eval_record(e) for e in evals],
    }
