"""How the tools show what they found, once: a number or a spread over runs as text, matplotlib figures, and a
report written whole or not at all."""

import statistics
from pathlib import Path

from hogwild_dqn.files import atomic_bytes, atomic_write


def fmt(v, spec: str = ".1f") -> str:
    """A number in a table, or a dash where there is none."""
    return "—" if v is None else format(v, spec)


def spread(values: list) -> str:
    """mean ± std of the values there are, as every table gives scores over seeds or runs: one value alone has
    no std, none is "—", and "(k of n runs)" says when some of the values are missing (None)."""
    there = [v for v in values if v is not None]
    if not there:
        return "—"
    text = fmt(there[0]) if len(there) == 1 else f"{statistics.mean(there):.1f} ± {statistics.stdev(there):.1f}"
    return text + (f" ({len(there)} of {len(values)} runs)" if len(there) < len(values) else "")


def seeds_said(n: int) -> str:
    """"1 seed", "3 seeds"."""
    return f"{n} seed{'s' * (n != 1)}"


def pyplot():
    """matplotlib's pyplot on its files-only backend (no display), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, out: Path, dpi: int = 100) -> None:
    """Lay a figure out, write it to `out` whole or not at all (a failed write keeps the figure that was there:
    WriteFailed) and free it."""
    out = Path(out)
    try:
        fig.tight_layout()
        atomic_write(out, lambda f: fig.savefig(f, dpi=dpi, format=out.suffix[1:].lower() or None))
    finally:
        pyplot().close(fig)


def write_text(path: Path, text: str) -> None:
    """A tool's text output (a report, the README) written whole or not at all: WriteFailed keeps the old one."""
    atomic_bytes(text.encode(), Path(path))
