"""The Ray actors of a cluster run (see cluster/driver.py): holder, per-machine pool + bridge, evaluator.

Plain classes: the driver wraps them with ray.remote, and only NodePool.run and its Bridge import Ray, inside the actor.
"""

from __future__ import annotations

import collections
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import torch

from hogwild_dqn import metrics, preflight
from hogwild_dqn.algorithms import ALGORITHMS
from hogwild_dqn.checkpoint import atomic_json, atomic_save, checkpoint_state
from hogwild_dqn.config import Config
from hogwild_dqn.envs import EnvSpec
from hogwild_dqn.evaluation.games import Recorder, best_episode_gif, evaluation_player, play_games
from hogwild_dqn.evaluation.schedule import confirmation
from hogwild_dqn.evaluation.scores import confirmed, make_summary
from hogwild_dqn.faults import NonFinite
from hogwild_dqn.networks import network_for
from hogwild_dqn.normalizers import RunningNorm, running_norms
from hogwild_dqn.processes import Processes
from hogwild_dqn.rundir import Run
from hogwild_dqn.shared import STOP, all_finite, new_shared_state, sync_local, target_epoch_due

NEVER = 2**62            # a machine's workers never copy the target network: the holder's copy is pushed to them
SYNC_TIMEOUT = 60        # an exchange unanswered this long: the holder is treated as gone
LOG_SHIP_SECONDS = 5     # how often a machine sends the new bytes of its event files to the head
SYNC_WINDOW = 10_000     # exchanges the summary's median of sync_seconds is taken over (the most recent)


def _flat(params: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in params])


def _pieces(params: list[torch.Tensor], flat) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each parameter beside its part of a flat vector (in _flat's order), shaped like it."""
    flat, out, i = torch.as_tensor(flat), [], 0
    for p in params:
        out.append((p, flat[i:i + p.numel()].view(p.shape)))
        i += p.numel()
    return out


def _assign(params: list[torch.Tensor], flat) -> None:
    """Copy a flat vector into parameters in place (the one parameter copy: shared.sync_local)."""
    sync_local(params, [piece for _, piece in _pieces(params, flat)])


def moments(norms: list[RunningNorm]) -> torch.Tensor:
    """The statistics as sums, flat in float64: each one's count, sum and sum of squares. Sums add: what a
    machine's workers folded in since its last exchange is the difference of two readings, and the holder
    adds machines' differences as it adds their weight changes (a running mean and variance do not add)."""
    parts = [torch.zeros(0, dtype=torch.float64)]
    for n in norms:
        count, mean = n.count.reshape(1), n.mean.reshape(-1)
        parts += [count, mean * count, (n.var.reshape(-1) + mean * mean) * count]
    return torch.cat(parts)


@torch.no_grad()
def set_moments(norms: list[RunningNorm], flat: torch.Tensor) -> None:
    """Write sums (moments' layout) back into the statistics as count, mean and variance, in place."""
    i = 0
    for n in norms:
        k = n.mean.numel()
        count, total, squares = flat[i], flat[i + 1: i + 1 + k], flat[i + 1 + k: i + 1 + 2 * k]
        i += 1 + 2 * k
        mean = total / count if count > 0 else torch.zeros(k, dtype=torch.float64)
        var = (squares / count - mean * mean).clamp(min=0) if count > 0 else torch.ones(k, dtype=torch.float64)
        n.count.copy_(count.clamp(min=0))
        n.mean.copy_(mean.view(n.mean.shape))
        n.var.copy_(var.view(n.var.shape))


@torch.no_grad()
def rebase(params: list[torch.Tensor], sent: torch.Tensor, glob: torch.Tensor) -> None:
    """After an exchange: move the live weights by what the rest of the cluster changed (glob - sent), in place.

    An addition, not a copy of `glob` plus a delta read a moment earlier: the updates that this machine's
    workers pushed during the round trip, and any they push while this runs, stay in (an element touched by
    both at the same instant is the race Hogwild accepts everywhere, not a window of milliseconds)."""
    for p, piece in _pieces(params, glob - sent):
        p.add_(piece)


class ParameterHolder:
    """The global state of a cluster run. Ray runs its methods one at a time, so no lock is needed."""

    def __init__(self, cfg: Config, spec: EnvSpec, run_dir: str, start: dict):
        torch.set_num_threads(1)
        torch.set_flush_denormal(True)  # as every worker process (shared.run_child): the sums stay fast
        self.cfg, self.spec, self.run_dir = cfg, spec, Path(run_dir)
        torch.manual_seed(cfg.seed)
        self.net = network_for(cfg, spec)  # the checkpoint's modules; the live weights are the flat vectors
        if start["model"] is not None:
            self.net.load_state_dict(start["model"])
        self.flat = _flat(list(self.net.parameters())).clone()  # torch, so that denormals are flushed
        self.norms = running_norms(self.net)
        self.stats = moments(self.norms)  # the running statistics' sums (empty without them)
        self.tnet, self.target = None, None
        if ALGORITHMS[cfg.algo].target_network:
            self.tnet, self.target = network_for(cfg, spec), self.flat.clone()
            if start["target"] is not None:
                self.tnet.load_state_dict(start["target"])
                self.target = _flat(list(self.tnet.parameters())).clone()
        self.frames, self.target_epoch = start["frames"], start["target_epoch"]
        self.frames0, self.evals = start["frames"], list(start["evals"])
        self.wall0, self.t0 = start["wall_seconds"], time.time()
        # the median is over the last SYNC_WINDOW exchanges: all of them grew by one float an exchange (every
        # --sync-seconds) per machine for as long as the run lasted, and were sorted again at every checkpoint
        self.stop, self.node_frames = False, {}
        self.sync_seconds, self.syncs = collections.deque(maxlen=SYNC_WINDOW), 0
        self.kept = None  # (weights, frames) of a confirmed --stop-return: the run's last weights
        self.writer = metrics.make_writer(self.run_dir, "holder")
        self.recorder = Recorder(self.run_dir, self.writer, start["best"])  # the only record of the best
        self.run = Run(cfg, spec, self.run_dir, cfg.threads or 0, session_start=self.t0,
                       prior={"frames": self.frames0, "wall_seconds": self.wall0, "evals": [], "best": start["best"],
                              "lr_start": start["lr_start"],
                              "device": None})

    def exchange(self, node: str, delta, frames: int, target_epoch: int, sync_seconds: float | None,
                 stats_delta) -> dict:
        """Apply a machine's parameter change, statistics' sums and frames; answer with the global weights and
        statistics (and the target if newer)."""
        self.flat += torch.tensor(delta)  # a copy: arrays from Ray's object store are read-only
        self.stats += torch.tensor(stats_delta)
        self.frames += frames
        self.node_frames[node] = self.node_frames.get(node, 0) + frames
        epoch = None if self.target is None else target_epoch_due(self.frames, self.cfg.target_update,
                                                                  self.target_epoch)
        if epoch is not None:
            self.target[:] = self.flat
            self.target_epoch = epoch
        if sync_seconds is not None:
            self.sync_seconds.append(sync_seconds)
            self.syncs += 1
            self.writer.add_scalar(f"cluster/sync_seconds/{node}", sync_seconds, self.frames)
        newer_target = self.target is not None and target_epoch != self.target_epoch
        return {"weights": self.flat.numpy().copy(), "stats": self.stats.numpy().copy(), "frames": self.frames,
                "stop": self.stop or self.frames >= self.cfg.frames,
                "target": self.target.numpy().copy() if newer_target else None, "target_epoch": self.target_epoch}

    def weights(self) -> dict:
        """What an evaluation plays: the weights, and the running statistics' sums."""
        return {"params": self.flat.numpy().copy(), "stats": self.stats.numpy().copy()}

    def status(self) -> dict:
        return {"frames": self.frames, "evals": len(self.evals), "last_eval": self.evals[-1] if self.evals else None,
                "node_frames": dict(self.node_frames), "best": self.recorder.best}

    def request_stop(self) -> None:
        self.stop = True

    def append_logs(self, node: str, chunks: dict) -> None:
        """A machine's new event-file bytes land under <run_dir>/<node>/ (event files are append-only)."""
        for rel, data in chunks.items():
            path = self.run_dir / node / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab") as f:
                f.write(data)

    def _state(self, weights: dict, frames: int) -> dict:
        _assign(list(self.net.parameters()), weights["params"])
        stats = weights["stats"]  # the holder's own tensor, or a read-only array from Ray's store (copied)
        set_moments(self.norms, stats if isinstance(stats, torch.Tensor) else torch.from_numpy(np.array(stats)))
        if self.tnet is not None:
            _assign(list(self.tnet.parameters()), self.target)
        return checkpoint_state(self.net, self.tnet, self.cfg, self.spec,
                                {"frames": frames, "best": self.recorder.best, "target_epoch": self.target_epoch,
                                 "lr_start": self.run.prior["lr_start"]})

    def add_eval(self, result: dict, played) -> None:
        """Record an evaluation of the weights `played` (evaluation.Recorder: tensorboard, best.pt and the GIF
        the evaluator recorded at a new best); write checkpoint.pt."""
        gif = result.pop("gif", None)
        result["wall_seconds"] = round(self.wall0 + time.time() - self.t0, 2)
        self.evals.append(result)
        self.recorder.record(result, result["frames"], lambda best: self._state(played, result["frames"]), gif)
        if confirmed(self.evals):  # the run stops on these weights: they are its last, whatever is trained on
            self.kept = ({k: torch.tensor(np.array(v)) for k, v in played.items()}, result["frames"])
        self.checkpoint()

    def checkpoint(self, reason: str = "running", nodes: tuple = ()) -> dict:
        """checkpoint.pt, and summary.json next to it (so a run whose holder dies keeps its evaluations)."""
        weights, frames = self.kept or ({"params": self.flat, "stats": self.stats}, self.frames)
        if all_finite([weights["params"]]):  # never overwrite the last good checkpoint with NaN/Inf
            atomic_save(self._state(weights, frames), self.run_dir / "checkpoint.pt")
        summary = make_summary(self.run, reason, frames, self.evals, self.frames)
        sync = sorted(self.sync_seconds)
        summary["cluster"] = {"nodes": sorted(set(nodes) | set(self.node_frames)),
                              "frames_per_node": self.node_frames,
                              "sync_seconds_median": sync[len(sync) // 2] if sync else None,
                              "syncs": self.syncs, "sync_bytes": self.flat.numel() * self.flat.element_size()}
        atomic_json(summary, self.run_dir / "summary.json")
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


class Bridge:
    """A machine's side of the exchanges with the holder: what its workers learnt goes up as a delta, the global
    weights come back and are added in place (rebase), with the target network and the other machines' frames."""

    def __init__(self, node: str, threads: int, shared, holder):
        self.node, self.threads, self.shared, self.holder = node, threads, shared, holder
        self.params = list(shared.model.parameters())
        self.norms = running_norms(shared.model)
        self.target_params = None if shared.target is None else list(shared.target.parameters())
        self.base, self.reported, self.target_epoch, self.last_sync = None, 0, -1, None
        self.stats_base = None

    def exchange(self, initial: bool = False) -> bool:
        """One round trip with the holder; return whether the run is to stop."""
        import ray

        t0 = time.time()
        sent, sent_stats = _flat(self.params), moments(self.norms)
        local = int(self.shared.worker_frames[: self.threads].sum())
        delta = np.zeros_like(sent.numpy()) if initial else (sent - self.base).numpy()
        stats_delta = np.zeros_like(sent_stats.numpy()) if initial else (sent_stats - self.stats_base).numpy()
        reply = ray.get(self.holder.exchange.remote(self.node, delta, local - self.reported, self.target_epoch,
                                                    self.last_sync, stats_delta), timeout=SYNC_TIMEOUT)
        glob = torch.from_numpy(np.array(reply["weights"]))  # a writable copy
        glob_stats = torch.from_numpy(np.array(reply["stats"]))
        if initial:
            _assign(self.params, glob)
            set_moments(self.norms, glob_stats)
        else:  # the global weights plus what the workers learnt during the round trip, and since
            rebase(self.params, sent, glob)
            set_moments(self.norms, glob_stats + moments(self.norms) - sent_stats)  # the statistics alike
        self.base, self.stats_base, self.reported = glob, glob_stats, local
        if reply["target"] is not None and self.target_params is not None:
            _assign(self.target_params, np.array(reply["target"]))
            self.target_epoch = reply["target_epoch"]
        self.shared.worker_frames[self.threads] = reply["frames"] - local  # the other machines' frames
        self.last_sync = time.time() - t0
        return reply["stop"]


class Progress:
    """An actor's mark of progress, which the driver reads through `progress()` while the actor works: the driver
    starts the actor with a second thread (max_concurrency 2), so a busy actor answers and a frozen one does not."""

    def __init__(self):
        self.last = time.monotonic()

    def beat(self) -> bool:
        self.last = time.monotonic()
        return True

    def progress(self) -> float:
        """Seconds since the actor last marked progress."""
        return time.monotonic() - self.last


class NodePool(Progress):
    """One machine: its Hogwild pool of worker processes and the bridge to the holder (this actor's process)."""

    def __init__(self, cfg: Config, spec: EnvSpec, node: str, threads: int, holder, prior: dict):
        """`prior`: what the run reached before this session (rundir.no_prior's keys; frames and lr_start)."""
        super().__init__()
        self.cfg, self.spec, self.node, self.threads, self.holder = cfg, spec, node, threads, holder
        self.prior = prior

    def run(self) -> dict:
        import ray
        import torch.multiprocessing as mp

        self.beat()
        torch.set_num_threads(1)
        # the machine's own memory, as one machine's run checks it: a pool that would not fit fails with the line
        too_big = preflight.check(self.cfg, self.spec, self.threads, psutil.virtual_memory().available)
        if too_big and not self.cfg.force:
            raise RuntimeError(too_big)
        cfg = Config(**{**self.cfg.to_dict(), "target_update": NEVER})
        shared = new_shared_state(cfg, self.spec, self.threads, extra_frame_slots=1)
        local_dir = Path(tempfile.mkdtemp(prefix=f"hogwild_dqn-{self.node}-"))
        shipper = LogShipper(local_dir)
        bridge = Bridge(self.node, self.threads, shared, self.holder)
        if bridge.exchange(initial=True):
            return {"node": self.node, "frames": 0}
        procs = Processes(mp.get_context("spawn"), Run(cfg, self.spec, local_dir, self.threads, self.prior), shared,
                          with_evaluator=False)
        procs.start()
        next_sync, next_ship = time.time() + cfg.sync_seconds, time.time() + LOG_SHIP_SECONDS
        try:
            while not procs.finished():
                self.beat()
                failure = procs.check()
                if failure:  # typed, so that the driver stops the run on broken weights rather than retry
                    raise (NonFinite if procs.nonfinite else RuntimeError)(failure)
                now = time.time()
                if now >= next_sync:
                    if bridge.exchange():
                        shared.set(STOP)
                    next_sync = time.time() + cfg.sync_seconds
                if now >= next_ship:
                    self.holder.append_logs.remote(self.node, shipper.new_bytes())
                    next_ship = now + LOG_SHIP_SECONDS
                time.sleep(0.05)
        finally:
            procs.stop(wait_for_eval=False)
        bridge.exchange()  # what the workers learnt since the last exchange
        ray.get(self.holder.append_logs.remote(self.node, shipper.new_bytes()), timeout=SYNC_TIMEOUT)
        return {"node": self.node, "frames": bridge.reported}


class Evaluator(Progress):
    """Plays evaluation games from the global weights, on CUDA where the actor was given a GPU."""

    def __init__(self, cfg: Config, spec: EnvSpec):
        super().__init__()
        torch.set_num_threads(1)
        self.cfg = cfg
        self.device, self.policy, self.envs = evaluation_player(cfg, spec)

    def evaluate(self, weights, frames: int, best: float, kind: str = "periodic") -> dict:
        """Play the weights: "periodic" (--eval-episodes games; above `best`, the holder's best so far, also one
        game as a GIF, key "gif"), "final" (--final-eval-episodes games: the run's score) or "confirmation" (a
        periodic evaluation that reached --stop-return, confirmed or not over --final-eval-episodes games)."""
        self.beat()
        if not np.isfinite(weights["params"]).all():
            raise NonFinite(f"non-finite global weights at global frame {frames}")
        net = self.policy.net
        _assign(list(net.parameters()), torch.from_numpy(np.array(weights["params"])).to(self.device))
        set_moments(running_norms(net), torch.from_numpy(np.array(weights["stats"])).to(self.device))
        episodes = self.cfg.eval_episodes if kind == "periodic" else self.cfg.final_eval_episodes
        games = play_games(self.policy, self.envs, episodes, self.beat)
        played = confirmation(games, self.cfg.stop_return) if kind == "confirmation" else \
            {"final": kind == "final", **games}
        result = {"frames": frames, "device": self.device.type, **played}
        if self.cfg.video_steps and kind == "periodic" and result["mean_return"] > best:
            result["gif"] = best_episode_gif(self.policy, self.cfg, frames, self.beat)
        return result
