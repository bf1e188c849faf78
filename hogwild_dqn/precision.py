"""The arithmetic of PPO's updates: float32, or bfloat16 autocast where the CPU multiplies bfloat16 in hardware.
The weights, gradients and Adam moments in shared memory stay float32 either way; with bf16 only the torso's
convolutions and matrix products (and the rollout's prepared inputs) are bfloat16 (docs/speed.md)."""

from __future__ import annotations

import functools
from pathlib import Path

# --learner-precision: auto picks bf16 on pixels where native_bf16(), else fp32. fp32 is the default: bf16 is 8%
# more frames/s at 4 epochs, but Seaquest's bf16 run stood at 1,560 at 7M frames where two fp32 runs stood at
# 2,008 and 2,088 (docs/speed.md), which a fixed batch's loss and gradients within bf16's rounding do not show.
PRECISIONS = ("auto", "bf16", "fp32")
_NATIVE_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo's names: AVX512_BF16 dot products, AMX tiles


@functools.cache
def native_bf16(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The CPU feature that multiplies bfloat16 in hardware (amx_bf16 before avx512_bf16), or None: without one
    oneDNN emulates bfloat16, slower than float32. Read from the kernel's flags (Linux); elsewhere None."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return None
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return next((f for f in reversed(_NATIVE_FLAGS) if f in flags), None)


def learner_bf16(choice: str, pixels: bool) -> bool:
    """Whether the updates run in bfloat16: --learner-precision bf16, or auto on pixels with native_bf16()
    (vector observations' small MLPs gain nothing)."""
    return choice == "bf16" or (choice == "auto" and pixels and native_bf16() is not None)


def describe(choice: str, pixels: bool) -> str:
    """The updates' precision as the start line and summary.json name it: bf16 (amx_bf16), fp32, ..."""
    if not learner_bf16(choice, pixels):
        return "fp32"
    return f"bf16 ({native_bf16()})" if choice == "auto" else "bf16"
