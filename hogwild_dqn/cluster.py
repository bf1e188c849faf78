"""Several machines on Ray: each runs the usual Hogwild pool; a global holder merges their parameter changes.

The only modules that import Ray (this one and cluster_actors.py, where the actors live), and only when
--cluster is given. Shape (README, "Beyond one machine"):
- ParameterHolder (one Ray actor, on the head): the global weights, the target network, the global frame
  counter, the evaluations; it writes checkpoint.pt, best.pt, summary.json and the machines' event files.
- NodePool (one Ray actor per machine, num_cpus = its workers): the local pool of worker processes over one
  shared network, exactly as on a single machine, plus the bridge: every sync_seconds it sends the change of
  the local weights since its last exchange, gets the global weights back and rebases the local ones on them.
  Exchanges are Downpour-style and asynchronous: no machine waits for another, and the workers never wait
  for an exchange. Optimizer statistics stay on each machine (they describe that machine's gradients).
- Evaluator (a Ray actor, on a GPU node if there is one): plays evaluation games from the global weights.
- run_cluster (the driver, on the head): starts them, starts a pool on every machine that joins or comes
  back, logs machines that are lost, and ends the run when the global frames are done or the holder is gone.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import socket
import sys
import time
from pathlib import Path

from tqdm import tqdm

from hogwild_dqn import config
from hogwild_dqn.checkpoint import resume_point
from hogwild_dqn.cluster_actors import SYNC_TIMEOUT, Evaluator, NodePool, ParameterHolder
from hogwild_dqn.config import Config, ConfigError
from hogwild_dqn.envs import env_spec
from hogwild_dqn.processes import Stopped, handle_stop_signals
from hogwild_dqn.rundir import prepare_run_dir

REJOIN_SCAN_SECONDS = 2  # how often the driver looks for machines that joined or came back
NO_MACHINE_SECONDS = 120  # with no machine left this long, the run stops
POOL_FAILURES = 3        # a machine whose pool failed this many times is not given another
MACHINE_SEED_STRIDE = 1_000_000  # far from the restart stride (processes.SEED_STRIDE) and the eval offset
HEAD = "node:__internal_head__"  # Ray's resource of the head node: the holder writes the run dir there


def _is_loopback(address: str) -> bool:
    return address.rsplit(":", 1)[0].strip("[]") in ("127.0.0.1", "localhost", "::1")


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
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
        except OSError as e:
            raise ConfigError(f"cannot join the Ray cluster at {address} ({e.strerror or e}); "
                              "is `ray start --head` running there?") from None
    package = str(Path(__file__).resolve().parent)
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False,
                 runtime_env={"py_modules": [package], "excludes": ["__pycache__"]})
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise ConfigError(f"cannot join the Ray cluster at {address} ({str(e).splitlines()[0][:160]})") from None
    return ray


def _start_values(cfg: Config, run_dir: Path, resume: str | None) -> dict:
    if resume is None:
        return {"model": None, "target": None, "frames": 0, "target_epoch": 0, "evals": [], "best": -math.inf,
                "wall_seconds": 0.0}
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
    ray = _connect(cfg.cluster)
    from ray.exceptions import GetTimeoutError, RayActorError, RayError
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    spec = env_spec(cfg)
    run_dir = prepare_run_dir(cfg, cfg.threads or 0, resume)
    start = _start_values(cfg, run_dir, resume)
    config.save(cfg, run_dir / "config.yaml")
    on = lambda node_id: NodeAffinitySchedulingStrategy(node_id, soft=False)  # noqa: E731
    holder = ray.remote(ParameterHolder).options(num_cpus=0, resources={HEAD: 0.01}).remote(cfg, spec, str(run_dir),
                                                                                           start)
    # the evaluator goes to a GPU machine if there is one, else to the head (which outlives the others)
    where = {"num_gpus": 1} if ray.cluster_resources().get("GPU", 0) >= 1 else {"resources": {HEAD: 0.01}}
    new_evaluator = lambda: ray.remote(Evaluator).options(num_cpus=0, **where).remote(cfg, spec)  # noqa: E731
    evaluator = new_evaluator()
    Pool = ray.remote(NodePool)

    pools, failures, names = {}, {}, {}  # node id -> (actor, run ref) / failures so far / name
    pools_started = []
    frames, next_eval = start["frames"], (start["frames"] // cfg.eval_every + 1) * cfg.eval_every
    pending_eval, last_scan, alone_since = None, 0.0, None  # pending_eval: (result ref, weights ref)
    status, reason, holder_gone = 0, "finished", False

    def scan() -> None:
        """Give a pool to every live machine with CPUs that has none (new, or back after a loss)."""
        for n in ray.nodes():
            nid, cpus = n["NodeID"], int(n["Resources"].get("CPU", 0))
            if not n["Alive"] or cpus < 1 or nid in pools or failures.get(nid, 0) >= POOL_FAILURES:
                continue
            threads = min(cfg.threads or cpus, cpus)
            name = names.setdefault(nid, f"node{len(names)}-{n['NodeManagerAddress']}")
            # every machine (and every return of one) plays its own games: its workers' seeds are shifted
            seeded = dataclasses.replace(cfg, seed=cfg.seed + MACHINE_SEED_STRIDE * len(pools_started))
            pools_started.append(nid)
            actor = Pool.options(num_cpus=threads, scheduling_strategy=on(nid)).remote(seeded, spec, name, threads,
                                                                                       holder)
            pools[nid] = (actor, actor.run.remote())
            _say(run_dir, f"{name} joined with {threads} workers")

    handle_stop_signals()
    bar = tqdm(total=cfg.frames, initial=frames, unit="frame", unit_scale=True, dynamic_ncols=True,
               desc=f"{cfg.game} {cfg.algo} on Ray", disable=not cfg.progress,
               mininterval=0.5 if sys.stderr.isatty() else 30)
    try:
        while status == 0:
            now = time.time()
            if frames < cfg.frames and now - last_scan >= REJOIN_SCAN_SECONDS:
                scan()
                last_scan = now
            for nid in [nid for nid, (_, ref) in pools.items() if ray.wait([ref], timeout=0)[0]]:
                _, ref = pools.pop(nid)
                try:
                    ray.get(ref)
                except RayError as e:
                    why = _last_line(e)
                    if "non-finite" in why:  # broken weights reached the holder: stop, keep the last checkpoint
                        status, reason = 1, f"{names[nid]}: {why}"
                        break
                    lost = isinstance(e, RayActorError)  # the machine (or its link) went away
                    # a lost machine comes back as a new Ray node; a failed pool may be retried where it is
                    failures[nid] = POOL_FAILURES if lost else failures.get(nid, 0) + 1
                    kind = "lost" if lost else "failed"
                    _say(run_dir, f"{names[nid]} {kind} ({why}); the other machines keep training")
            st = ray.get(holder.status.remote(), timeout=SYNC_TIMEOUT)
            frames = st["frames"]
            bar.update(min(frames, cfg.frames) - bar.n)
            if st["last_eval"]:
                bar.set_postfix_str(f"eval {st['last_eval']['mean_return']:.1f}", refresh=False)
            if pending_eval is not None and ray.wait([pending_eval[0]], timeout=0)[0]:
                if not _record_eval(ray, holder, pending_eval, run_dir):
                    evaluator = new_evaluator()
                pending_eval = None
            if pending_eval is None and next_eval <= frames < cfg.frames:
                weights = holder.weights.remote()
                pending_eval = (evaluator.evaluate.remote(weights, frames), weights)
                next_eval = (frames // cfg.eval_every + 1) * cfg.eval_every
            if frames >= cfg.frames and not pools:
                break
            alone_since = (alone_since or now) if not pools else None
            if alone_since and now - alone_since > NO_MACHINE_SECONDS:
                status, reason = 1, f"no machine has trained for {NO_MACHINE_SECONDS} s"
            time.sleep(0.25)
    except KeyboardInterrupt:
        status, reason = 130, "interrupted (SIGINT)"
    except Stopped:
        status, reason = 143, "terminated (SIGTERM)"
    except (RayActorError, GetTimeoutError) as e:
        status, holder_gone = 1, True
        reason = (f"the parameter holder is gone ({_last_line(e)}); the run stops; its last checkpoint is "
                  f"{run_dir / 'checkpoint.pt'}: continue with --resume {run_dir}")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        bar.close()
    try:
        return _finish(ray, run_dir, holder, evaluator, new_evaluator, pools, names, pending_eval, status, reason,
                       holder_gone)
    finally:
        ray.shutdown()


def _record_eval(ray, holder, pending_eval: tuple, run_dir: Path) -> bool:
    """Hand a finished evaluation to the holder; False if the evaluator failed (it is then replaced)."""
    from ray.exceptions import RayError

    try:
        result = ray.get(pending_eval[0])
    except RayError as e:  # the evaluator's machine was lost, or the evaluation failed: training goes on
        _say(run_dir, f"an evaluation failed ({_last_line(e)}); starting another evaluator")
        return False
    ray.get(holder.add_eval.remote(result, pending_eval[1]), timeout=SYNC_TIMEOUT)
    return True


def _last_line(e: Exception) -> str:
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    return (lines[-1] if lines else type(e).__name__)[:200]


def _finish(ray, run_dir, holder, evaluator, new_evaluator, pools, names, pending_eval, status, reason,
            holder_gone) -> int:
    """Stop the machines (bounded), evaluate the final weights after a normal end, write checkpoint + summary."""
    from ray.exceptions import RayError

    try:
        if not holder_gone:
            ray.get(holder.request_stop.remote(), timeout=SYNC_TIMEOUT)
    except RayError:
        holder_gone = True
    refs = [ref for _, ref in pools.values()]
    ray.wait(refs, num_returns=len(refs), timeout=30)  # each pool stops its workers and sends its last change
    for actor, _ in pools.values():
        ray.kill(actor)
    if holder_gone:
        print(f"train.py: {reason}", file=sys.stderr)
        return status
    try:
        if status == 0:
            if pending_eval is not None and not _record_eval(ray, holder, pending_eval, run_dir):
                evaluator = new_evaluator()
            weights = holder.weights.remote()
            frames = ray.get(holder.status.remote(), timeout=SYNC_TIMEOUT)["frames"]
            _record_eval(ray, holder, (evaluator.evaluate.remote(weights, frames), weights), run_dir)
        summary = ray.get(holder.finish.remote(reason, sorted(names.values())))
    except RayError as e:
        print(f"train.py: the cluster failed while finishing ({_last_line(e)}); "
              f"{run_dir / 'checkpoint.pt'} holds the last checkpoint", file=sys.stderr)
        return 1
    if status != 0:
        print(f"train.py: {reason}", file=sys.stderr)
    print(f"{reason}: {summary['frames']} frames in {summary['wall_seconds']:.0f}s "
          f"({summary['frames_per_second']:.0f} frames/s) on {len(names)} machines, "
          f"best eval {summary['best_eval_return']}, run dir {run_dir}")
    return status
