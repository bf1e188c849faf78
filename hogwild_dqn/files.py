"""Writing a run's files so that a failure loses nothing: every file whole or as it was (a temporary file, fsync,
rename), and a write that fails (a full disk, a file-size limit, a read-only dir) is WriteFailed, one line naming
the file, the cause and what is kept."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


class WriteFailed(RuntimeError):
    """A file of the run could not be written; the message is one line naming the file and the cause, and says
    what is kept."""


def cause(e: OSError) -> str:
    """An OSError's cause in a few words: No space left on device, File too large, ..."""
    if e.strerror:
        return e.strerror
    return os.strerror(e.errno) if e.errno else (str(e).splitlines() or [type(e).__name__])[0]


def write_failed(path: Path | str, e: OSError, kept: str | None = None) -> WriteFailed:
    """The one line of a failed write of `path`; `kept` says what is kept (default: the file as it was, or that
    none was written)."""
    path = Path(path)
    if kept is None:
        kept = f"{path.name} is left as it was" if path.exists() else f"no {path.name} was written"
    return WriteFailed(f"cannot write {path}: {cause(e)}; {kept}")


def atomic_write(path: Path, write: Callable) -> None:
    """`write(binary file)` into a temporary file in the same dir, fsync, then rename over `path`: a kill
    mid-write, or a write that fails, keeps the old file (a failure raises WriteFailed)."""
    path, tmp = Path(path), None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, _mode(path))  # mkstemp's 0600 would make every run file and report private to its owner
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        cause_ = _os_error(e)
        if cause_ is None:
            raise
        raise write_failed(path, cause_) from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


def _mode(path: Path) -> int:
    """The permissions `path` has, or a new file's usual 0644."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        return 0o644


def _os_error(e: BaseException | None) -> OSError | None:
    """The OSError behind `e` (itself, or what it was raised while handling: torch.save's zip writer turns a full
    disk into a RuntimeError about file positions), or None."""
    while e is not None and not isinstance(e, OSError):
        e = e.__cause__ or e.__context__
    return e


def atomic_bytes(data: bytes, path: Path) -> None:
    """A file of the run written whole or not at all (config.yaml, summary.json, a GIF, a record)."""
    atomic_write(path, lambda f: f.write(data))
