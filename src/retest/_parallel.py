"""How many cores this process may use (its CPU affinity, not the machine's count)."""

from __future__ import annotations

import os

__all__ = ["available_cpus"]


def available_cpus() -> int:
    """Cores in the process's affinity mask (containers and ``taskset`` respected)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - not on Linux
