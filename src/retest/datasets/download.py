"""Hash-checked, resumable-by-idempotence downloads and safe archive extraction.

Small functions with one job each (the torchvision ``datasets/utils.py`` shape):
:func:`calculate_sha256`, :func:`check_integrity`, :func:`download_url`,
:func:`extract_archive`. Only the standard library talks to the network
(``urllib``), so nothing here needs ``requests``.

A download streams into a temporary file in the target directory, is hashed while
it streams, and only replaces the target with :func:`os.replace` once the hash is
right: an interrupted run never leaves a half-written file under the final name.

:class:`HashCache` remembers verified hashes under retest's own cache folder
(:func:`cache_dir`), never next to the data: a dataset may live in a folder
retest must not write to (a distribution package's ``/usr/share/datasets/…``).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from retest._atomic import atomic_write_bytes
from retest._progress import ProgressCallback, report
from retest.errors import ConfigError, DataIntegrityError, RetestError

__all__ = [
    "ARCHIVE_EXTRACTORS",
    "DownloadError",
    "HashCache",
    "atomic_write_bytes",
    "cache_dir",
    "calculate_sha256",
    "check_integrity",
    "copy_atomic",
    "download_url",
    "extract_archive",
    "is_retryable",
]

logger = logging.getLogger(__name__)

_CHUNK = 1 << 20
USER_AGENT = "retest-downloader/0.1 (+https://github.com/modestyachts)"


class DownloadError(RetestError):
    """A URL could not be fetched after all retries (or failed permanently)."""

    def __init__(self, message: str, *, url: str, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


def calculate_sha256(path: str | os.PathLike[str], *, chunk_size: int = _CHUNK) -> str:
    """Hex sha256 of a file, read in chunks (constant memory).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x"
    >>> _ = p.write_bytes(b"abc")
    >>> calculate_sha256(p)[:16]
    'ba7816bf8f01cfea'
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_size):
            h.update(chunk)
    return h.hexdigest()


def check_integrity(path: str | os.PathLike[str], sha256: str | None = None) -> bool:
    """True if ``path`` is a file and (when ``sha256`` is given) its hash matches."""
    p = Path(path)
    if not p.is_file():
        return False
    if sha256 is None:
        return True
    return calculate_sha256(p) == sha256.lower()


def cache_dir() -> Path:
    """retest's cache folder: ``$RETEST_CACHE_DIR`` or ``~/.cache/retest``."""
    env = os.environ.get("RETEST_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "retest"


class HashCache:
    """sha256 per file of a folder, keyed by (size, mtime_ns), so unchanged files
    are not hashed again.

    Kept in ``cache_dir()/sha256/<hash of the folder's resolved path>.json``: the
    folder itself is only read. A cache that cannot be written is kept in memory.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        key = hashlib.sha256(str(self.root.resolve()).encode()).hexdigest()[:24]
        self.path = cache_dir() / "sha256" / f"{key}.json"
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            data = {}
        self._data: dict[str, list[Any]] = data if isinstance(data, dict) else {}
        self._dirty = False

    def sha256(self, path: str | os.PathLike[str]) -> str:
        p = Path(path)
        st = p.stat()
        key = p.relative_to(self.root).as_posix()
        hit = self._data.get(key)
        if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
            return str(hit[2])
        digest = calculate_sha256(p)
        self._data[key] = [st.st_size, st.st_mtime_ns, digest]
        self._dirty = True
        return digest

    def save(self) -> None:
        if not self._dirty:
            return
        try:
            atomic_write_bytes(self.path, json.dumps(self._data).encode())
        except OSError:  # unwritable cache folder: keep the hashes in memory
            pass
        self._dirty = False


def is_retryable(err: BaseException) -> bool:
    """Transient failures worth another try: 5xx, 408, 429, timeouts, resets."""
    if isinstance(err, urllib.error.HTTPError):
        return err.code >= 500 or err.code in (408, 429)
    return isinstance(
        err, (urllib.error.URLError, TimeoutError, ConnectionError, OSError)
    )


def _stream_to_temp(
    url: str,
    root: Path,
    name: str,
    *,
    timeout: float,
    progress: ProgressCallback | None,
) -> tuple[Path, str]:
    """Fetch ``url`` into a temp file in ``root``; return (temp path, sha256)."""
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    fd, tmp_name = tempfile.mkstemp(dir=root, prefix=f".{name}.", suffix=".part")
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    try:
        with (
            os.fdopen(fd, "wb") as out,
            urllib.request.urlopen(req, timeout=timeout) as resp,
        ):
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            done = 0
            report(progress, name, 0, total)
            while chunk := resp.read(_CHUNK):
                out.write(chunk)
                h.update(chunk)
                done += len(chunk)
                report(progress, name, done, total)
        if total is not None and done != total:
            raise ConnectionError(f"connection closed after {done} of {total} bytes")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp, h.hexdigest()


def download_url(
    url: str,
    root: str | os.PathLike[str],
    filename: str | None = None,
    sha256: str | None = None,
    *,
    retries: int = 3,
    backoff: float = 1.0,
    timeout: float = 60.0,
    progress: ProgressCallback | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Path:
    """Download ``url`` to ``root/filename`` unless a verified copy is already there.

    Parameters
    ----------
    url : str
        Source URL (``http``, ``https`` or ``file``).
    root : path
        Target directory, created if needed.
    filename : str, optional
        Target file name; defaults to the last URL path component.
    sha256 : str, optional
        Expected hex digest. With it, an existing file is reused only if it
        matches, and a fresh download must match or :class:`DataIntegrityError`
        is raised. Without it, an existing file is reused as is.
    retries : int, default=3
        Extra attempts after a transient failure (see :func:`is_retryable`).
    backoff : float, default=1.0
        First wait in seconds; doubles after every failure (1, 2, 4, ...).
    timeout : float, default=60.0
        Socket timeout per attempt, seconds.
    progress : ProgressCallback, optional
        Called as ``progress(filename, bytes_done, bytes_total_or_None)``.
    sleep : callable, default=time.sleep
        Injected so tests need not wait.

    Returns
    -------
    Path
        The verified file.
    """
    root_p = Path(root)
    name = filename or Path(urllib.request.url2pathname(url.split("?")[0])).name
    if not name:
        raise ConfigError(f"cannot derive a file name from URL {url!r}; pass filename.")
    target = root_p / name
    if check_integrity(target, sha256):
        logger.info("Using downloaded and verified file: %s", target)
        return target
    root_p.mkdir(parents=True, exist_ok=True)
    wait = backoff
    for attempt in range(retries + 1):
        try:
            tmp, digest = _stream_to_temp(
                url, root_p, name, timeout=timeout, progress=progress
            )
            break
        except urllib.error.HTTPError as err:
            if not is_retryable(err) or attempt == retries:
                raise DownloadError(
                    f"download of {url} failed: HTTP {err.code} {err.reason} "
                    f"(after {attempt + 1} attempt(s)).",
                    url=url,
                    status=err.code,
                ) from err
            last: BaseException = err
        except (OSError, http.client.HTTPException) as err:
            if attempt == retries:
                raise DownloadError(
                    f"download of {url} failed after {attempt + 1} attempt(s): {err}.",
                    url=url,
                ) from err
            last = err
        logger.warning("retrying %s in %.0f s after: %s", url, wait, last)
        sleep(wait)
        wait *= 2
    if sha256 is not None and digest != sha256.lower():
        tmp.unlink(missing_ok=True)
        raise DataIntegrityError(
            f"{name} downloaded from {url} has sha256 {digest}, expected {sha256}. "
            "The server copy differs from the published one; retry later or pass the "
            "file with a local path."
        )
    os.replace(tmp, target)
    return target


# ---------------------------------------------------------------------------- archives


def _safe_dest(dest: Path, member: str) -> Path:
    resolved = (dest / member).resolve()
    if resolved != dest and dest not in resolved.parents:
        raise DataIntegrityError(
            f"archive member {member!r} would be written outside {dest}; refusing to "
            "extract (path traversal)."
        )
    return resolved


def _extract_tar(archive: Path, dest: Path) -> list[str]:
    names: list[str] = []
    with tarfile.open(archive, "r:*") as tf:
        members = tf.getmembers()
        for m in members:
            _safe_dest(dest, m.name)
            if m.issym() or m.islnk():
                raise DataIntegrityError(
                    f"archive {archive.name} contains link member {m.name!r}; "
                    "links are not extracted for safety."
                )
            if not (m.isfile() or m.isdir()):
                raise DataIntegrityError(
                    f"archive {archive.name} contains special member {m.name!r}."
                )
        if hasattr(tarfile, "data_filter"):
            tf.extractall(dest, members=members, filter="data")
        else:
            # Python 3.11.0-3.11.3 (Debian 12's 3.11.2) predate extraction filters;
            # the checks above already refuse what the "data" filter would.
            tf.extractall(dest, members=members)
        names = [m.name for m in members if m.isfile()]
    return names


def _extract_zip(archive: Path, dest: Path) -> list[str]:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        for info in infos:
            _safe_dest(dest, info.filename)
        zf.extractall(dest)
        return [i.filename for i in infos if not i.is_dir()]


ARCHIVE_EXTRACTORS: dict[str, Callable[[Path, Path], list[str]]] = {
    ".tar.gz": _extract_tar,
    ".tgz": _extract_tar,
    ".tar.bz2": _extract_tar,
    ".tar.xz": _extract_tar,
    ".tar": _extract_tar,
    ".zip": _extract_zip,
}


def extract_archive(
    archive: str | os.PathLike[str],
    dest: str | os.PathLike[str] | None = None,
    *,
    remove: bool = False,
) -> list[str]:
    """Extract a tar/tar.gz/tgz/tar.bz2/tar.xz/zip archive into ``dest``.

    Members that would land outside ``dest`` (``../`` or absolute paths) and link
    or device members are refused with :class:`DataIntegrityError` before anything
    is written. Returns the extracted file names (archive-relative).
    """
    src = Path(archive)
    lower = src.name.lower()
    suffix = next((s for s in ARCHIVE_EXTRACTORS if lower.endswith(s)), None)
    if suffix is None:
        raise ConfigError(
            f"unknown archive type for {src.name}: expected one of "
            f"{', '.join(ARCHIVE_EXTRACTORS)}."
        )
    out = Path(dest) if dest is not None else src.parent
    out.mkdir(parents=True, exist_ok=True)
    out = out.resolve()
    try:
        names = ARCHIVE_EXTRACTORS[suffix](src, out)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as err:
        raise DataIntegrityError(
            f"archive {src} is corrupt or truncated ({err}); delete it and download "
            "it again."
        ) from err
    if remove:
        src.unlink()
    return names


def copy_atomic(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """Copy a file via a temp file in the destination directory and ``os.replace``."""
    d = Path(dst)
    d.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d.parent, prefix=f".{d.name}.", suffix=".part")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, d)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return d
