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
from hogwild_dqn.evaluation.schedule import confirmation, needs_confirmation, next_point, skipped_line
from hogwild_dqn.evaluation.scores import eval_record
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


class Evaluator:
    """The evaluator process's player, its records and its mark of progress."""

    def __init__(self, run: Run, shared: SharedState, best: float, evals: list, report):
        self.run, self.shared, self.report, cfg = run, shared, report, run.cfg
        self.device, self.policy, self.envs = evaluation_player(cfg, run.spec)
        self.writer = metrics.make_writer(run.run_dir, "evaluator")
        self.recorder = Recorder(run.run_dir, self.writer, best)
        # every evaluation so far goes into checkpoint.pt: a run killed outright writes no summary.json, and its
        # resume takes them from there (checkpoint.resume_point)
        self.history = [eval_record(e) for e in evals]
        self.orphan = runner_alive()  # an orphan stops by itself, between games and within one
        self.beat = Heartbeat(shared, run.threads)  # the evaluator's slot, after the workers'

    def alive(self, activity: int = EVALUATING) -> bool:
        """The games' check of the runner, which marks progress as it asks (every 100 steps)."""
        self.beat(activity)
        return self.orphan()

    def point(self, result: dict, frames: int) -> dict:
        """An evaluation of the weights at `frames`, kept for checkpoint.pt. The runner hears of it only once the
        files it implies are written (best.pt at a new best; checkpoint.pt for a confirmation): it takes a
        restarted evaluator's best, and a held confirmation's checkpoint, from what it heard."""
        point = {"frames": frames, "wall_seconds": round(time.time() - self.run.clock0, 2),
                 "device": self.device.type, **result}
        self.history.append(eval_record(point))
        return point

    def evaluate(self, frames: int, final: bool) -> bool:
        """Play the shared weights at `frames` (the final ones: --final-eval-episodes games), tell the runner, keep
        best.pt, the GIF of a new best and checkpoint.pt; confirm one that reached --stop-return. Return whether
        these were the run's last evaluation."""
        cfg, recorder, beat = self.run.cfg, self.recorder, self.beat
        state = snapshot(self.shared, frames, recorder.best, self.run)
        if not all_finite(state["model"].values()):  # never evaluate, let alone save, broken weights
            raise NonFinite(f"non-finite shared parameters at global frame {frames}")
        self.policy.net.load_state_dict(state["model"])
        games = cfg.final_eval_episodes if final else cfg.eval_episodes
        result = {"final": final, **play_games(self.policy, self.envs, games, self.alive)}
        point = self.point(result, frames)
        new_best = cfg.video_steps and recorder.is_new_best(result)
        beat(WRITING)
        recorder.record(result, frames, lambda best, state=state: {**state, "best_eval_return": best})
        self.report.send(("eval", point))
        if new_best:  # a game of its own, filmed once the evaluation is told
            recorder.keep_gif(best_episode_gif(self.policy, cfg, frames, lambda: self.alive(RECORDING)), frames)
        if needs_confirmation(result, cfg.stop_return):  # the same weights, over as many games as a final one
            games = play_games(self.policy, self.envs, cfg.final_eval_episodes, self.alive)
            result = confirmation(games, cfg.stop_return)
            point = self.point(result, frames)
            beat(WRITING)
            recorder.record(result, frames, lambda best: {})
            final = result["final"]  # held: these weights are the run's last, and their games its score
        if not final or result.get("confirmation"):  # else the runner writes the final checkpoint itself
            beat(WRITING)
            atomic_save({**state, "best_eval_return": recorder.best, "evals": self.history,
                         "wall_seconds": point["wall_seconds"]}, self.run.run_dir / "checkpoint.pt")
        if result.get("confirmation"):
            self.report.send(("eval", point))
        return final

    def close(self) -> None:
        self.writer.close()
        for env in self.envs:
            env.close()
        del self.policy  # release GPU memory before the process exits
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def run_evaluator(run: Run, shared: SharedState, best: float, evals: list, report) -> None:
    """Evaluate every eval_every global frames (--eval-episodes games), and the final weights once more after
    the workers finish (--final-eval-episodes games: the run's score); then exit. A periodic evaluation that
    reaches --stop-return is confirmed by the same weights over --final-eval-episodes games: if it holds, those
    weights are written as checkpoint.pt, their games are the run's final evaluation and the evaluator exits
    (the runner, told by the evaluation, stops the run and keeps that checkpoint)."""
    cfg = run.cfg
    evaluator = Evaluator(run, shared, best, evals, report)
    next_eval = next_point(shared.frames(), cfg.eval_every)
    try:
        while evaluator.alive(WAITING):
            final = shared.is_set(WORKERS_DONE)
            frames = shared.frames()
            # at the run's last frames the final evaluation (once the workers are done) stands for the point
            if not final and (frames < next_eval or frames >= cfg.frames):
                time.sleep(0.2)
                continue
            if evaluator.evaluate(frames, final):
                break
            if late := skipped_line(frames, shared.frames(), cfg.eval_every):
                print(late, file=sys.stderr, flush=True)
            next_eval = next_point(frames, cfg.eval_every)
    except Orphaned:
        pass
    evaluator.close()
