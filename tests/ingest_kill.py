"""Kill an ingest mid-run in a real child process (the crash-safety tests).

``python ingest_kill.py MOMENT N -m retest ARGS...`` runs the retest CLI,
``... -c CODE ARGS...`` a Python snippet and ``... SCRIPT ARGS...`` a script, each
with :attr:`retest.stages.ingest.Ingest.fault_hook` installed to SIGKILL the process
at MOMENT of batch N (1-based): ``appended`` (pixels durable, rows not inserted) or
``inserted`` (rows inserted, batch neither logged nor checkpointed).
:func:`python` gives the command prefix that replaces ``sys.executable``.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys

APPENDED = "appended"
INSERTED = "inserted"


def python(moment: str, n: int) -> list[str]:
    """``[sys.executable, THIS, moment, n]``: a Python that dies at batch ``n``."""
    assert moment in (APPENDED, INSERTED), moment
    return [sys.executable, os.path.abspath(__file__), moment, str(n)]


def install(moment: str, n: int) -> None:
    from retest.stages.ingest import Ingest

    def kill(at: str, batch: int) -> None:
        if at == moment and batch >= n:
            os.kill(os.getpid(), signal.SIGKILL)

    Ingest.fault_hook = kill


def main(argv: list[str]) -> None:
    moment, n, *rest = argv
    install(moment, int(n))
    if rest[0] == "-m":
        sys.argv = [rest[1], *rest[2:]]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    elif rest[0] == "-c":
        sys.argv = ["-c", *rest[2:]]
        exec(compile(rest[1], "<string>", "exec"), {"__name__": "__main__"})
    else:
        sys.argv = rest
        runpy.run_path(rest[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
