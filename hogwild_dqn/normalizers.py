"""Running statistics that standardize what a network reads or learns: observations (--obs-normalize) and
returns (--value-normalize). Buffers of the shared model, fed by every worker lock-free (the Hogwild contract of
shared.py), saved with the weights."""

from __future__ import annotations

import torch
from torch import nn


class RunningNorm(nn.Module):
    """Standardization by the running mean and variance of everything the workers have fed it (clipped to +-10,
    as SB3's VecNormalize). The statistics are buffers of the shared model, so the evaluator, checkpoints and
    play see the ones training used; the workers add to them (`update`) lock-free, like the weights: a batch
    lost to a race is a batch fewer in the average (a worker descheduled inside its merge loses every batch the
    others merged meanwhile: a loaded machine can lose a tenth of them)."""

    CLIP = 10.0

    def __init__(self, shape: tuple):
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x standardized in float32, in x's memory layout (channels-last frames stay so). The statistics are
        kept in float64 and applied in float32 (in float64 this cost more than the rest of a worker; even the
        statistics' own float64 arithmetic, 28k of them, took most of an acting step's normalization: docs/speed.md)."""
        scale = torch.rsqrt(self.var.float() + 1e-8)
        shift = -self.mean.float() * scale
        if x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
            # the frames' bytes in memory order and the statistics put in that order: a broadcast over (C, H, W)
            # on a channels-last batch takes torch's strided path, 4-6x slower (docs/speed.md)
            rows = x.permute(0, 2, 3, 1).reshape(len(x), -1)  # a view
            out = self._affine(rows, scale.permute(1, 2, 0).reshape(-1), shift.permute(1, 2, 0).reshape(-1))
            return out.view(len(x), *x.shape[2:], x.shape[1]).permute(0, 3, 1, 2)
        return self._affine(x, scale, shift)

    def _affine(self, x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        out = x.to(torch.float32, copy=True)  # a copy: the in-place steps below must not write into x
        return out.mul_(scale).add_(shift).clamp_(-self.CLIP, self.CLIP)

    def denormalize(self, z: torch.Tensor) -> torch.Tensor:
        """The inverse of forward (within the clip): z * std + mean, in float32."""
        return (z.double() * torch.sqrt(self.var + 1e-8) + self.mean).float()

    @torch.no_grad()
    def update(self, batch: torch.Tensor) -> None:
        """Fold a batch (rows, *shape) into the statistics (Chan et al.'s parallel merge).

        The batch's sums are taken over chunks of rows that stay in the cache (a rollout of frames is 1,024 rows
        of 28k pixels, whose float copy in one piece does not: docs/speed.md), of deviations from a copy of the
        current mean (no cancellation in the sum of squares); frames in float32, whose deviations are within
        +-255, vectors in float64. The read-merge-write runs on numpy views of the buffers, where another
        worker's update in between would lose one of the two batches (torch's small-tensor calls made that
        window longer)."""
        work = torch.float32 if batch.dtype == torch.uint8 else torch.float64
        rows = batch.reshape(len(batch), -1)
        ref = self.mean.flatten().to(work, copy=True)  # the shared mean may change while the chunks are summed
        s = torch.zeros(rows.shape[1], dtype=torch.float64)
        sq = torch.zeros_like(s)
        for chunk in rows.split(max(16, 2**18 // rows.shape[1])):  # 16 rows of frames; scalars in one piece
            d = chunk.to(work) - ref
            s += d.sum(0)
            sq += d.square_().sum(0)
        n = rows.shape[0]
        shift = (s / n).view(self.mean.shape)
        m = (ref.double().view(self.mean.shape) + shift).numpy()
        v = (sq.view(self.mean.shape) / n - shift * shift).clamp_(min=0).numpy()
        count_buf, mean_buf, var_buf = self.count.numpy(), self.mean.numpy(), self.var.numpy()
        count, mean, var = float(count_buf), mean_buf.copy(), var_buf.copy()  # one read of each
        total = count + n
        delta = m - mean
        mean_buf[...] = mean + delta * (n / total)
        var_buf[...] = (var * count + v * n + delta ** 2 * (count * n / total)) / total
        count_buf[...] = total


class ObsNorm(RunningNorm):
    """--obs-normalize: observations (vectors, or Atari frames pixel by pixel, as Sample Factory's
    normalize_input) standardized by the running statistics of every observation the workers have seen."""


class ValueNorm(RunningNorm):
    """--value-normalize: the returns the value head learns, standardized by the running statistics of every
    return the workers have computed (Sample Factory's normalize_returns, rl_games' value normalization); the
    head's outputs are on that scale, and are scaled back (`denormalize`) for the advantages. A module of the
    network (`value_norm`), saved with the weights."""


def value_norm(net: nn.Module) -> ValueNorm | None:
    """The network's return statistics, if its value head learns standardized returns."""
    return getattr(net, "value_norm", None)


def running_norms(net: nn.Module) -> list[RunningNorm]:
    """Every running statistics module of the network (--obs-normalize, --value-normalize), in a fixed order."""
    return [m for m in net.modules() if isinstance(m, RunningNorm)]


def obs_norm(net: nn.Module) -> ObsNorm | None:
    """The network's observation statistics, if it normalizes its inputs."""
    return next((m for m in net.modules() if isinstance(m, ObsNorm)), None)
