"""Ctrl-C in a terminal during ``retest dedup --workers 2``: one line, exit 130.

A terminal sends SIGINT to the whole foreground process group, the local Dask
workers included. They used to die with tracebacks, the run then failed on lost
workers (or Dask printed its shutdown WARNING lines after the interrupt line).
Now the workers ignore Ctrl-C, the command stops, closes the cluster quietly and
prints the one line saying how to resume; the checkpointed chunks are kept and
the rerun's neighbours equal an uninterrupted run's.

The real CLI runs in its own session (a stand-in for the terminal's process
group) with a real LocalCluster; SIGINT goes to the group once the first
checkpoint is in the store (the workers are up and working): a condition, not a
sleep. Every wait has a deadline.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_dedup_dask_cli_kill import (  # type: ignore[import-not-found]
    N_CAND,
    _checkpoints,
    _dedup_cmd,
    _make_project,
    _neighbours,
)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None,
    reason="dask.distributed is not installed",
)

CHUNK = 10  # 36 checkpoints: the run is still going when the first one lands
DEADLINE = 180.0


def _sigint_default() -> None:
    # a terminal's command gets Ctrl-C; one started from a background job (CI
    # under nohup or `&`) inherits SIGINT ignored and would never see it
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_ctrl_c_of_dedup_with_workers_is_one_line_and_resumes(tmp_path: Path) -> None:
    root, local = tmp_path / "proj", tmp_path / "local"
    _make_project(root).close()
    shutil.copytree(root, local)
    cmd = [*_dedup_cmd(root, "--workers", "2"), "--chunk-size", str(CHUNK)]
    err = tmp_path / "stderr.txt"
    with err.open("wb") as fh:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=fh, start_new_session=True,
            preexec_fn=_sigint_default,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + DEADLINE
        while _checkpoints(root) < 1:
            assert proc.poll() is None, err.read_text()
            assert time.monotonic() < deadline, "no checkpoint in time"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        code = proc.wait(timeout=DEADLINE)
        deadline = time.monotonic() + 60
        while not _group_gone(proc.pid):  # workers and nannies exit too
            assert time.monotonic() < deadline, "worker processes left running"
            time.sleep(0.05)
    finally:
        if proc.poll() is None or not _group_gone(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    # the progress bars as they stood, then one line; no Dask warning, no traceback
    bars = ("knn shards ", "dedup ")
    lines = [
        ln
        for ln in err.read_text().splitlines()
        if ln.strip() and not ln.startswith(bars)
    ]
    assert code == 130, err.read_text()
    assert len(lines) == 1, err.read_text()
    assert lines[0].startswith("interrupted: rerun `retest dedup --project ")
    assert "--workers 2" in lines[0] and lines[0].endswith("to resume")
    done = _checkpoints(root)
    n_chunks = -(-N_CAND // CHUNK)
    assert 1 <= done < n_chunks, done  # interrupted mid-run, checkpoints kept

    rerun = subprocess.run(
        [*_dedup_cmd(root), "--chunk-size", str(CHUNK)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert rerun.returncode == 0, rerun.stderr
    full = subprocess.run(
        [*_dedup_cmd(local), "--chunk-size", str(CHUNK)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert full.returncode == 0, full.stderr
    assert _neighbours(root) == _neighbours(local)
