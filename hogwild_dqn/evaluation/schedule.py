"""When a run evaluates and how its evaluations end, written once for one machine (the evaluator process and the
runner's stop: evaluator.py, processes.py) and for Ray (cluster/driver.py): the periodic points and the ones a slow
evaluation skips, the confirmation of an evaluation that reached --stop-return, and the final evaluation, waited
for within --final-eval-seconds, cut by a signal, lost with a hung evaluator. Torch-free."""

from __future__ import annotations

import time
from collections.abc import Callable

from hogwild_dqn.evaluation.scores import is_periodic
from hogwild_dqn.exits import SIGNALLED


def next_point(frames: int, every: int) -> int:
    """The first evaluation point after `frames`: evaluations fall on multiples of --eval-every."""
    return (frames // every + 1) * every


def points_skipped(evaluated: int, now: int, every: int) -> int:
    """Evaluation points that training passed while the evaluation at `evaluated` frames was played; the next
    evaluation takes the newest weights (at `now`) and stands for the last of them."""
    return max(0, now // every - evaluated // every - 1)


def needs_confirmation(result: dict, stop_return: float | None) -> bool:
    """A periodic evaluation (a few games) that reached --stop-return: its weights play a confirmation."""
    return stop_return is not None and is_periodic(result) and result["mean_return"] >= stop_return


def confirmation(games: dict, stop_return: float) -> dict:
    """The confirmation of a periodic evaluation that reached --stop-return: the same weights over
    --final-eval-episodes games (`games`, from play_games). It holds when their mean reaches --stop-return too;
    then it is the run's final evaluation (its score), and the run stops."""
    return {**games, "confirmation": True, "final": games["mean_return"] >= stop_return}


def stop_reason(result: dict, stop_return: float | None) -> str | None:
    """The run's final status when this evaluation is a confirmation that held; None otherwise."""
    if stop_return is None or not result.get("confirmation") or not result.get("final"):
        return None
    return (f"solved: confirmed over {result['episodes']} games, mean {result['mean_return']:g} >= --stop-return "
            f"{stop_return:g}")


def skipped_line(evaluated: int, now: int, every: int) -> str | None:
    """What the evaluator says when training passed evaluation points while it played the one at `evaluated`
    frames (points_skipped); None when it passed none."""
    late = points_skipped(evaluated, now, every)
    if not late:
        return None
    return (f"evaluator: {late} evaluation point(s) skipped: evaluating took longer than --eval-every {every} "
            "frames of training; the next evaluation takes the newest weights")


def await_final(final_eval_seconds: float, note, played: Callable[[float], bool], cut: Callable[[], None],
                hung: Callable[[], str | None], say: Callable[[str], None]) -> str | None:
    """Wait for the final evaluation, the run's score: `played(seconds)` waits up to that long and says whether it
    is over. Past --final-eval-seconds, or once a stop signal is noted (`note.signum`, console.finishing), it is
    cut (`cut()`); with `hung()` saying the evaluator hung (and killing it), it is lost. Each is said once
    (`say`); return that line, or None when it was played."""
    deadline = time.time() + final_eval_seconds
    while not played(0.25):
        if note is not None and note.signum is not None:
            why = f"{SIGNALLED[note.signum][1]}: the final evaluation is cut short; the run is saved without it"
        elif time.time() > deadline:
            why = (f"the final evaluation took over --final-eval-seconds {final_eval_seconds:g}; stopping it: the "
                   "run ends unscored (--resume plays it)")
        elif (what := hung()) is not None:
            why = f"evaluator {what}: the final evaluation is lost; the run ends unscored (--resume plays it)"
        else:
            continue
        cut()
        say(why)
        return why
    return None
