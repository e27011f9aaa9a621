"""Atomic file writes shared by every layer that writes files.

A reader never sees a half-written file: data goes to a temporary file in the
same folder, is flushed to disk, then renamed over the target.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "pid_alive", "temporary_of"]

# ``.<target>.<pid>.<mkstemp's 8 random characters>.tmp``
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.(?P<pid>[0-9]+)\.[a-z0-9_]{8}\.tmp")


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes | memoryview, *, fsync: bool = True
) -> Path:
    """Write ``data`` to ``path`` atomically and return the path.

    The file gets the usual umask-based mode (``mkstemp`` alone would leave 0600),
    and with ``fsync`` the data and the folder entry are flushed before returning,
    so the write survives a crash right after it.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    # the pid in the name tells `retest check` whether the writer still runs
    prefix = f".{p.name}.{os.getpid()}."
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=prefix, suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if fsync:
        dfd = os.open(p.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return p


def temporary_of(filename: str) -> tuple[str, int] | None:
    """(target file name, writer's pid) when ``filename`` is a temporary that
    :func:`atomic_write_bytes` makes, else None: how `retest check` and a
    resumed ingest tell a killed writer's leftover from anything else."""
    m = _TEMPORARY.fullmatch(filename)
    return None if m is None else (m["name"], int(m["pid"]))


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a leftover of a dead one may go)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OverflowError:
        return False
    return True
