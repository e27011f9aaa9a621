"""Each excluded candidate is counted once, under its first reason.

An exact copy of an original is also at distance 0 from it, so it is within the
near-original threshold too: ``status`` and ``sample`` must count it once (as
``exact_copy``), or the reason counts add up to more than the excluded images.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from retest.cli.main import app
from retest.project import Project
from retest.project._eligibility import REASONS, candidate_eligibility, reasons_by_class

runner = CliRunner()


def _run(*args: str) -> str:
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def _images(rng: np.random.Generator, n: int) -> np.ndarray:
    base = rng.integers(0, 256, (n, 4, 4), dtype=np.uint8)
    return np.kron(base, np.ones((1, 4, 4), np.uint8)).astype(np.uint8)


def test_exact_copy_counted_once_and_counts_add_up(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    train, test, pool = _images(rng, 40), _images(rng, 20), _images(rng, 30)
    ytr, yte = np.arange(40) % 2, np.arange(20) % 2
    exact = train[:4]  # byte copies: distance 0, so also near-original
    near = np.clip(test[:2].astype(int) + 5, 0, 255).astype(np.uint8)
    cands = np.concatenate([pool, exact, near])
    ycand = np.concatenate([np.arange(30) % 2, ytr[:4], yte[:2]])
    root = tmp_path / "p"
    p = str(root)
    _run("init", p, "--classes", "a,b")
    for name, x, y in (("train", train, ytr), ("test", test, yte)):
        np.savez(tmp_path / f"{name}.npz", images=x, labels=y)
        _run("reference", "add", "arrays", str(tmp_path / f"{name}.npz"),
             "--split", name, "--project", p)  # fmt: skip
    np.savez(tmp_path / "pool.npz", images=cands, labels=ycand)
    _run("source", "add", "arrays", str(tmp_path / "pool.npz"), "--project", p)
    _run("dedup", "--metrics", "l2", "--k", "5", "--project", p)

    with Project.open(root) as proj:
        elig = candidate_eligibility(proj)
    both = [c for c, r in elig.excluded() if {"exact_copy", "near_original"} <= set(r)]
    assert len(both) == 4  # the premise: every exact copy is also near an original
    counts = elig.counts()
    assert counts["exact_copy"] == 4 and counts["near_original"] == 2, counts
    n_excluded = sum(1 for _ in elig.excluded())
    assert sum(counts[k] for k in REASONS) == n_excluded == 6
    assert sum(counts[k] for k in REASONS) == len(elig.reasons) - counts["eligible"]
    per_class = reasons_by_class(elig)
    assert sum(v["exact_copy"] for v in per_class.values()) == 4
    assert sum(v["near_original"] for v in per_class.values()) == 2

    st = json.loads(_run("status", "--project", p, "--json"))
    c = st["eligibility"]["counts"]
    n_cand = sum(r["candidates"] for r in st["classes"])
    assert n_cand == len(cands)
    assert sum(c[k] for k in REASONS) == n_cand - c["eligible"], c
    assert c["exact_copy"] == 4 and c["near_original"] == 2
    for row in st["classes"]:
        assert sum(row["reasons"][k] for k in REASONS) == (
            row["candidates"] - row["eligible"]
        ), row
    text = _run("status", "--project", p)
    assert "4 exact copy, 2 near original" in " ".join(text.split()), text
