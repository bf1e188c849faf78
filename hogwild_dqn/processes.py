"""Start, watch, restart and stop the child processes of one run, and the children's entry points. Every wait
here has a time limit."""

from __future__ import annotations

import signal
import time
import traceback

import torch

from hogwild_dqn import metrics
from hogwild_dqn.checkpoint import atomic_save
from hogwild_dqn.console import Console, Stopped, finishing, say
from hogwild_dqn.evaluation.evaluator import run_evaluator
from hogwild_dqn.evaluation.schedule import await_final, stop_reason
from hogwild_dqn.evaluation.scores import best_periodic
from hogwild_dqn.exits import FAILED, FINISHED, NONFINITE, WRITE_FAILED
from hogwild_dqn.faults import NonFinite
from hogwild_dqn.files import WriteFailed, write_failed
from hogwild_dqn.rundir import Run
from hogwild_dqn.shared import ACTIVITIES, EVALUATING, STOP, WORKERS_DONE, SharedState, mark_start, silence
from hogwild_dqn.workers import run_worker

JOIN_SECONDS = 8       # stopping workers may take this long before they are terminated (exit within 10 s)
TERM_SECONDS = 2       # a terminated child may take this long to exit before it is killed
EVAL_RESTARTS = 3      # a crashed or hung evaluator is restarted this many times; training goes on meanwhile
FATAL = (NONFINITE, WRITE_FAILED)  # a child's exit that a restart would meet again: the run stops
PAUSED_SECONDS = 2     # a gap this long between two of the runner's checks: the runner itself was paused


def run_child(name: str, report, fn, *args) -> None:
    """Body of every child process: one torch thread, Ctrl-C left to the runner, failures sent up `report`."""
    torch.set_num_threads(1)  # N processes on N cores: more threads each would only fight over them
    # Dead units get zero gradients; their optimizer statistics decay into denormal floats, which x86 computes
    # far slower (docs/speed.md).
    torch.set_flush_denormal(True)
    # the runner handles Ctrl-C and a closed terminal (both reach the whole process group) and asks them to stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        fn(*args)
    except NonFinite as e:
        report.send(("error", f"{name}: {e}"))
        raise SystemExit(NONFINITE) from None
    except WriteFailed as e:
        report.send(("error", f"{name}: {e}"))
        raise SystemExit(WRITE_FAILED) from None
    except BaseException:
        report.send(("error", _bounded(traceback.format_exc())))
        raise SystemExit(FAILED) from None


def _bounded(text: str, limit: int = 8_000) -> str:
    """A child's error text, cut in its middle to fit a pipe: the runner reads a worker's pipe only once it has
    exited, and a send larger than the pipe's buffer (64 KiB) would block the worker from exiting for good. The
    last line, the runner's one-line reason (Processes.why), stays a line of its own, cut in its middle where it
    alone is long: for an exception of a one-line message it still starts with the exception's name."""
    if len(text) <= limit:
        return text
    mark = "[...]"
    body, _, last = text.rstrip().rpartition("\n")  # Processes.why's last line: after strip()
    if len(last) > limit // 4:
        last = f"{last[:limit // 8]} {mark} {last[len(last) - limit // 8:]}"
    room = limit - len(last) - len(mark) - 3  # the newlines around the mark and before `last`
    if len(body) > room:
        body = f"{body[:room // 4]}\n{mark}\n{body[len(body) - room * 3 // 4:]}"
    return f"{body}\n{last}" if body else last


def worker_process(rank: int, restart: int, run: Run, shared: SharedState, report) -> None:
    """A worker's entry point (spawn); failures go up `report`, a pipe to the runner. `restart`: the run's
    restarts so far when this process started (0 at first; it picks the worker's random streams)."""
    run_child(f"worker{rank}", report, run_worker, rank, restart, run, shared)


def evaluator_process(run: Run, shared: SharedState, best: float, evals: list, report) -> None:
    """The evaluator's entry point (spawn). CUDA is first touched there, in the child, never in the parent.
    `best` and `evals`: the best evaluation mean and the evaluations so far (earlier sessions, and this one's
    before a restart)."""
    run_child("evaluator", report, run_evaluator, run, shared, best, evals, report)


def stop_resource_tracker() -> None:
    """Stop multiprocessing's resource tracker, a child of every process that spawns, and wait for it. Left
    alone it ends only once it sees this interpreter exit, so it can outlive train.py by a moment; called once
    every other child is gone, and skipped while one lives (one that even SIGKILL did not end within its
    join, stuck in the kernel): the tracker would wait for it, without a limit."""
    import multiprocessing
    from multiprocessing import resource_tracker

    stop = getattr(resource_tracker._resource_tracker, "_stop", None)  # private, so looked up with care
    if stop is not None and not multiprocessing.active_children():
        stop()


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


def end(*procs, grace: float = TERM_SECONDS) -> None:
    """Terminate children, and kill those that have not exited within `grace` seconds: SIGTERM does not reach a
    stopped process (a frozen cgroup, job control), SIGKILL reaches any. One deadline for them all, so a stop
    takes the same few seconds however many children are frozen. Bounded: never waits for good."""
    for wait, how in ((grace, "terminate"), (TERM_SECONDS, "kill")):
        alive = [p for p in procs if p.is_alive()]
        for p in alive:
            getattr(p, how)()
        deadline = time.time() + wait
        for p in alive:
            p.join(timeout=max(0.0, deadline - time.time()))


class Processes:
    """The worker processes and the evaluator of one run (a machine of a cluster run has no evaluator)."""

    def __init__(self, ctx, run: Run, shared, with_evaluator: bool = True):
        """Evaluations start from what earlier sessions of a resumed run reached (run.prior); new ones are
        appended."""
        self.ctx, self.run, self.cfg, self.shared, self.run_dir = ctx, run, run.cfg, shared, run.run_dir
        self.best0, self.evals, self.with_evaluator = run.prior["best"], list(run.prior["evals"]), with_evaluator
        self.restarts, self.eval_restarts, self.nonfinite = 0, 0, False
        self.workers: list[Child] = []
        self.evaluator: Child | None = None
        self.eval_slot = run.threads  # the evaluator's heartbeat, after the workers'
        self.checked = self.resumed = time.monotonic()  # the runner's last check, and its last return from a pause
        self.silences: dict[str, float] = {}  # each child's longest time without progress seen (summary.json)

    def _worker(self, rank: int, restart: int) -> Child:
        mark_start(self.shared, rank)
        return Child(self.ctx, f"worker{rank}", worker_process, (rank, restart, self.run, self.shared))

    def _evaluator(self) -> Child:
        mark_start(self.shared, self.eval_slot)
        return Child(self.ctx, "evaluator", evaluator_process, (self.run, self.shared, self.best(), list(self.evals)))

    def start(self) -> None:
        """Start the workers, then the evaluator. A signal meanwhile is held until the child being started has
        its start-up data (cut half-way, it would die with a traceback), then raised as the console's handler
        would (KeyboardInterrupt / Stopped); stop() finds every child that was started."""
        with finishing() as note:
            for r in range(self.run.threads):
                if note.signum is None:
                    self.workers.append(self._worker(r, 0))
            if note.signum is None and self.with_evaluator:
                self.evaluator = self._evaluator()
        if note.signum is not None:
            raise KeyboardInterrupt if note.signum == signal.SIGINT else Stopped(note.signum)

    def check(self) -> str | None:
        """Collect evaluations; restart dead or hung processes within their budgets; return why the run must stop."""
        self.drain()
        self._note_pause()
        for rank, w in enumerate(self.workers):
            what = self.ended(w, rank)
            if what is None:
                continue
            if self.fatal(w):
                return what
            if self.restarts >= self.cfg.max_restarts:
                return f"{w.name} {what} and the {self.cfg.max_restarts} restarts allowed are used up"
            self.restarts += 1
            w.conn.close()
            self.workers[rank] = self._worker(rank, self.restarts)
            say(f"{w.name} {what}; restart {self.restarts} of {self.cfg.max_restarts}, on new random "
                f"streams (seed {self.cfg.seed}, worker {rank}, restart {self.restarts})")
        if self.evaluator is None:
            return None
        playing = silence(self.shared, self.eval_slot)[1] == ACTIVITIES[EVALUATING]
        what = self.ended(self.evaluator, self.eval_slot)
        if what is None:
            return None
        if self.fatal(self.evaluator):
            return what
        if self.eval_restarts >= EVAL_RESTARTS:
            return f"evaluator {what}, {self.eval_restarts + 1} times in all"
        self.eval_restarts += 1
        self.evaluator.conn.close()
        lost = "; the evaluation it was playing is lost" if what.startswith("hung") and playing else ""
        self.evaluator = self._evaluator()
        say(f"evaluator {what}{lost}; restarting it, training goes on")
        return None

    def ended(self, child: Child, slot: int) -> str | None:
        """What ended a child that must be replaced: "died (why)" (a fatal death: why alone, fatal() says so), or
        "hung (...)" once it has marked no progress for --hang-seconds (heartbeats, shared.py), and is then
        killed; None while it lives and progresses, or after it finished."""
        code = child.proc.exitcode
        if code is not None:
            return None if code == 0 else self.why(child) if code in FATAL \
                else f"died ({self.why(child)})"
        quiet, doing = silence(self.shared, slot)
        quiet = min(quiet, time.monotonic() - self.resumed)
        self.silences[child.name] = round(max(quiet, self.silences.get(child.name, 0.0)), 1)
        if quiet <= self.cfg.hang_seconds:
            return None
        child.proc.kill()  # SIGKILL: the one signal a stopped or deadlocked process cannot miss
        child.proc.join(timeout=TERM_SECONDS)
        return f"hung (no progress for {quiet:.0f} s, --hang-seconds {self.cfg.hang_seconds:g}; it was {doing})"

    def _note_pause(self) -> None:
        """A runner that was itself paused (job control: the whole process group stopped and continued) finds every
        child's mark old on its return: each child gets --hang-seconds afresh from then."""
        now = time.monotonic()
        if now - self.checked > PAUSED_SECONDS:
            self.resumed = now
        self.checked = now

    def fatal(self, child: Child) -> bool:
        """Whether a dead child met what a restart would meet again: NaN/Inf (then the run keeps its last good
        checkpoint: `nonfinite`) or a file it could not write (a full disk)."""
        self.nonfinite |= child.proc.exitcode == NONFINITE
        return child.proc.exitcode in FATAL

    def write_checkpoint(self, state: dict) -> None:
        """The runner's checkpoint.pt, at the end of a session. The evaluator writes the same file at each
        evaluation, so the runner's write is refused while the evaluator lives (stop() ends it): the last
        checkpoint.pt is the runner's, whatever the order of calls."""
        if self.evaluator is not None and self.evaluator.proc.is_alive():
            raise RuntimeError("checkpoint.pt is still written by the evaluator; stop() the processes first")
        atomic_save(state, self.run_dir / "checkpoint.pt")

    def best(self) -> float:
        return best_periodic(self.best0, self.evals)

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
            say(f"--- {child.name} ---\n{text.rstrip()}", stop=False)  # check()'s restart line then stops
            try:
                with open(self.run_dir / "errors.log", "a") as f:
                    f.write(f"--- {child.name} at {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n{text}\n")
            except OSError as e:  # the traceback above is on stderr; the run goes on
                say(write_failed(self.run_dir / 'errors.log', e, 'the traceback is above'), stop=False)
        return text.strip().splitlines()[-1]

    def stop(self, wait_for_eval: bool, note=None) -> None:
        """Ask every child to stop, wait a bounded time, then terminate and at last kill what is left: whatever
        state the children are in (frozen included), none is alive when this returns.

        Without `wait_for_eval` (a failure or a signal) the evaluator is stopped first, so that it can neither
        delay the exit nor play and save weights that may be broken. A signal noted meanwhile (`note`, see
        console.finishing) cuts the final evaluation short; an evaluator that hangs during it is killed.
        """
        if not wait_for_eval and self.evaluator is not None:
            self.evaluator.proc.terminate()
        self.shared.set(STOP)
        deadline = time.time() + JOIN_SECONDS
        for w in self.workers:
            w.proc.join(timeout=max(0.0, deadline - time.time()))
        unwanted = [self.evaluator.proc] if not wait_for_eval and self.evaluator is not None else []
        end(*(w.proc for w in self.workers), *unwanted)
        self.shared.set(WORKERS_DONE)  # the evaluator plays its last evaluation on the final weights
        if self.evaluator is not None:
            await_final(self.cfg.final_eval_seconds, note, self._final_played, lambda: end(self.evaluator.proc),
                        lambda: self.ended(self.evaluator, self.eval_slot), lambda line: say(line, stop=False))
        self.drain()

    def _final_played(self, seconds: float) -> bool:
        """Wait up to `seconds` for the evaluator's last evaluation; whether it is over (the evaluator gone)."""
        self.drain()
        self._note_pause()
        self.evaluator.proc.join(timeout=seconds)
        return not self.evaluator.proc.is_alive()

    def kill(self) -> None:
        """SIGKILL every child still alive, at once (a second stop signal: the run ends without saving)."""
        children = [*self.workers, *([self.evaluator] if self.evaluator else [])]
        for child in children:
            if child.proc.is_alive():
                child.proc.kill()
        for child in children:
            child.proc.join(timeout=TERM_SECONDS)


def watch(procs: Processes, writer) -> tuple[int, str]:
    """Start the processes, then show progress and log frames/s until the workers finish, an evaluation of this
    session reaches --stop-return, a process fails, or a signal arrives; return (exit status, reason). The
    console's signal handling is in place before the first child starts, so a signal while they start stops
    the run as any other does (summary written, children stopped)."""
    cfg, frames0 = procs.cfg, procs.run.prior["frames"]
    with Console(cfg, frames0, f"{cfg.game} {cfg.variant()} x{procs.run.threads}") as console:
        procs.start()
        console.status = _watch_loop(procs, writer, console)
    procs.drain()
    return console.status


def _watch_loop(procs: Processes, writer, console: Console) -> tuple[int, str]:
    cfg, shared = procs.cfg, procs.shared
    last_log, last_frames, evals0 = time.time(), procs.run.prior["frames"], len(procs.evals)
    while not procs.finished():
        failure = procs.check()
        if failure:
            return FAILED, failure
        solved = [why for e in procs.evals[evals0:] if (why := stop_reason(e, cfg.stop_return))]
        if solved:
            return 0, solved[0]
        frames = shared.frames()
        console.show(frames, procs.evals[-1] if procs.evals else None)
        now = time.time()
        if now - last_log >= 5:
            try:
                writer.add_scalar(metrics.FPS, (frames - last_frames) / (now - last_log), frames)
            except WriteFailed as e:  # the runner's own event file: the run stops as when a child cannot write
                return FAILED, f"runner: {e}"
            last_log, last_frames = now, frames
        time.sleep(0.25)
    return FINISHED, "finished"
