"""The evaluator process of a single-machine run: every --eval-every global frames it snapshots the shared
weights, plays them (games.py; on CUDA if present), reports the result to the runner and keeps best.pt
and checkpoint.pt. Workers never wait for it."""

from __future__ import annotations

import sys
import time

import torch

from hogwild_dqn import metrics
from hogwild_dqn.checkpoint import atomic_save, snapshot
from hogwild_dqn.evaluation.games import Orphaned, Recorder, best_episode_gif, evaluation_player, play_games
from hogwild_dqn.evaluation.scores import confirmation, eval_record, needs_confirmation, next_point, points_skipped
from hogwild_dqn.faults import NonFinite, runner_alive
from hogwild_dqn.rundir import Run
from hogwild_dqn.shared import (
    EVALUATING,
    RECORDING,
    WAITING,
    WORKERS_DONE,
    WRITING,
    Heartbeat,
    SharedState,
    all_finite,
)


def _point(run: Run, result: dict, frames: int, device, history: list) -> dict:
    """An evaluation of the weights at `frames`, kept for checkpoint.pt. The runner hears of it only once the
    files it implies are written (best.pt at a new best; checkpoint.pt for a confirmation): it takes a restarted
    evaluator's best, and a held confirmation's checkpoint, from what it heard."""
    point = {"frames": frames, "wall_seconds": round(time.time() - run.clock0, 2), "device": device.type, **result}
    history.append(eval_record(point))
    return point


def run_evaluator(run: Run, shared: SharedState, best: float, evals: list, report) -> None:
    """Evaluate every eval_every global frames (--eval-episodes games), and the final weights once more after
    the workers finish (--final-eval-episodes games: the run's score); then exit. A periodic evaluation that
    reaches --stop-return is confirmed by the same weights over --final-eval-episodes games: if it holds, those
    weights are written as checkpoint.pt, their games are the run's final evaluation and the evaluator exits
    (the runner, told by the evaluation, stops the run and keeps that checkpoint)."""
    cfg = run.cfg
    device, policy, envs = evaluation_player(cfg, run.spec)
    writer = metrics.make_writer(run.run_dir, "evaluator")
    recorder = Recorder(run.run_dir, writer, best)
    next_eval = next_point(shared.frames(), cfg.eval_every)
    # every evaluation so far goes into checkpoint.pt: a run killed outright writes no summary.json, and its
    # resume takes them from there (checkpoint.resume_point)
    history = [eval_record(e) for e in evals]
    orphan = runner_alive()  # an orphan stops by itself, between games and within one
    beat = Heartbeat(shared, run.threads)  # the evaluator's slot, after the workers'

    def alive(activity: int = EVALUATING):
        """The games' check of the runner, which marks progress as it asks (every 100 steps)."""
        beat(activity)
        return orphan()

    try:
        while alive(WAITING):
            final = shared.is_set(WORKERS_DONE)
            frames = shared.frames()
            # at the run's last frames the final evaluation (below, once the workers are done) stands for the point
            if not final and (frames < next_eval or frames >= cfg.frames):
                time.sleep(0.2)
                continue
            state = snapshot(shared, frames, recorder.best, run)
            if not all_finite(state["model"].values()):  # never evaluate, let alone save, broken weights
                raise NonFinite(f"non-finite shared parameters at global frame {frames}")
            policy.net.load_state_dict(state["model"])
            games = cfg.final_eval_episodes if final else cfg.eval_episodes
            result = {"final": final, **play_games(policy, envs, games, alive)}
            point = _point(run, result, frames, device, history)
            new_best = cfg.video_steps and recorder.is_new_best(result)
            beat(WRITING)
            recorder.record(result, frames, lambda best, state=state: {**state, "best_eval_return": best})
            report.send(("eval", point))
            if new_best:  # a game of its own, filmed once the evaluation is told
                recorder.keep_gif(best_episode_gif(policy, cfg, frames, lambda: alive(RECORDING)), frames)
            if needs_confirmation(result, cfg.stop_return):  # the same weights, over as many games as a final one
                result = confirmation(play_games(policy, envs, cfg.final_eval_episodes, alive), cfg.stop_return)
                point = _point(run, result, frames, device, history)
                beat(WRITING)
                recorder.record(result, frames, lambda best: {})
                final = result["final"]  # held: these weights are the run's last, and their games its score
            if not final or result.get("confirmation"):  # else the runner writes the final checkpoint itself
                beat(WRITING)
                atomic_save({**state, "best_eval_return": recorder.best, "evals": history,
                             "wall_seconds": point["wall_seconds"]}, run.run_dir / "checkpoint.pt")
            if result.get("confirmation"):
                report.send(("eval", point))
            late = points_skipped(frames, shared.frames(), cfg.eval_every)
            if late and not final:
                print(f"evaluator: {late} evaluation point(s) skipped: evaluating took longer than --eval-every "
                      f"{cfg.eval_every} frames of training; the next evaluation takes the newest weights",
                      file=sys.stderr, flush=True)
            next_eval = next_point(frames, cfg.eval_every)
            if final:
                break
    except Orphaned:
        pass
    writer.close()
    for env in envs:
        env.close()
    del policy  # release GPU memory before the process exits
    if device.type == "cuda":
        torch.cuda.empty_cache()
