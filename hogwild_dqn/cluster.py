"""Several machines on Ray: each runs the usual Hogwild pool; a global holder merges their parameter changes.

The only module that imports Ray, and only when --cluster is given. Shape (README, "Beyond one machine"):
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

import json
import math
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from hogwild_dqn import config, metrics
from hogwild_dqn.checkpoint import atomic_save, load_checkpoint
from hogwild_dqn.config import Config, ConfigError
from hogwild_dqn.envs import EnvSpec, env_spec, make_env
from hogwild_dqn.evaluator import EVAL_SEED_OFFSET, play_episode
from hogwild_dqn.networks import build_network
from hogwild_dqn.processes import Processes, Stopped, on_sigterm
from hogwild_dqn.runner import make_summary, new_shared_state, prepare_run_dir
from hogwild_dqn.shared import STOP, all_finite

NEVER = 2**62            # a machine's workers never copy the target network: the holder's copy is pushed to them
SYNC_TIMEOUT = 60        # an exchange unanswered this long: the holder is treated as gone
REJOIN_SCAN_SECONDS = 2  # how often the driver looks for machines that joined or came back
NO_MACHINE_SECONDS = 120  # with no machine left this long, the run stops
LOG_SHIP_SECONDS = 5     # how often a machine sends the new bytes of its event files to the head
POOL_FAILURES = 3        # a machine whose pool failed this many times is not given another
HEAD = "node:__internal_head__"  # Ray's resource of the head node: the holder writes the run dir there


def _flat(params: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in params])


@torch.no_grad()
def _assign(params: list[torch.Tensor], flat) -> None:
    """Copy a flat vector into parameters in place (they may live in shared memory: never rebind .data)."""
    flat = torch.as_tensor(flat)
    i = 0
    for p in params:
        p.copy_(flat[i:i + p.numel()].view_as(p))
        i += p.numel()


def _network(cfg: Config, spec: EnvSpec) -> torch.nn.Module:
    return build_network(spec.obs_shape, spec.n_actions, cfg.algo == "a3c", cfg.hidden, cfg.mlp_layers)


class ParameterHolder:
    """The global state of a cluster run. Ray runs its methods one at a time, so no lock is needed."""

    def __init__(self, cfg: Config, spec: EnvSpec, run_dir: str, start: dict):
        torch.set_num_threads(1)
        self.cfg, self.spec, self.run_dir = cfg, spec, Path(run_dir)
        torch.manual_seed(cfg.seed)
        net = _network(cfg, spec)
        if start["model"] is not None:
            net.load_state_dict(start["model"])
        self.net = net
        self.flat = _flat(list(net.parameters())).numpy().copy()
        self.target = None
        if cfg.algo != "a3c":
            self.target = self.flat.copy()
            if start["target"] is not None:
                tnet = _network(cfg, spec)
                tnet.load_state_dict(start["target"])
                self.target = _flat(list(tnet.parameters())).numpy().copy()
        self.frames, self.target_epoch = start["frames"], start["target_epoch"]
        self.frames0, self.evals, self.best = start["frames"], list(start["evals"]), start["best"]
        self.wall0, self.t0 = start["wall_seconds"], time.time()
        self.stop, self.node_frames, self.sync_seconds = False, {}, []
        self.writer = metrics.make_writer(self.run_dir, "holder")

    def exchange(self, node: str, delta, frames: int, target_epoch: int, sync_seconds: float | None) -> dict:
        """Apply a machine's parameter change and frames; answer with the global weights (and target if newer)."""
        self.flat += delta  # arrays from Ray's object store are read-only: only ever read `delta`
        self.frames += frames
        self.node_frames[node] = self.node_frames.get(node, 0) + frames
        if self.target is not None and self.frames // self.cfg.target_update > self.target_epoch:
            self.target[:] = self.flat
            self.target_epoch = self.frames // self.cfg.target_update
        if sync_seconds is not None:
            self.sync_seconds.append(sync_seconds)
            self.writer.add_scalar(f"cluster/sync_seconds/{node}", sync_seconds, self.frames)
        newer_target = self.target is not None and target_epoch != self.target_epoch
        return {"weights": self.flat.copy(), "frames": self.frames,
                "stop": self.stop or self.frames >= self.cfg.frames,
                "target": self.target.copy() if newer_target else None, "target_epoch": self.target_epoch}

    def weights(self) -> np.ndarray:
        return self.flat.copy()

    def status(self) -> dict:
        return {"frames": self.frames, "evals": len(self.evals), "last_eval": self.evals[-1] if self.evals else None,
                "node_frames": dict(self.node_frames)}

    def request_stop(self) -> None:
        self.stop = True

    def append_logs(self, node: str, chunks: dict) -> None:
        """A machine's new event-file bytes land under <run_dir>/<node>/ (event files are append-only)."""
        for rel, data in chunks.items():
            path = self.run_dir / node / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab") as f:
                f.write(data)

    def _state(self, flat) -> dict:
        _assign(list(self.net.parameters()), flat)
        target = None
        if self.target is not None:
            tnet = _network(self.cfg, self.spec)
            _assign(list(tnet.parameters()), self.target)
            target = {k: v.clone() for k, v in tnet.state_dict().items()}
        return {"model": {k: v.clone() for k, v in self.net.state_dict().items()}, "target": target,
                "optimizer": None, "target_epoch": self.target_epoch, "worker_eps": torch.zeros(0),
                "worker_seed": torch.zeros(0, dtype=torch.int64), "frames": self.frames,
                "best_eval_return": self.best, "game": self.cfg.game, "algo": self.cfg.algo,
                "obs_shape": list(self.spec.obs_shape), "n_actions": self.spec.n_actions,
                "config": self.cfg.to_dict()}

    def add_eval(self, result: dict, played) -> None:
        """Log an evaluation (of the weights `played`); keep best.pt, and write checkpoint.pt."""
        result["wall_seconds"] = round(self.wall0 + time.time() - self.t0, 2)
        self.evals.append(result)
        for tag, key in ((metrics.EVAL_MEAN, "mean_return"), (metrics.EVAL_STD, "std_return"),
                         (metrics.EVAL_SECONDS, "seconds")):
            self.writer.add_scalar(tag, result[key], result["frames"])
        self.writer.flush()
        if result["mean_return"] > self.best:
            self.best = result["mean_return"]
            atomic_save({**self._state(played), "frames": result["frames"]}, self.run_dir / "best.pt")
        self.checkpoint()

    def checkpoint(self, reason: str = "running", nodes: tuple = ()) -> dict:
        """checkpoint.pt, and summary.json next to it (so a run whose holder dies keeps its evaluations)."""
        if all_finite([torch.from_numpy(self.flat)]):  # never overwrite the last good checkpoint with NaN/Inf
            atomic_save(self._state(self.flat), self.run_dir / "checkpoint.pt")
        prior = {"frames": self.frames0, "wall_seconds": self.wall0, "device": None}
        summary = make_summary(self.cfg, self.cfg.threads or 0, reason, self.frames, time.time() - self.t0, prior,
                               self.evals, self.best)
        sync = sorted(self.sync_seconds)
        summary["cluster"] = {"nodes": sorted(set(nodes) | set(self.node_frames)),
                              "frames_per_node": self.node_frames,
                              "sync_seconds_median": sync[len(sync) // 2] if sync else None,
                              "syncs": len(sync), "sync_bytes": int(self.flat.nbytes)}
        tmp = self.run_dir / ".summary.json.tmp"
        tmp.write_text(json.dumps(summary, indent=2))
        tmp.replace(self.run_dir / "summary.json")
        return summary

    def finish(self, reason: str, nodes: list[str]) -> dict:
        """The final checkpoint and summary.json; return the summary."""
        summary = self.checkpoint(reason, tuple(nodes))
        self.writer.add_scalar(metrics.FPS, summary["frames_per_second"], self.frames)
        self.writer.close()
        return summary


class LogShipper:
    """Sends the bytes appended to a machine's event files since the last call."""

    def __init__(self, root: Path):
        self.root, self.offsets = root, {}

    def new_bytes(self) -> dict:
        chunks = {}
        for path in self.root.rglob("events.out.tfevents.*"):
            rel = str(path.relative_to(self.root))
            with open(path, "rb") as f:
                f.seek(self.offsets.get(rel, 0))
                data = f.read()
            if data:
                chunks[rel] = data
                self.offsets[rel] = self.offsets.get(rel, 0) + len(data)
        return chunks


class NodePool:
    """One machine: its Hogwild pool of worker processes and the bridge to the holder (this actor's process)."""

    def __init__(self, cfg: Config, spec: EnvSpec, node: str, threads: int, holder):
        self.cfg, self.spec, self.node, self.threads, self.holder = cfg, spec, node, threads, holder

    def run(self) -> dict:
        import ray
        import torch.multiprocessing as mp

        torch.set_num_threads(1)
        cfg = Config(**{**self.cfg.to_dict(), "target_update": NEVER})
        shared = new_shared_state(cfg, self.spec, self.threads, extra_frame_slots=1)
        params = list(shared.model.parameters())
        target_params = None if shared.target is None else list(shared.target.parameters())
        local_dir = Path(tempfile.mkdtemp(prefix=f"hogwild_dqn-{self.node}-"))
        shipper = LogShipper(local_dir)
        state = {"base": None, "reported": 0, "target_epoch": -1, "last_sync": None}

        def exchange(initial: bool = False) -> bool:
            """One round trip with the holder; return whether the run is to stop."""
            t0 = time.time()
            sent = _flat(params)
            local = int(shared.worker_frames[: self.threads].sum())
            delta = np.zeros_like(sent.numpy()) if initial else (sent - state["base"]).numpy()
            reply = ray.get(self.holder.exchange.remote(self.node, delta, local - state["reported"],
                                                        state["target_epoch"], state["last_sync"]),
                            timeout=SYNC_TIMEOUT)
            glob = torch.from_numpy(np.array(reply["weights"]))  # a writable copy
            # rebase: the global weights plus what the workers learnt during the round trip
            _assign(params, glob if initial else glob + (_flat(params) - sent))
            state["base"], state["reported"] = glob, local
            if reply["target"] is not None and target_params is not None:
                _assign(target_params, np.array(reply["target"]))
                state["target_epoch"] = reply["target_epoch"]
            shared.worker_frames[self.threads] = reply["frames"] - local  # the other machines' frames
            state["last_sync"] = time.time() - t0
            return reply["stop"]

        if exchange(initial=True):
            return {"node": self.node, "frames": 0}
        procs = Processes(mp.get_context("spawn"), cfg, self.spec, shared, local_dir, self.threads, time.time(),
                          -math.inf, [], with_evaluator=False)
        procs.start()
        next_sync, next_ship = time.time() + cfg.sync_seconds, time.time() + LOG_SHIP_SECONDS
        try:
            while not procs.finished():
                failure = procs.check()
                if failure:
                    raise RuntimeError(failure)
                now = time.time()
                if now >= next_sync:
                    if exchange():
                        shared.set(STOP)
                    next_sync = time.time() + cfg.sync_seconds
                if now >= next_ship:
                    self.holder.append_logs.remote(self.node, shipper.new_bytes())
                    next_ship = now + LOG_SHIP_SECONDS
                time.sleep(0.05)
        finally:
            procs.stop(wait_for_eval=False)
        exchange()  # what the workers learnt since the last exchange
        ray.get(self.holder.append_logs.remote(self.node, shipper.new_bytes()), timeout=SYNC_TIMEOUT)
        return {"node": self.node, "frames": state["reported"]}


class Evaluator:
    """Plays evaluation games from the global weights, on CUDA where the actor was given a GPU."""

    def __init__(self, cfg: Config, spec: EnvSpec):
        torch.set_num_threads(1)
        self.cfg, self.actor_critic = cfg, cfg.algo == "a3c"
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.net = _network(cfg, spec).to(self.device)
        self.env = make_env(cfg, cfg.seed + EVAL_SEED_OFFSET, for_eval=True)
        self.rng = np.random.default_rng(cfg.seed + EVAL_SEED_OFFSET)

    def evaluate(self, weights, frames: int) -> dict:
        if not np.isfinite(weights).all():
            raise RuntimeError(f"non-finite global weights at global frame {frames}")
        _assign(list(self.net.parameters()), torch.from_numpy(np.array(weights)).to(self.device))
        t0 = time.time()
        returns = [play_episode(self.net, self.env, self.actor_critic, self.cfg.eval_epsilon, self.device,
                                self.rng)[0] for _ in range(self.cfg.eval_episodes)]
        return {"frames": frames, "mean_return": float(np.mean(returns)), "std_return": float(np.std(returns)),
                "episodes": len(returns), "device": self.device.type, "seconds": time.time() - t0}


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
    start = {"model": None, "target": None, "frames": 0, "target_epoch": 0, "evals": [], "best": -math.inf,
             "wall_seconds": 0.0}
    if resume is None:
        return start
    ckpt = load_checkpoint(run_dir / "checkpoint.pt", cfg.game, cfg.algo)
    old = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
    if int(ckpt["frames"]) >= cfg.frames:
        raise ConfigError(f"run {run_dir} already has {ckpt['frames']} frames; raise --frames to continue it")
    return {"model": ckpt["model"], "target": ckpt.get("target"), "frames": int(ckpt["frames"]),
            "target_epoch": int(ckpt.get("target_epoch", 0)), "evals": old.get("evals", []),
            "best": float(ckpt.get("best_eval_return", -math.inf)),
            "wall_seconds": float(old.get("wall_seconds", 0.0))}


def _say(run_dir: Path, line: str) -> None:
    """A cluster event: on stderr and in <run_dir>/cluster.log."""
    tqdm.write(line, file=sys.stderr)
    with open(run_dir / "cluster.log", "a") as f:
        f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")


def run_cluster(cfg: Config, resume: str | None) -> int:
    """The driver of a cluster run; returns the exit status like runner.run."""
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
            actor = Pool.options(num_cpus=threads, scheduling_strategy=on(nid)).remote(cfg, spec, name, threads,
                                                                                       holder)
            pools[nid] = (actor, actor.run.remote())
            _say(run_dir, f"{name} joined with {threads} workers")

    signal.signal(signal.SIGTERM, on_sigterm)
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
