"""Start, watch, restart and stop the child processes of one run. Every wait here has a time limit."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from tqdm import tqdm

from hogwild_dqn import metrics
from hogwild_dqn.config import Config
from hogwild_dqn.evaluator import evaluator_process
from hogwild_dqn.shared import NONFINITE_EXIT, STOP, WORKERS_DONE
from hogwild_dqn.worker import worker_process

JOIN_SECONDS = 8       # stopping workers may take this long before they are terminated (exit within 10 s)
EVAL_RESTARTS = 3      # a crashed evaluator is restarted this many times; training goes on meanwhile
SEED_STRIDE = 1000     # a restarted worker gets seed + rank + SEED_STRIDE * (its restart number)
FINAL_EVAL_SECONDS = 900  # the last evaluation may take this long (whole games) before it is stopped


class Stopped(Exception):
    """Raised in the main process by SIGTERM, like KeyboardInterrupt for SIGINT."""


def on_sigterm(signum, frame):
    raise Stopped()


def handle_stop_signals() -> None:
    """SIGTERM raises Stopped; SIGINT raises KeyboardInterrupt even if the process started with SIGINT ignored
    (as a background job of a script does), so Ctrl-C and `kill -INT` always stop a run cleanly."""
    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)


class Child:
    """A child process and the read end of the pipe it reports through (errors, and evaluations).

    One pipe per process, with the parent's copy of the write end closed: a child killed mid-message leaves
    at most a broken pipe behind, never a lock that other processes wait on.
    """

    def __init__(self, ctx, name: str, target, args: tuple):
        self.conn, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=target, name=name, daemon=True, args=(*args, send))
        self.proc.start()
        send.close()
        self.name, self.errors = name, []

    def poll(self) -> list[dict]:
        """Read every message waiting in the pipe: keep the errors, return the evaluations."""
        evals = []
        try:
            while self.conn.poll():
                kind, payload = self.conn.recv()
                (evals if kind == "eval" else self.errors).append(payload)
        except (EOFError, OSError):  # the child is gone; what it sent before was read
            pass
        return evals


class Processes:
    """The worker processes and the evaluator of one run (a machine of a cluster run has no evaluator)."""

    def __init__(self, ctx, cfg: Config, spec, shared, run_dir: Path, threads: int, t0: float, best: float,
                 evals: list, with_evaluator: bool = True):
        """`best` and `evals`: what earlier sessions of a resumed run reached; new evaluations are appended."""
        self.ctx, self.cfg, self.spec, self.shared, self.run_dir, self.t0 = ctx, cfg, spec, shared, run_dir, t0
        self.threads, self.best0, self.evals, self.with_evaluator = threads, best, list(evals), with_evaluator
        self.restarts, self.eval_restarts, self.nonfinite = 0, 0, False
        self.workers: list[Child] = []
        self.evaluator: Child | None = None

    def _worker(self, rank: int, seed: int) -> Child:
        return Child(self.ctx, f"worker{rank}", worker_process,
                     (rank, seed, self.cfg, self.spec, self.shared, str(self.run_dir)))

    def _evaluator(self) -> Child:
        return Child(self.ctx, "evaluator", evaluator_process,
                     (self.cfg, self.spec, self.shared, str(self.run_dir), self.best(), self.t0))

    def start(self) -> None:
        self.workers = [self._worker(r, self.cfg.seed + r) for r in range(self.threads)]
        self.evaluator = self._evaluator() if self.with_evaluator else None

    def check(self) -> str | None:
        """Collect evaluations; restart dead processes within their budgets; return why the run must stop."""
        self.drain()
        for rank, w in enumerate(self.workers):
            if w.proc.exitcode in (None, 0):
                continue
            why = self.why(w)
            if w.proc.exitcode == NONFINITE_EXIT:
                self.nonfinite = True
                return why
            if self.restarts >= self.cfg.max_restarts:
                return f"{w.name} died ({why}) and the {self.cfg.max_restarts} restarts allowed are used up"
            self.restarts += 1
            w.conn.close()
            seed = self.cfg.seed + rank + SEED_STRIDE * self.restarts
            tqdm.write(f"{w.name} died ({why}); restart {self.restarts} of {self.cfg.max_restarts}, seed {seed}",
                       file=sys.stderr)
            self.workers[rank] = self._worker(rank, seed)
        if self.evaluator is not None and self.evaluator.proc.exitcode not in (None, 0):
            why = self.why(self.evaluator)
            if self.evaluator.proc.exitcode == NONFINITE_EXIT:
                self.nonfinite = True
                return why
            if self.eval_restarts >= EVAL_RESTARTS:
                return f"evaluator died {self.eval_restarts + 1} times (last: {why})"
            tqdm.write(f"evaluator died ({why}); restarting it, training goes on", file=sys.stderr)
            self.eval_restarts += 1
            self.evaluator.conn.close()
            self.evaluator = self._evaluator()
        return None

    def best(self) -> float:
        return max([self.best0] + [e["mean_return"] for e in self.evals])

    def finished(self) -> bool:
        return all(w.proc.exitcode == 0 for w in self.workers)

    def drain(self) -> None:
        if self.evaluator is not None:
            self.evals += self.evaluator.poll()

    def why(self, child: Child) -> str:
        """One line on why a child died; its whole traceback, if it sent one, goes to stderr and errors.log."""
        evals = child.poll()
        if child is self.evaluator:
            self.evals += evals
        if not child.errors:
            code = child.proc.exitcode
            return f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        text = child.errors[-1]
        if "Traceback" in text:
            tqdm.write(f"--- {child.name} ---\n{text.rstrip()}", file=sys.stderr)
            with open(self.run_dir / "errors.log", "a") as f:
                f.write(f"--- {child.name} at {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n{text}\n")
        return text.strip().splitlines()[-1]

    def stop(self, wait_for_eval: bool) -> None:
        """Ask every child to stop, wait a bounded time, then terminate what is left.

        Without `wait_for_eval` (a failure or a signal) the evaluator is stopped first, so that it can neither
        delay the exit nor play and save weights that may be broken.
        """
        if not wait_for_eval and self.evaluator is not None:
            self.evaluator.proc.terminate()
        self.shared.set(STOP)
        deadline = time.time() + JOIN_SECONDS
        for w in self.workers:
            w.proc.join(timeout=max(0.0, deadline - time.time()))
        for w in self.workers:
            if w.proc.is_alive():
                w.proc.terminate()
                w.proc.join(timeout=2)
        self.shared.set(WORKERS_DONE)  # the evaluator plays its last evaluation on the final weights
        deadline = time.time() + FINAL_EVAL_SECONDS
        while self.evaluator is not None and self.evaluator.proc.is_alive():
            self.drain()
            if time.time() > deadline:
                tqdm.write(f"the last evaluation took over {FINAL_EVAL_SECONDS} s; stopping it", file=sys.stderr)
                self.evaluator.proc.terminate()
            self.evaluator.proc.join(timeout=0.25)
        self.drain()


def watch(procs: Processes, cfg: Config, shared, writer, frames0: int, desc: str) -> tuple[int, str]:
    """Show progress and log frames/s until the workers finish, an evaluation of this session reaches
    --stop-return, a process fails, or a signal arrives."""
    handle_stop_signals()
    bar = tqdm(total=cfg.frames, initial=frames0, unit="frame", unit_scale=True, dynamic_ncols=True, desc=desc,
               disable=not cfg.progress, mininterval=0.5 if sys.stderr.isatty() else 30)  # logs: every 30 s
    last_log, last_frames, evals0 = time.time(), frames0, len(procs.evals)
    try:
        while not procs.finished():
            failure = procs.check()
            if failure:
                return 1, failure
            solved = [e for e in procs.evals[evals0:] if cfg.stop_return is not None
                      and e["mean_return"] >= cfg.stop_return]
            if solved:
                return 0, f"solved: eval mean {solved[0]['mean_return']:g} >= --stop-return {cfg.stop_return:g}"
            frames = shared.frames()
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
        procs.drain()

