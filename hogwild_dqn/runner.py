"""Build the shared state, start and watch the processes, stop them, write the final checkpoint and summary."""

from __future__ import annotations

import json
import math
import os
import queue
import signal
import sys
import time
from datetime import datetime
from pathlib import Path

import torch
import torch.multiprocessing as mp
from tqdm import tqdm

from hogwild_dqn import config, metrics
from hogwild_dqn.checkpoint import atomic_save, load_checkpoint
from hogwild_dqn.config import Config, ConfigError
from hogwild_dqn.envs import env_spec
from hogwild_dqn.evaluator import evaluator_process, snapshot
from hogwild_dqn.networks import build_network
from hogwild_dqn.shared import build_shared
from hogwild_dqn.worker import worker_process

JOIN_SECONDS = 10      # how long stopping workers may take before they are terminated
EVAL_RESTARTS = 3      # a crashed evaluator is restarted this many times; training goes on meanwhile


class Stopped(Exception):
    """Raised in the main process by SIGTERM, like KeyboardInterrupt for SIGINT."""


def _on_sigterm(signum, frame):
    raise Stopped()


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


def run(cfg: Config, resume: str | None = None) -> int:
    """Train; return the process exit status (0 finished, 1 a process failed, 130/143 interrupted)."""
    spec = env_spec(cfg)
    threads = cfg.resolved_threads()
    run_dir = prepare_run_dir(cfg, threads, resume)
    if threads > (os.cpu_count() or 1):
        print(f"warning: {threads} workers on {os.cpu_count()} cores oversubscribe the CPU; "
              "each worker will run slower", file=sys.stderr)
    actor_critic = cfg.algo == "a3c"
    torch.manual_seed(cfg.seed)
    net = lambda: build_network(spec.obs_shape, spec.n_actions, actor_critic, cfg.hidden, cfg.mlp_layers)  # noqa: E731
    ctx = mp.get_context("spawn")
    shared = build_shared(ctx, net(), None if actor_critic else net(), cfg.optimizer, rms_alpha=cfg.rms_alpha,
                          rms_eps=cfg.rms_eps, adam_betas=cfg.adam_betas, adam_eps=cfg.adam_eps)
    prior = {"frames": 0, "wall_seconds": 0.0, "evals": [], "best": -math.inf}
    if resume is not None:
        prior = restore(shared, run_dir, cfg)
        if prior["frames"] >= cfg.frames:
            raise ConfigError(f"run {run_dir} already has {prior['frames']} frames; raise --frames to continue it")
    config.save(cfg, run_dir / "config.yaml")

    start = time.time()
    procs = Processes(ctx, cfg, spec, shared, run_dir, threads, start - prior["wall_seconds"])
    procs.evals = list(prior["evals"])
    procs.start(prior["best"])
    writer = metrics.make_writer(run_dir, "runner")
    status, reason = watch(procs, cfg, shared, writer, prior["frames"], f"{cfg.game} {cfg.algo} x{threads}")
    procs.stop(wait_for_eval=status == 0)

    frames, wall, evals = shared.frames.value, time.time() - start, procs.evals
    best = max([prior["best"]] + [e["mean_return"] for e in evals])
    atomic_save(snapshot(shared, frames, best, cfg, spec), run_dir / "checkpoint.pt")
    summary = {
        "game": cfg.game, "algo": cfg.algo, "threads": threads, "seed": cfg.seed, "status": reason,
        "frames": frames, "wall_seconds": round(prior["wall_seconds"] + wall, 2),
        "frames_per_second": round((frames - prior["frames"]) / max(wall, 1e-9), 1),
        "best_eval_return": best if evals else None,
        "evaluator_device": evals[-1]["device"] if evals else None,
        "evals": [{k: e[k] for k in ("frames", "wall_seconds", "mean_return", "std_return", "episodes")}
                  for e in evals],
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    metrics.write_hparams(writer, {"game": cfg.game, "algo": cfg.algo, "threads": threads, "seed": cfg.seed,
                                   "lr": cfg.lr, "optimizer": cfg.optimizer, "frames": cfg.frames},
                          {"hparam/best_eval_return": best if evals else float("nan"),
                           "hparam/final_eval_return": evals[-1]["mean_return"] if evals else float("nan"),
                           "hparam/frames_per_second": summary["frames_per_second"]})
    writer.close()
    print(f"{reason}: {frames} frames in {wall:.0f}s ({summary['frames_per_second']:.0f} frames/s), "
          f"best eval {summary['best_eval_return']}, run dir {run_dir}")
    return status


class Processes:
    """The worker processes and the evaluator of one run, with the queues they report through."""

    def __init__(self, ctx, cfg: Config, spec, shared, run_dir: Path, threads: int, t0: float):
        self.ctx, self.cfg, self.spec, self.shared, self.run_dir, self.t0 = ctx, cfg, spec, shared, run_dir, t0
        self.results, self.errors = ctx.Queue(), ctx.Queue()
        self.workers = [ctx.Process(target=worker_process, name=f"worker{r}", daemon=True,
                                    args=(r, cfg, spec, shared, str(run_dir), self.errors)) for r in range(threads)]
        self.evaluator, self.evals, self.eval_restarts, self.best0 = None, [], 0, -math.inf

    def start(self, best: float) -> None:
        """Start every worker and the evaluator; `best` is the best evaluation of earlier sessions."""
        self.best0 = best
        for w in self.workers:
            w.start()
        self.start_evaluator(best)

    def start_evaluator(self, best: float) -> None:
        self.evaluator = self.ctx.Process(target=evaluator_process, name="evaluator", daemon=True, args=(
            self.cfg, self.spec, self.shared, str(self.run_dir), self.results, self.errors, best, self.t0))
        self.evaluator.start()

    def check(self) -> str | None:
        """Collect evaluations; restart a dead evaluator; return why the run must stop, or None."""
        self.drain()
        failed = [w for w in self.workers if w.exitcode not in (None, 0)]
        if failed:
            return f"{failed[0].name} died ({_why(failed[0], self.errors)})"
        if self.evaluator.exitcode not in (None, 0):
            why = _why(self.evaluator, self.errors)
            if self.eval_restarts >= EVAL_RESTARTS:
                return f"evaluator died {self.eval_restarts + 1} times ({why})"
            tqdm.write(f"evaluator died ({why}); restarting it", file=sys.stderr)
            self.eval_restarts += 1
            self.start_evaluator(max([self.best0] + [e["mean_return"] for e in self.evals]))
        return None

    def finished(self) -> bool:
        return all(w.exitcode == 0 for w in self.workers)

    def drain(self) -> None:
        while True:
            try:
                self.evals.append(self.results.get_nowait())
            except queue.Empty:
                return

    def stop(self, wait_for_eval: bool) -> None:
        """Stop every child without ever waiting forever: ask, wait a bounded time, then terminate."""
        self.shared.stop.set()
        deadline = time.time() + JOIN_SECONDS
        for w in self.workers:
            w.join(timeout=max(0.0, deadline - time.time()))
        for w in self.workers:
            if w.is_alive():
                w.terminate()
                w.join(timeout=2)
        self.shared.workers_done.set()  # the evaluator plays its last evaluation on the final weights
        while self.evaluator.is_alive():
            self.drain()
            if not wait_for_eval:
                self.evaluator.terminate()
            self.evaluator.join(timeout=0.25)
        self.drain()


def watch(procs: Processes, cfg: Config, shared, writer, frames0: int, desc: str) -> tuple[int, str]:
    """Show progress and log frames/s until the workers finish, a process fails, or a signal arrives."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    bar = tqdm(total=cfg.frames, initial=frames0, unit="frame", unit_scale=True, dynamic_ncols=True, desc=desc,
               disable=not cfg.progress, mininterval=0.5 if sys.stderr.isatty() else 30)  # logs: every 30 s
    last_log, last_frames = time.time(), frames0
    try:
        while not procs.finished():
            failure = procs.check()
            if failure:
                return 1, failure
            frames = shared.frames.value
            bar.update(min(frames, cfg.frames) - bar.n)
            if procs.evals:
                bar.set_postfix_str(f"eval {procs.evals[-1]['mean_return']:.1f}", refresh=False)
            now = time.time()
            if now - last_log >= 5:
                writer.add_scalar(metrics.FPS, (frames - last_frames) / (now - last_log), frames)
                last_log, last_frames = now, frames
            time.sleep(0.25)
        return 0, "finished"
    except KeyboardInterrupt:
        return 130, "interrupted (SIGINT)"
    except Stopped:
        return 143, "terminated (SIGTERM)"
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        bar.close()


def restore(shared, run_dir: Path, cfg: Config) -> dict:
    """Load checkpoint.pt (and the previous summary's evals) into the freshly built shared state."""
    ckpt = load_checkpoint(run_dir / "checkpoint.pt", cfg.game, cfg.algo)
    try:
        shared.model.load_state_dict(ckpt["model"])
        if shared.target is not None:
            shared.target.load_state_dict(ckpt["target"])
        shared.optimizer.load_state_dict(ckpt["optimizer"])
    except (RuntimeError, KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"checkpoint {run_dir / 'checkpoint.pt'} does not fit this network/optimizer "
                          f"({str(e).splitlines()[0][:120]})") from None
    shared.frames.value = int(ckpt["frames"])
    shared.target_epoch.value = int(ckpt.get("target_epoch", 0))
    summary_path = run_dir / "summary.json"
    old = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    return {"frames": int(ckpt["frames"]), "wall_seconds": float(old.get("wall_seconds", 0.0)),
            "evals": old.get("evals", []), "best": float(ckpt.get("best_eval_return", -math.inf))}


def _why(proc, errors) -> str:
    """The last line of a dead process's traceback if it sent one, else its exit code or signal."""
    try:
        while True:
            name, tb = errors.get(timeout=0.5)
            if name == proc.name:
                return tb.strip().splitlines()[-1]
    except queue.Empty:
        pass
    code = proc.exitcode
    return f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
