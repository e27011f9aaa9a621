"""Optional native kernels: C sources shipped with the package, built on first use.

A few inner loops (SSIM over many pairs) are bound by memory passes when written
as numpy expressions; one fused C loop per pair is 2–4× faster. Rather than a
compiled extension (which would make every install need a compiler), the C source
is compiled once with the system compiler (``$CC`` or ``cc``) into a per-user cache
(``$RETEST_CACHE_DIR``, else ``$XDG_CACHE_HOME/retest``, else ``~/.cache/retest``)
and loaded with :mod:`ctypes`, whose calls release the GIL. The cache key covers the
source, the flags, the compiler and the CPU, so a shared home directory never
loads a library built for another machine. Without a compiler — or with
``RETEST_NATIVE=0`` — :func:`load` returns ``None`` and callers use their numpy
path; results agree either way (the tests check both).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = ["cache_dir", "function", "load", "unavailable_reason"]

_FLAGS = ("-O3", "-march=native", "-std=c99", "-shared", "-fPIC")
_FALLBACK_FLAGS = ("-O3", "-std=c99", "-shared", "-fPIC")
_lock = threading.Lock()
_loaded: dict[str, ctypes.CDLL | None] = {}
_why: dict[str, str] = {}


def cache_dir() -> Path:
    """Where compiled kernels are kept (created on demand)."""
    if d := os.environ.get("RETEST_CACHE_DIR"):
        return Path(d) / "native"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "retest" / "native"


def _cpu_signature() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor()
    keep = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))]
    return "\n".join(sorted(set(keep)))


def _key(source: bytes, cc: str) -> str:
    h = hashlib.sha256(source)
    for part in (cc, " ".join(_FLAGS), platform.machine(), _cpu_signature()):
        h.update(b"\0" + part.encode())
    return h.hexdigest()[:20]


def _compile(src: Path, out: Path, cc: str) -> str | None:
    """Build ``out`` atomically; ``None`` on success, else the compiler's complaint."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        err = ""
        for flags in (_FLAGS, _FALLBACK_FLAGS):  # -march=native is not universal
            run = subprocess.run(
                [cc, *flags, "-o", tmp, str(src)],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if run.returncode == 0:
                os.replace(tmp, out)
                return None
            err = (run.stderr.strip().splitlines() or ["failed"])[-1]
        return f"{cc} failed: {err}"
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load(name: str) -> ctypes.CDLL | None:
    """The compiled library for ``retest/<name>.c``, or ``None`` if it cannot be built.

    Compiles at most once per process and source version; concurrent processes may
    both compile, and the atomic rename makes either result valid.
    """
    with _lock:
        if name in _loaded:
            return _loaded[name]
        lib, why = _build_and_load(name)
        _loaded[name] = lib
        if why:
            _why[name] = why
        return lib


def _build_and_load(name: str) -> tuple[ctypes.CDLL | None, str]:
    if os.environ.get("RETEST_NATIVE", "1").strip().lower() in ("0", "no", "false"):
        return None, "disabled by RETEST_NATIVE=0"
    cc = os.environ.get("CC") or "cc"
    if shutil.which(cc) is None:
        return None, f"no C compiler found (looked for {cc!r}; set CC or install gcc)"
    src = Path(__file__).parent / f"{name}.c"
    out = cache_dir() / f"{Path(name).name}-{_key(src.read_bytes(), cc)}.so"
    if not out.exists():
        try:
            complaint = _compile(src, out, cc)
        except (OSError, subprocess.SubprocessError) as exc:
            complaint = f"could not compile {src.name} into {out.parent}: {exc}"
        if complaint:
            return None, complaint
    try:
        return ctypes.CDLL(str(out)), ""
    except OSError as exc:
        return None, f"could not load {out}: {exc}"


def function(lib: ctypes.CDLL, name: str, argtypes: list[Any]) -> Any:
    """``lib.<name>`` with its ctypes argument types set (returns void)."""
    fn = getattr(lib, name)
    fn.argtypes = argtypes
    fn.restype = None
    return fn


def unavailable_reason(name: str) -> str:
    """Why :func:`load` returned ``None`` for ``name`` ('' if it did not)."""
    load(name)
    return _why.get(name, "")
