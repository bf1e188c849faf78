"""Draw evaluation curves kept as CSV (the files under docs/) or as run records (a run's summary.json, the
benchmark's --record files) into one figure, so the documents' figures are redrawn by a command rather than by hand.

    python -m hogwild_dqn.tools.curves docs/a.csv=LABEL [records/Game-ppo-s1.json=LABEL ...] --out fig.png
        [--x frames|wall_seconds] [--by COLUMN] [--line 18] [--title TEXT]
    python -m hogwild_dqn.tools.curves records/Game-pqn-s1.json=LABEL ... --table   # the notebooks' tables

Each CSV needs the columns `frames`, `wall_seconds` and `mean_return` (lines starting with # are skipped); a record's
rows are its `evals` (the periodic evaluations and the final one) with the record's `seed`. `--by run` splits each
input that has a column `run` into one line per value of it.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

from hogwild_dqn.commands import command
from hogwild_dqn.config import Parser
from hogwild_dqn.files import WriteFailed
from hogwild_dqn.tools.output import pyplot, save
from hogwild_dqn.tools.runs import read_json

NEEDED = ("frames", "wall_seconds", "mean_return")


class CurvesError(ValueError):
    """A missing or malformed CSV or record; printed as one line, exit 2."""


def read_csv(path: Path) -> list[dict]:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            return list(csv.DictReader(line for line in f if not line.startswith("#")))
    except (UnicodeDecodeError, csv.Error) as e:
        raise CurvesError(f"{path} is not a readable CSV ({e})") from None
    except OSError as e:  # missing, unreadable, a folder
        raise CurvesError(f"cannot read {path}: {e.strerror}") from None


def read_record(path: Path) -> list[dict]:
    """A run record's evaluations as CSV-like rows (with the record's `seed`, and `kind` periodic or final as the
    docs' CSVs have it), so the figures of a suite are drawn from its records (the files that are kept) with no CSV
    copied out of them by hand."""
    record = read_json(path)
    if record is None:
        raise CurvesError(f"{path} is not a readable JSON record")
    try:
        return [{**e, "seed": record.get("seed"), "kind": "final" if e.get("final") else "periodic"}
                for e in record["evals"]]
    except (KeyError, TypeError, AttributeError):
        raise CurvesError(f"{path} is not a run record (no list of evaluations under 'evals')") from None


def read_rows(path: Path) -> list[dict]:
    """An input's rows: a run record's evaluations (.json) or a CSV's rows."""
    if not path.is_file():
        raise CurvesError(f"{path} {'is not a file' if path.exists() else 'does not exist'}")
    return read_record(path) if path.suffix.lower() == ".json" else read_csv(path)


def read_lines(path: Path, label: str, by: str | None) -> tuple[list[tuple], bool]:
    """(label, frames, wall_seconds, mean_return) per line to draw: one, or one per value of the column `by`
    where the input has it; and whether it had it."""
    rows = read_rows(path)
    missing = [c for c in NEEDED if not rows or c not in rows[0]]
    if missing:
        raise CurvesError(f"{path} has no rows or lacks the column(s) {', '.join(missing)}")
    split = by is not None and by in rows[0]
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(f"{label} {by}={row.get(by)}" if split else label, []).append(row)
    try:
        lines = [(name, *([float(r[c]) for r in group] for c in NEEDED)) for name, group in groups.items()]
    except (KeyError, TypeError, ValueError):  # a record's missing key; a short CSV row's missing field
        raise CurvesError(f"{path}: a row with a missing value or one that is not a number") from None
    if not any(map(math.isfinite, (v for line in lines for v in line[-1]))):  # "nan" parses as a number
        raise CurvesError(f"{path}: no row has a finite mean_return to draw")
    return lines, split


def _plain(text: str) -> str:
    """A label or title as written: matplotlib reads a pair of $ as math (and fails on what is not)."""
    return text.replace("$", r"\$")


def draw(inputs: list[tuple[Path, str]], out: Path, x: str, by: str | None, line: float | None, title: str) -> int:
    """Draw every input's lines against `x` into `out`; the number of lines drawn."""
    if not out.parent.is_dir() or out.is_dir() or out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise CurvesError(f"--out {out}: needs an existing folder and a .png, .svg or .pdf name")
    read = [read_lines(path, label, by) for path, label in inputs]
    if by and not any(split for _, split in read):
        raise CurvesError(f"--by {by}: no input has a column {by}")
    lines = [drawn for found, _ in read for drawn in found]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, frames, wall, ret in lines:
        ax.plot(frames if x == "frames" else wall, ret, marker=".", label=_plain(label))
    if line is not None:
        ax.axhline(line, color="grey", ls="--", alpha=0.6)
    ax.set_xlabel("global frames" if x == "frames" else "wall time (s)")
    ax.set_ylabel("periodic evaluation, mean return")
    ax.set_title(_plain(title))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    try:
        save(fig, out)  # whole or not at all: a failed write keeps the figure that was there
    except WriteFailed as e:  # a read-only folder, a full disk
        raise CurvesError(str(e)) from None
    return len(lines)


def table(inputs: list[tuple[Path, str]]) -> str:
    """A markdown table of each input's periodic evaluations (the final one left out) at whole millions of frames,
    one row an input: the notebooks' tables of screens, printed from the records rather than typed."""
    rows = []
    for path, label in inputs:
        rows_of_input = read_rows(path)
        try:
            points = {float(r["frames"]) / 1e6: float(r["mean_return"]) for r in rows_of_input
                      if r.get("kind") != "final"}
        except (KeyError, TypeError, ValueError):
            raise CurvesError(f"{path}: a row with a missing value or one that is not a number") from None
        # an evaluation lands on the first rollout past its point: within 20,000 frames of it (2% of a million)
        rows.append((label, {round(m): v for m, v in points.items() if abs(m - round(m)) <= 0.02 and round(m) > 0}))
    millions = sorted({m for _, at in rows for m in at})
    if not millions:
        raise CurvesError("no input has a periodic evaluation at a whole million frames")
    cell = lambda v: "—" if v is None else f"{v:,.1f}" if abs(v) < 100 else f"{v:,.0f}"  # noqa: E731
    out = ["| frames (M) | " + " | ".join(map(str, millions)) + " |", "| --- |" + " --- |" * len(millions)]
    out += [f"| {label} | " + " | ".join(cell(at.get(m)) for m in millions) + " |" for label, at in rows]
    return "\n".join(out)


@command("curves", interrupted="stopped (Ctrl-C)")
def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m hogwild_dqn.tools.curves", description=__doc__.splitlines()[0])
    p.add_argument("csv", nargs="+",
                   help="PATH or PATH=LABEL: a CSV or a run record (.json); the label defaults to the file's name")
    p.add_argument("--out", type=Path, help="the PNG to write (needed but with --table)")
    p.add_argument("--table", action="store_true",
                   help="print a markdown table of the periodic evaluations at whole millions of frames instead")
    p.add_argument("--x", choices=("frames", "wall_seconds"), default="frames", help="the x axis")
    p.add_argument("--by", default=None, help="a column that splits each input that has it into one line per value")
    p.add_argument("--line", type=float, default=None, help="a horizontal reference line (a target score)")
    p.add_argument("--title", default="", help="the figure's title")
    args = p.parse_args(argv)
    if args.line is not None and not math.isfinite(args.line):
        p.error(f"--line must be a finite score, got {args.line}")
    if args.out is None and not args.table:
        p.error("the following arguments are required: --out (or --table, to print a table)")
    inputs = [(Path(path), label or Path(path).stem) for path, _, label in (a.partition("=") for a in args.csv)]
    try:
        if args.table:
            print(table(inputs))
            return 0
        n = draw(inputs, args.out, args.x, args.by, args.line, args.title)
    except CurvesError as e:
        print(f"curves: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({n} curves)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
