"""Several machines on Ray: each runs the usual Hogwild pool; a global holder merges their parameter changes.

The only modules that import Ray (this one and actors.py, where the actors live), and only when
--cluster is given. Shape (docs/cluster.md):
- ParameterHolder (one Ray actor, on the head): the global weights, the target network, the global frame
  counter, the evaluations; it writes checkpoint.pt, best.pt, summary.json and the machines' event files.
- NodePool (one Ray actor per machine, num_cpus = its workers): the local pool of worker processes over one
  shared network, exactly as on a single machine, plus the bridge: every sync_seconds it sends the change of
  the local weights since its last exchange, gets the global weights back and rebases the local ones on them.
  Exchanges are Downpour-style and asynchronous: no machine waits for another, and the workers never wait
  for an exchange. Optimizer statistics stay on each machine (they describe that machine's gradients).
- Evaluator (a Ray actor, on a GPU node if there is one): plays evaluation games from the global weights,
  and one more game as a GIF at a new best.
- Driver (run_cluster, on the head): starts them, starts a pool on every machine that joins or comes back,
  logs machines that are lost, asks for evaluations, and ends the run when the global frames are done, an
  evaluation reaches --stop-return, or the holder is gone. Evaluation itself is evaluation/'s, as on one
  machine; the progress line and stop signals are console.py's.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import socket
import sys
import time
from pathlib import Path

from tqdm import tqdm

from hogwild_dqn import config
from hogwild_dqn.checkpoint import resume_point
from hogwild_dqn.cluster.actors import SYNC_TIMEOUT, Evaluator, NodePool, ParameterHolder
from hogwild_dqn.commands import abandoned, invoked_as
from hogwild_dqn.config import Config, ConfigError, first_line
from hogwild_dqn.console import Console, finishing, unsaved
from hogwild_dqn.envs import env_spec
from hogwild_dqn.evaluation.schedule import await_final, needs_confirmation, next_point, skipped_line, stop_reason
from hogwild_dqn.evaluation.scores import ending, last_line
from hogwild_dqn.exits import FAILED, FINISHED, STOPPED
from hogwild_dqn.faults import NonFinite
from hogwild_dqn.preflight import never_warm
from hogwild_dqn.rundir import no_prior, prepare_run_dir

REJOIN_SCAN_SECONDS = 2  # how often the driver looks for machines that joined or came back
NO_MACHINE_SECONDS = 120  # with no machine left this long, the run stops
POOL_STOP_SECONDS = 30  # at the end, each machine's pool has this long to stop its workers and send its last change
POOL_FAILURES = 3        # a machine whose pool failed this many times is not given another
MACHINE_SEED_STRIDE = 1_000_000  # each machine's base seed; far from the evaluator's offset (policy.EVAL_SEED_OFFSET)
PROBE_SECONDS = 2  # how often the driver asks a working actor (a pool, the evaluator at work) for its progress
HEAD = "node:__internal_head__"  # Ray's resource of the head node: the holder writes the run dir there


def _is_loopback(address: str) -> bool:
    return address.rsplit(":", 1)[0].strip("[]") in ("127.0.0.1", "localhost", "::1")


def _not_rays_head(host: str, port: int) -> str | None:
    """Why host:port is not a Ray head, or None: it must answer an HTTP/2 client preface with a SETTINGS frame
    at once, as Ray's head (a plaintext gRPC server) does. A connection that fails raises OSError."""
    frame = b""
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))  # preface, empty SETTINGS
        try:
            while len(frame) < 9 and (part := s.recv(9 - len(frame))):
                frame += part
        except TimeoutError:
            return "no gRPC answer within 10 s"
    if len(frame) < 9:
        return "it closed the connection without a gRPC answer"
    return None if frame[3] == 4 else "its answer is not gRPC's"  # a frame header whose type is SETTINGS


def _connect(address: str):
    """Import Ray and join the cluster; every failure is one ConfigError line."""
    if _is_loopback(address):
        # Ray rewrites a loopback head address to this machine's outward IP unless told the cluster is one host
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise ConfigError("--cluster needs Ray: run `make install-cluster` "
                          "(pip install -r requirements-cluster.txt)") from None
    target = address
    if address == "auto":  # the head this machine last joined or started; Ray says so if there is none
        try:
            target = ray._private.services.canonicalize_bootstrap_address("auto") or address
        except (ConnectionError, ValueError) as e:
            raise ConfigError(f"cannot join the Ray cluster at auto ({_last_line(e)})") from None
    if target != "auto":  # Ray itself retries a dead address for minutes; a plain connect answers at once
        host, port = target.rsplit(":", 1)
        tls = os.environ.get("RAY_USE_TLS", "0") not in ("", "0")  # its head answers no plaintext preface
        try:
            why = None if tls else _not_rays_head(host.strip("[]"), int(port))
        except OSError as e:
            raise ConfigError(f"cannot join the Ray cluster at {address} ({e.strerror or e}); "
                              "is `ray start --head` running there?") from None
        if why:  # ray.init would wait on it for minutes, with no time limit
            raise ConfigError(f"cannot join the Ray cluster at {address}: something listens there, but not Ray's "
                              f"head ({why}); is that the port `ray start --head` gave?")
    package = str(Path(__file__).resolve().parent)
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False,
                 runtime_env={"py_modules": [package], "excludes": ["__pycache__"]})
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise ConfigError(f"cannot join the Ray cluster at {address} ({first_line(e)[:160]})") from None
    return ray


def _start_values(cfg: Config, run_dir: Path, resume: str | None) -> dict:
    if resume is None:
        return {"model": None, "target": None, "frames": 0, "target_epoch": 0, "evals": [], "best": -math.inf,
                "wall_seconds": 0.0, "lr_start": None}
    ckpt, prior = resume_point(run_dir, cfg)
    return {**prior, "model": ckpt["model"], "target": ckpt.get("target"),
            "target_epoch": int(ckpt.get("target_epoch", 0))}


def _say(run_dir: Path, line: str) -> None:
    """A cluster event: on stderr and in <run_dir>/cluster.log."""
    tqdm.write(line, file=sys.stderr)
    with open(run_dir / "cluster.log", "a") as f:
        f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")


def run_cluster(cfg: Config, resume: str | None) -> int:
    """The driver of a cluster run; returns the exit status as runner.run does."""
    spec = env_spec(cfg)
    if cfg.threads and (unlearnable := never_warm(cfg, spec, cfg.threads)):  # each machine's memories, as runner.run
        raise ConfigError(unlearnable)
    ray = _connect(cfg.cluster)
    run_dir = prepare_run_dir(cfg, cfg.threads or 0, resume)
    start = _start_values(cfg, run_dir, resume)
    config.save(cfg, run_dir / "config.yaml")
    driver = Driver(ray, cfg, spec, run_dir, start)
    try:
        with Console(cfg, start["frames"], f"{cfg.game} {cfg.variant()} on Ray") as console:
            console.status = driver.loop(console)
        # a signal from here on cuts the final evaluation, never the saving (one that stopped the loop was the first)
        at_once = functools.partial(_end_at_once, run_dir)
        with finishing(signalled=console.status[0] in STOPPED, at_once=at_once) as note:
            return driver.finish(*console.status, note)
    finally:
        ray.shutdown()


def _end_at_once(run_dir: Path, signum: int) -> None:
    """A second stop signal while the run stops: the driver exits at once, and Ray ends the actors of a driver that
    is gone (a frozen one included). Not by an exception: raised from a signal handler inside a Ray call, it comes
    out of Ray as a SystemError only once that call returns."""
    os._exit(abandoned(invoked_as("train.py"), signum, unsaved(run_dir, []), ended="the cluster ends its processes"))


class Probe:
    """The driver's watch on one working actor (a machine's pool; the evaluator during an evaluation): it asks the
    actor's `progress()` every PROBE_SECONDS, never waiting for the answer. The actor's silence is the longer of
    what it last answered (a loop stuck in a live process) and the time since its last answer (a frozen one), never
    more than the probe's own age: an evaluator asked to play may answer with the idle time before the request."""

    def __init__(self, actor):
        self.actor, self.ref, self.asked = actor, None, 0.0
        self.created = self.heard = time.monotonic()
        self.quiet = 0.0

    def silence(self, ray) -> float:
        from ray.exceptions import RayError

        now = time.monotonic()
        if self.ref is not None and ray.wait([self.ref], timeout=0)[0]:
            try:
                self.quiet, self.heard = ray.get(self.ref, timeout=SYNC_TIMEOUT), now  # ready: ray.wait said so
            except RayError:  # the actor is gone: reap() and collect_eval() say so
                pass
            self.ref = None
        if self.ref is None and now - self.asked >= PROBE_SECONDS:
            self.ref, self.asked = self.actor.progress.remote(), now
        return min(max(self.quiet, now - self.heard), now - self.created)


class Driver:
    """Starts the holder, the evaluator and a pool per machine; asks for evaluations at the evaluation points;
    ends the run when the frames are done, an evaluation reaches --stop-return, the holder is gone or a signal
    arrives."""

    def __init__(self, ray, cfg: Config, spec, run_dir: Path, start: dict):
        self.ray, self.cfg, self.spec, self.run_dir = ray, cfg, spec, run_dir
        self.holder = ray.remote(ParameterHolder).options(num_cpus=0, resources={HEAD: 0.01}).remote(
            cfg, spec, str(run_dir), start)
        # the evaluator goes to a GPU machine if there is one, else to the head (which outlives the others)
        self.where = {"num_gpus": 1} if ray.cluster_resources().get("GPU", 0) >= 1 else {"resources": {HEAD: 0.01}}
        self.evaluator = self.new_evaluator()
        self.pools, self.failures, self.names = {}, {}, {}  # node id -> (actor, run ref) / failures / name
        self.probes: dict[str, Probe] = {}  # node id -> the watch on its pool
        self.pools_started = []
        self.frames, self.next_eval = start["frames"], next_point(start["frames"], cfg.eval_every)
        # what every pool's workers start from: the session's frames (their random streams are keyed by them, so a
        # resumed run replays none of its first part's) and the learning-rate line the run had reached
        self.prior = {**no_prior(), "frames": start["frames"], "lr_start": start["lr_start"]}
        self.wall0 = start["wall_seconds"]  # the earlier sessions' (the holder's summary adds this session's)
        self.pending_eval = None  # (result ref, weights ref, frames)
        self.eval_probe: Probe | None = None  # the watch on the evaluator during an evaluation
        self.holder_gone, self.solved = False, False

    def new_evaluator(self):
        # a second thread answers progress() while evaluate() plays (Probe)
        return self.ray.remote(Evaluator).options(num_cpus=0, max_concurrency=2, **self.where).remote(self.cfg,
                                                                                                   self.spec)

    def scan(self) -> None:
        """Give a pool to every live machine with CPUs that has none (new, or back after a loss)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        for n in self.ray.nodes():
            nid, cpus = n["NodeID"], int(n["Resources"].get("CPU", 0))
            if not n["Alive"] or cpus < 1 or nid in self.pools or self.failures.get(nid, 0) >= POOL_FAILURES:
                continue
            threads = min(self.cfg.threads or cpus, cpus)
            name = self.names.setdefault(nid, f"node{len(self.names)}-{n['NodeManagerAddress']}")
            if unlearnable := never_warm(self.cfg, self.spec, threads):  # its cores, fewer than --threads or unset
                _say(self.run_dir, f"warning: {name} (its frames count toward --frames): {unlearnable}")
            # every machine (and every return of one) plays its own games: its workers' seeds are shifted
            seeded = dataclasses.replace(self.cfg, seed=self.cfg.seed + MACHINE_SEED_STRIDE * len(self.pools_started))
            self.pools_started.append(nid)
            actor = self.ray.remote(NodePool).options(
                num_cpus=threads, max_concurrency=2,  # a second thread answers progress() while run() trains
                scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False)).remote(
                seeded, self.spec, name, threads, self.holder, self.prior)
            self.pools[nid], self.probes[nid] = (actor, actor.run.remote()), Probe(actor)
            _say(self.run_dir, f"{name} joined with {threads} workers")

    def reap(self) -> tuple[int, str] | None:
        """Take note of pools that ended; a non-finite failure ends the run."""
        from ray.exceptions import RayActorError, RayError

        for nid in [nid for nid, (_, ref) in self.pools.items() if self.ray.wait([ref], timeout=0)[0]]:
            _, ref = self.pools.pop(nid)
            self.probes.pop(nid, None)
            try:
                self.ray.get(ref, timeout=SYNC_TIMEOUT)  # ready: ray.wait said so
            except NonFinite as e:  # Ray's task error is an instance of the pool's NonFinite
                return FAILED, f"{self.names[nid]}: {_last_line(e)}"  # broken weights: stop, keep the last checkpoint
            except RayError as e:
                why = _last_line(e)
                lost = isinstance(e, RayActorError)  # the machine (or its link) went away
                # a lost machine comes back as a new Ray node; a failed pool may be retried where it is
                self.failures[nid] = POOL_FAILURES if lost else self.failures.get(nid, 0) + 1
                _say(self.run_dir, f"{self.names[nid]} {'lost' if lost else 'failed'} ({why}); "
                                   "the other machines keep training")
        return None

    def _final_played(self, seconds: float) -> bool:
        """Wait up to `seconds` for the pending evaluation; whether it is over."""
        return bool(self.ray.wait([self.pending_eval[0]], timeout=seconds)[0])

    def _drop_eval(self) -> None:
        """The pending evaluation is not waited for (--resume plays a final one)."""
        self.pending_eval = None

    def _evaluator_hung(self) -> str | None:
        """How the evaluator hung, once it has made no progress for --hang-seconds (Probe); it is then killed and
        replaced."""
        quiet = self.eval_probe.silence(self.ray)
        if quiet <= self.cfg.hang_seconds:
            return None
        self.ray.kill(self.evaluator)
        self.evaluator, self.pending_eval = self.new_evaluator(), None
        return f"hung (no progress for {quiet:.0f} s, --hang-seconds {self.cfg.hang_seconds:g})"

    def hung(self) -> None:
        """Kill each actor that has made no progress for --hang-seconds (Probe), frozen or stuck: a machine's pool
        is then handled as a failed one (the others keep training; it may be given another), the evaluator is
        replaced and its evaluation is lost."""
        limit = self.cfg.hang_seconds
        for nid in [n for n in self.pools if self.probes[n].silence(self.ray) > limit]:
            quiet = self.probes.pop(nid).silence(self.ray)
            actor, _ = self.pools.pop(nid)
            self.ray.kill(actor)
            self.failures[nid] = self.failures.get(nid, 0) + 1
            _say(self.run_dir, f"{self.names[nid]} hung (no progress for {quiet:.0f} s, --hang-seconds {limit:g}); "
                               "it is killed, what it learnt since its last exchange is lost; the other machines "
                               "keep training")
        if self.pending_eval is not None and (what := self._evaluator_hung()):
            _say(self.run_dir, f"the evaluator {what}; the evaluation it was playing is lost; starting another "
                               "evaluator")

    def ask_eval(self, best: float, final: bool = False, confirm: tuple | None = None) -> None:
        """Evaluate the newest global weights (a late evaluator skips to them); `final`: the run's score;
        `confirm`: (weights, frames) of a periodic evaluation that reached --stop-return, played again."""
        weights, frames = confirm or (self.holder.weights.remote(), self.frames)
        kind = "confirmation" if confirm else "final" if final else "periodic"
        self.pending_eval = (self.evaluator.evaluate.remote(weights, frames, best, kind), weights, frames)
        self.eval_probe = Probe(self.evaluator)

    def collect_eval(self) -> dict | None:
        """Hand a finished evaluation to the holder; None if the evaluator failed (it is then replaced)."""
        from ray.exceptions import RayError

        result_ref, weights, frames = self.pending_eval
        self.pending_eval = None
        try:
            result = self.ray.get(result_ref, timeout=SYNC_TIMEOUT)  # ready: the callers waited for it
        except RayError as e:  # the evaluator's machine was lost, or the evaluation failed: training goes on
            _say(self.run_dir, f"an evaluation failed ({_last_line(e)}); starting another evaluator")
            self.evaluator = self.new_evaluator()
            return None
        self.ray.get(self.holder.add_eval.remote(result, weights), timeout=SYNC_TIMEOUT)
        if late := skipped_line(frames, self.frames, self.cfg.eval_every):
            _say(self.run_dir, late)
        return result

    def loop(self, console: Console) -> tuple[int, str]:
        """Until the frames are done, --stop-return is reached, no machine is left or the holder is gone."""
        from ray.exceptions import GetTimeoutError, RayActorError

        last_scan, alone_since = 0.0, None
        try:
            while True:
                now = time.time()
                if self.frames < self.cfg.frames and now - last_scan >= REJOIN_SCAN_SECONDS:
                    self.scan()
                    last_scan = now
                failure = self.reap()
                if failure:
                    return failure
                self.hung()
                st = self.ray.get(self.holder.status.remote(), timeout=SYNC_TIMEOUT)
                self.frames = st["frames"]
                console.show(self.frames, st["last_eval"])
                if self.pending_eval is not None and self.ray.wait([self.pending_eval[0]], timeout=0)[0]:
                    _, played, at = self.pending_eval
                    result = self.collect_eval()
                    solved = result and stop_reason(result, self.cfg.stop_return)
                    if solved:
                        self.solved = True  # the confirmed weights are the run's last: no final evaluation
                        return 0, solved
                    if result and needs_confirmation(result, self.cfg.stop_return):
                        self.ask_eval(st["best"], confirm=(played, at))
                if self.pending_eval is None and self.next_eval <= self.frames < self.cfg.frames:
                    self.ask_eval(st["best"])
                    self.next_eval = next_point(self.frames, self.cfg.eval_every)
                if self.frames >= self.cfg.frames and not self.pools:
                    return FINISHED, "finished"
                alone_since = (alone_since or now) if not self.pools else None
                if alone_since and now - alone_since > NO_MACHINE_SECONDS:
                    return FAILED, f"no machine has trained for {NO_MACHINE_SECONDS} s"
                time.sleep(0.25)
        except (RayActorError, GetTimeoutError) as e:
            self.holder_gone = True
            why = f"no answer within {SYNC_TIMEOUT} s" if isinstance(e, GetTimeoutError) else _last_line(e)
            return FAILED, (f"the parameter holder is gone ({why}); the run stops; its last checkpoint is "
                       f"{self.run_dir / 'checkpoint.pt'}: continue with --resume {self.run_dir}")

    def finish(self, status: int, reason: str, note) -> int:
        """Stop the machines (bounded), evaluate the final weights after a normal end, write checkpoint +
        summary. A signal noted meanwhile (`note`, see console.finishing) cuts the final evaluation short. Every
        wait has a limit and says what it waited for when it gives up."""
        from ray.exceptions import GetTimeoutError, RayError

        ray = self.ray
        try:
            if not self.holder_gone:
                ray.get(self.holder.request_stop.remote(), timeout=SYNC_TIMEOUT)
        except RayError:
            self.holder_gone = True
        refs = [ref for _, ref in self.pools.values()]
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=POOL_STOP_SECONDS)  # each pool stops its workers
        for nid, (actor, ref) in self.pools.items():                                # and sends its last change
            if ref not in done:
                _say(self.run_dir, f"{self.names[nid]} did not stop within {POOL_STOP_SECONDS} s; it is killed, and "
                                   "what it learnt since its last exchange is lost")
            ray.kill(actor)
        self.pools.clear()
        self.probes.clear()
        if self.holder_gone:
            print(f"train.py: {reason}", file=sys.stderr)
            return status
        try:
            if status == 0 and not self.solved:
                if self.pending_eval is not None and ray.wait([self.pending_eval[0]], timeout=0)[0]:
                    self.collect_eval()  # a periodic evaluation still playing is dropped: the final one follows
                self.pending_eval = None
                st = ray.get(self.holder.status.remote(), timeout=SYNC_TIMEOUT)
                self.frames = st["frames"]
                _say(self.run_dir, f"training done; the final evaluation: {self.cfg.final_eval_episodes} games of "
                                   "the last weights")
                self.ask_eval(st["best"], final=True)
                missed = await_final(self.cfg.final_eval_seconds, note, self._final_played, self._drop_eval,
                                     self._evaluator_hung, lambda line: _say(self.run_dir, line))
                final = None if missed else self.collect_eval()
                status, reason = ending(status, reason, [final] if final else [], note.signum)
            summary = ray.get(self.holder.finish.remote(reason, sorted(self.names.values())), timeout=SYNC_TIMEOUT)
        except RayError as e:
            waited = f"no answer from the parameter holder within {SYNC_TIMEOUT} s" \
                if isinstance(e, GetTimeoutError) else _last_line(e)
            print(f"train.py: the cluster failed while finishing ({waited}); "
                  f"{self.run_dir / 'checkpoint.pt'} holds the last checkpoint", file=sys.stderr)
            return FAILED
        if status != 0:
            print(f"train.py: {reason}", file=sys.stderr)
        print(last_line(reason, summary, {**self.prior, "wall_seconds": self.wall0}, self.run_dir, len(self.names)))
        return status


def _last_line(e: Exception) -> str:
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    return (lines[-1] if lines else type(e).__name__)[:200]
