"""A run on one machine: build the shared state (or restore it), start and watch the processes, stop them,
write the final checkpoint and summary."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import torch
import torch.multiprocessing as mp

from hogwild_dqn import config, metrics, preflight
from hogwild_dqn.checkpoint import atomic_json, resume_point, snapshot
from hogwild_dqn.config import Config, ConfigError, first_line
from hogwild_dqn.console import Abandoned, finishing, unsaved
from hogwild_dqn.envs import env_spec
from hogwild_dqn.evaluation.scores import confirmed, ending, last_line, make_summary
from hogwild_dqn.exits import FAILED, STOPPED
from hogwild_dqn.files import WriteFailed
from hogwild_dqn.processes import Processes, stop_resource_tracker, watch
from hogwild_dqn.rundir import Run, no_prior, prepare_run_dir
from hogwild_dqn.shared import all_finite, new_shared_state


def run(cfg: Config, resume: str | None = None) -> int:
    """Train; return the process exit status (exits.py: finished or solved, a process failed, unscored: its final
    evaluation was cut, stopped by a signal). A second stop signal while the run saves itself kills its
    processes and raises Abandoned, naming what was not written."""
    spec = env_spec(cfg)
    threads = cfg.resolved_threads()
    if unlearnable := preflight.never_warm(cfg, spec, threads):
        raise ConfigError(unlearnable)
    too_big = preflight.check(cfg, spec, threads, psutil.virtual_memory().available)
    if too_big and not cfg.force:  # before anything is written or started
        raise ConfigError(too_big)
    run_dir = prepare_run_dir(cfg, threads, resume)
    if threads > (os.cpu_count() or 1):
        print(f"warning: {threads} workers on {os.cpu_count()} cores oversubscribe the CPU; "
              "each worker will run slower", file=sys.stderr)
    torch.manual_seed(cfg.seed)
    ctx = mp.get_context("spawn")
    shared = new_shared_state(cfg, spec, threads)
    prior = restore(shared, run_dir, cfg) if resume is not None else no_prior()
    config.save(cfg, run_dir / "config.yaml")

    procs = Processes(ctx, Run(cfg, spec, run_dir, threads, prior), shared)
    writer = metrics.make_writer(run_dir, "runner")
    saved: list[str] = []
    try:
        status, reason = watch(procs, writer)  # starts the processes
        with finishing(signalled=status in STOPPED) as note:  # a signal cuts the final evaluation, never the saving
            status = _finish(procs, writer, status, reason, note, saved)
    except Abandoned as e:  # asked twice: no more waiting, for children or files
        procs.kill()
        _close(writer)
        stop_resource_tracker()
        raise Abandoned(e.args[0], unsaved(run_dir, saved)) from None
    stop_resource_tracker()
    return status


def _finish(procs: Processes, writer, status: int, reason: str, note, saved: list[str]) -> int:
    """Stop the processes (bounded), write the final checkpoint and the summary (`saved` names each once written),
    print the run's last line; return the exit status."""
    run, shared = procs.run, procs.shared
    run_dir = run.run_dir
    procs.stop(wait_for_eval=status == 0, note=note)
    status, reason = ending(status, reason, procs.evals, note.signum)
    trained, evals, best = shared.frames(), procs.evals, procs.best()
    kept = confirmed(evals)  # the evaluator wrote the confirmed weights as checkpoint.pt: they are the run's
    frames = kept["frames"] if kept else trained
    broken = procs.nonfinite or not all_finite(shared.model.parameters())
    if broken:  # keep the last good checkpoint rather than overwrite it with weights that met NaN/Inf
        status, reason = FAILED, reason if procs.nonfinite else "non-finite shared parameters at the end of the run"
        kept = "left as it was" if (run_dir / "checkpoint.pt").exists() else "not written"
        print(f"{run_dir / 'checkpoint.pt'} {kept}: the run met NaN/Inf", file=sys.stderr)
    summary = make_summary(run, reason, frames, evals, trained, procs.silences)
    try:  # a full disk: one line, and the files as they were (atomic writes)
        if not kept and not broken:
            procs.write_checkpoint(snapshot(shared, frames, best, run))
        saved.append("the final checkpoint")
        atomic_json(summary, run_dir / "summary.json")
        saved.append("summary.json")
    except WriteFailed as e:
        if status == FAILED:  # what stopped the run comes first (a child's full disk, say)
            print(f"train.py: error: {reason}", file=sys.stderr)
        print(f"train.py: error: {e}", file=sys.stderr)
        _close(writer)
        return FAILED
    try:
        final = summary["final_eval"]
        writer.add_scalar(metrics.FPS, summary["frames_per_second"], frames)
        cfg = run.cfg
        metrics.write_hparams(writer, {"game": cfg.game, "algo": cfg.algo, "threads": run.threads, "seed": cfg.seed,
                                       "lr": cfg.lr, "optimizer": cfg.optimizer, "frames": cfg.frames},
                              {"hparam/best_eval_return": best if evals else float("nan"),
                               "hparam/final_eval_return": final["mean_return"] if final else float("nan"),
                               "hparam/frames_per_second": summary["frames_per_second"]})
        writer.close()
    except WriteFailed as e:  # the checkpoint and summary are written: the run is whole, its last scalars not
        print(f"train.py: error: {e}", file=sys.stderr)
        _close(writer)
        status = status or FAILED
    print(last_line(reason, summary, run.prior, run_dir))
    return status


def _close(writer) -> None:
    """Close the runner's event file after another failure was reported: a second one would say nothing new."""
    try:
        writer.close()
    except WriteFailed:
        pass


def restore(shared, run_dir: Path, cfg: Config) -> dict:
    """Load checkpoint.pt into the freshly built shared state; return what the earlier sessions reached."""
    ckpt, prior = resume_point(run_dir, cfg)
    try:
        shared.model.load_state_dict(ckpt["model"])
        if shared.target is not None:
            shared.target.load_state_dict(ckpt["target"])
        if ckpt["optimizer"] is not None:  # a cluster run's checkpoint has none: statistics stay per machine
            shared.optimizer.load_state_dict(ckpt["optimizer"])
    except (RuntimeError, KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"checkpoint {run_dir / 'checkpoint.pt'} does not fit this network/optimizer "
                          f"({first_line(e)[:120]})") from None
    saved_frames = ckpt.get("worker_frames")
    if saved_frames is not None and saved_frames.shape == shared.worker_frames.shape \
            and int(saved_frames.sum()) == int(ckpt["frames"]):  # the same workers: each goes on from its count
        shared.worker_frames.copy_(saved_frames)
    else:  # another number of workers, or confirmed weights from before the last frames: the sum is what counts
        shared.worker_frames[0] = int(ckpt["frames"])
    shared.target_epoch[0] = int(ckpt.get("target_epoch", 0))
    saved_eps = ckpt.get("worker_eps")
    if saved_eps is not None and saved_eps.shape == shared.worker_eps.shape:  # same workers x games: same
        shared.worker_eps.copy_(saved_eps)                                    # exploration
    return prior
