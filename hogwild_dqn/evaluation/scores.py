"""Scoring a run, without torch: which evaluation is the run's score, how its end is said (exit status, the last line,
summary.json), and the records kept of each evaluation. When a run evaluates: schedule.py."""

from __future__ import annotations

import math
import signal
import time

from hogwild_dqn import exits


def eval_record(e: dict) -> dict:
    """An evaluation as summary.json and checkpoint.pt keep it (without its games' scores or device)."""
    return {**{k: e[k] for k in ("frames", "wall_seconds", "mean_return", "std_return", "episodes")},
            "final": bool(e.get("final")), **({"confirmation": True} if e.get("confirmation") else {})}


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


def ending(status: int, reason: str, evals: list[dict], signum: int | None) -> tuple[int, str]:
    """A run's exit status and reason once its final evaluation was played or cut, on one machine or a cluster:
    a signal that cut it after a normal end says so (--resume plays it); a run trained to its end without a
    score is unscored (see scored)."""
    if signum is not None and status == 0 and final_eval(evals) is None:
        status, reason = exits.SIGNALLED[signum][0], cut_reason(signum)
    return scored(status, reason, evals)


def last_line(reason: str, summary: dict, prior: dict, run_dir, machines: int | None = None) -> str:
    """The run's last line, on one machine or a cluster (`machines`): why it ended, its frames, seconds and
    rate, its score and best periodic evaluation, and where it is."""
    where = f" on {machines} machines" if machines else ""
    return (f"{reason}: {done_line(summary, prior['frames'], prior['wall_seconds'])}{where}, "
            f"{result_line(summary)}, run dir {run_dir}")


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


def make_summary(run, reason: str, frames: int, evals: list, trained: int | None = None,
                 silences: dict | None = None) -> dict:
    """summary.json: totals over every session of the run (`evals`: every evaluation, earlier sessions' too).
    `frames`: those of the weights kept (checkpoint.pt); `trained`: the frames trained, where more (a run
    stopped by a confirmation keeps the confirmed weights, and drops what was trained during their games).
    `silences`: each child's longest time without a mark of progress this session, as the runner saw it (how
    near the run came to --hang-seconds)."""
    prior, wall = run.prior, time.time() - run.session_start
    best = best_periodic(prior["best"], evals) if evals else -math.inf
    trained = frames if trained is None else trained
    return {
        "game": run.cfg.game, "algo": run.cfg.algo, "threads": run.threads, "seed": run.cfg.seed, "status": reason,
        "protocol": getattr(run.spec, "protocol", run.cfg.game),  # the env as named with its scores
        "frames": frames, "wall_seconds": round(prior["wall_seconds"] + wall, 2),
        "frames_per_second": round((trained - prior["frames"]) / max(wall, 1e-9), 1),  # this session's
        **({"frames_trained": trained} if trained != frames else {}),
        "confirmed": confirmed(evals),  # frames and wall seconds to the confirmed --stop-return
        "final_eval": final_eval(evals),  # the run's score: the last weights over --final-eval-episodes games
        "best_eval_return": best if math.isfinite(best) else None,  # None: no periodic evaluation yet
        "evaluator_device": next((e["device"] for e in reversed(evals) if "device" in e), prior["device"]),
        "evals": [eval_record(e) for e in evals],
        **({"longest_silence_seconds": silences} if silences else {}),
    }
