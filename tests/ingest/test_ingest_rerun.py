"""Adding a source that was already ingested says so and changes nothing.

A rerun of a complete job (same kind, path, options) must not report the earlier
run's candidates as new, and must not rename the job or its candidates; another
``--name`` for the same job is a one-line error naming the existing name.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from retest.cli.main import app
from retest.project import Project

runner = CliRunner()


def _run(*args: str, code: int = 0):
    r = runner.invoke(app, list(args))
    assert r.exit_code == code, (r.stdout, r.stderr)
    return r


def _sources(root: Path) -> dict[str, int]:
    with Project.open(root) as proj:
        rows = list(proj.store.candidates.iter())
    out: dict[str, int] = {}
    for r in rows:
        out[r.source] = out.get(r.source, 0) + 1
    return out


def test_rerun_of_a_finished_ingest(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    imgs = rng.integers(0, 256, (61, 8, 8), dtype=np.uint8)
    imgs[60] = imgs[0]  # one exact duplicate within the file
    np.savez(tmp_path / "big.npz", images=imgs, labels=np.arange(61) % 2)
    root = tmp_path / "p"
    p = ("--project", str(root))
    _run("init", str(root), "--classes", "a,b")
    add = ("source", "add", "arrays", str(tmp_path / "big.npz"))
    first = json.loads(_run(*add, "--name", "big", "--batch-size", "16", *p,
                            "--json").stdout)  # fmt: skip
    assert (first["new"], first["duplicates"], first["already_ingested"]) == (
        60,
        1,
        False,
    )
    db = (root / "retest.db").read_bytes()

    again = _run(*add, "--name", "big", "--batch-size", "16", *p)
    text = " ".join(again.stdout.split())
    assert "already ingested" in text and first["job"] in text, text
    assert "0 new this run" in text and "60 new candidates" in text, text
    assert "1 exact duplicates" in text, text
    # without --name the job keeps its name; --json marks the rerun
    rerun = json.loads(_run(*add, "--batch-size", "16", *p, "--json").stdout)
    assert rerun["already_ingested"] and rerun["name"] == "big"
    assert (rerun["new"], rerun["duplicates"]) == (60, 1)

    # another name for the same job: refused, naming the name it has
    r = _run(*add, "--name", "big2", "--batch-size", "16", *p, code=2)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "'big'" in lines[0] and "big.npz" in lines[0], lines[0]
    listed = json.loads(_run("source", "list", *p, "--json").stdout)
    assert [(j["name"], j["new"], j["complete"]) for j in listed] == [("big", 60, True)]
    assert _sources(root) == {"big": 60}
    assert (root / "retest.db").read_bytes() == db
