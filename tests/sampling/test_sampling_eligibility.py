"""The one eligibility decision, on a real project with pixels and a real dedup run.

Copies of originals (exact, brightened, near), within-pool groups and pending
reviews must stay out of every revision, and `status` must count what `sample`
uses. Driven through the CLI like a user, checked with the library.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from retest.cli.main import app
from retest.project import Project, candidate_eligibility, check_fresh

runner = CliRunner()


def _run(*args: str, ok: bool = True):
    r = runner.invoke(app, list(args))
    if ok:
        assert r.exit_code == 0, r.output
    return r


def _images(rng: np.random.Generator, n: int) -> np.ndarray:
    # smooth random blobs: distinct images far apart in L2
    base = rng.integers(0, 256, (n, 4, 4), dtype=np.uint8)
    return np.kron(base, np.ones((1, 4, 4), np.uint8)).astype(np.uint8)


@pytest.fixture
def project(tmp_path: Path):
    rng = np.random.default_rng(7)
    train, test = _images(rng, 60), _images(rng, 30)
    ytr, yte = np.arange(60) % 2, np.arange(30) % 2
    pool = _images(rng, 40)
    ypool = np.arange(40) % 2
    exact = train[:3]  # exact copies of training images
    bright = np.clip(test[:3].astype(int) + 6, 0, 255).astype(np.uint8)
    group = np.stack([pool[0], np.clip(pool[0].astype(int) + 3, 0, 255)]).astype(
        np.uint8
    )  # a within-pool pair
    cands = np.concatenate([pool, exact, bright, group[1:]])
    ycand = np.concatenate([ypool, ytr[:3], yte[:3], ypool[:1]])
    root = tmp_path / "p"
    _run("init", str(root), "--classes", "a,b")
    np.savez(tmp_path / "train.npz", images=train, labels=ytr)
    np.savez(tmp_path / "test.npz", images=test, labels=yte)
    np.savez(tmp_path / "pool.npz", images=cands, labels=ycand)
    p = str(root)
    _run("reference", "add", "arrays", str(tmp_path / "train.npz"), "--split", "train",
         "--project", p)  # fmt: skip
    _run("reference", "add", "arrays", str(tmp_path / "test.npz"), "--split", "test",
         "--project", p)  # fmt: skip
    _run("source", "add", "arrays", str(tmp_path / "pool.npz"), "--project", p)
    return root, {"pool": pool, "exact": exact, "bright": bright, "group": group}


def _ids(root: Path) -> dict[bytes, str]:
    with Project.open(root) as proj:
        rows = list(proj.store.candidates.iter())
        px = proj.pixels([r.id for r in rows])
    return {p.tobytes(): r.id for r, p in zip(rows, px, strict=True)}


def test_copies_and_groups_never_sampled_and_status_agrees(project) -> None:
    root, planted = project
    p = str(root)
    # before dedup, sampling is refused with the command to run
    r = _run("sample", "--strategy", "class-balanced", "--seed", "0", "--project", p,
             ok=False)  # fmt: skip
    assert r.exit_code == 1 and "retest dedup" in r.output
    assert len(r.output.strip().splitlines()) == 1
    _run("dedup", "--metrics", "l2", "--k", "5", "--project", p)
    ids = _ids(root)
    exact = {ids[x.tobytes()] for x in planted["exact"]}
    bright = {ids[x.tobytes()] for x in planted["bright"]}
    group = {ids[x.tobytes()] for x in planted["group"]}
    with Project.open(root) as proj:
        elig = candidate_eligibility(proj)
    for c in exact:
        assert elig.reasons[c][:1] == ("exact_copy",)
    for c in bright:
        assert "near_original" in elig.reasons[c]
    assert sum(1 for c in group if "pool_duplicate" in elig.reasons[c]) == 1
    excluded = exact | bright | (group - elig.kept)

    out = json.loads(
        _run(
            "sample",
            "--strategy",
            "class-balanced",
            "--per-class",
            "15",
            "--seed",
            "3",
            "--project",
            p,
            "--json",
        ).stdout
    )
    members = {m["id"] for m in out["members"]}
    assert len(members) == 30 and not members & excluded
    st = json.loads(_run("status", "--project", p, "--json").stdout)
    assert st["eligibility"]["counts"] == out["eligibility"]["counts"]
    assert (
        sum(c["eligible"] for c in st["classes"])
        == out["eligibility"]["counts"]["eligible"]
    )
    assert sum(c["sampled"] for c in st["classes"]) == 30
    one = json.loads(
        _run("status", "--candidate", sorted(exact)[0], "--project", p, "--json").stdout
    )
    assert not one["eligible"] and one["reasons"][0] == "exact_copy"

    # a later blacklist makes the revision ineligible; export refuses it
    victim = sorted(members)[0]
    with Project.open(root) as proj:
        from retest.store.rows import BlacklistEvent

        proj.store.blacklist.add([BlacklistEvent(victim, "blurry", "me")])
        assert candidate_eligibility(proj).reasons[victim][0] == "blacklisted"

    # new candidates after dedup: refused until dedup runs again
    rng = np.random.default_rng(99)
    np.savez(root.parent / "more.npz", images=_images(rng, 4), labels=np.zeros(4, int))
    _run("source", "add", "arrays", str(root.parent / "more.npz"), "--name", "more",
         "--project", p)  # fmt: skip
    r = _run("sample", "--strategy", "class-balanced", "--seed", "0", "--project", p,
             ok=False)  # fmt: skip
    assert (
        r.exit_code == 1 and "retest dedup" in r.output and "4 candidates" in r.output
    )
    _run("dedup", "--metrics", "l2", "--k", "5", "--project", p)
    with Project.open(root) as proj:
        check_fresh(proj)  # fresh again


def test_unreviewed_pairs_excluded_unless_asked(project) -> None:
    root, _ = project
    p = str(root)
    _run("dedup", "--metrics", "l2", "--k", "5", "--project", p)
    # a review target far above every distance: all candidates have pending pairs
    toml = root / "retest.toml"
    text = toml.read_text()
    assert "[thresholds]\n" in text
    toml.write_text(text.replace("[thresholds]\n", "[thresholds]\nl2 = 1e12\n"))
    with Project.open(root) as proj:
        elig = candidate_eligibility(proj)
        n = len(elig.reasons)
        # every candidate that is not already excluded as a copy waits for review
        copies = elig.excluded_by("exact_copy") | elig.excluded_by("near_original")
        assert copies and len(elig.excluded_by("unreviewed")) == n - len(copies)
        assert elig.counts()["eligible"] == 0
        let_in = candidate_eligibility(proj, include_unreviewed=True)
        assert let_in.n_unreviewed_included > 0
    r = _run("sample", "--strategy", "class-balanced", "--per-class", "5", "--seed",
             "0", "--project", p, ok=False)  # fmt: skip
    assert r.exit_code == 1 and "unreviewed" in r.output
    out = json.loads(
        _run(
            "sample",
            "--strategy",
            "class-balanced",
            "--per-class",
            "5",
            "--seed",
            "0",
            "--include-unreviewed",
            "--project",
            p,
            "--json",
        ).stdout
    )
    assert out["valid"] and out["eligibility"]["unreviewed_included"] > 0


def test_status_warns_what_sample_would_refuse(project) -> None:
    root, _ = project
    p = str(root)
    st = json.loads(_run("status", "--project", p, "--json").stdout)
    assert "retest dedup" in st["stale"]  # no dedup yet: sample would refuse
    r = _run("status", "--project", p)
    assert "retest sample` would refuse" in r.output
    _run("dedup", "--metrics", "l2", "--k", "5", "--project", p)
    assert json.loads(_run("status", "--project", p, "--json").stdout)["stale"] is None


def test_evaluate_scores_only_releasable_revisions_and_undamaged_pixels(
    project,
) -> None:
    """`retest evaluate` follows export: a revision with members that are no
    longer eligible is refused (skipped by default), and damaged pixels are never
    scored, even with --force."""
    from retest.store.artifacts import PixelArray
    from retest.store.rows import BlacklistEvent

    root, _ = project
    p = str(root)
    _run("dedup", "--metrics", "l2", "--k", "5", "--project", p)
    _run("sample", "--strategy", "class-balanced", "--per-class", "5", "--seed", "1",
         "--include-unreviewed", "--name", "r1", "--project", p)  # fmt: skip
    ev = ["evaluate", "--model", "knn-1", "--project", p, "--out", str(root / "ev")]
    _run(*ev, "-r", "r1")
    with Project.open(root) as proj:
        victim = proj.store.revisions.members("r1")[0].item_id
        proj.store.blacklist.add([BlacklistEvent(victim, "blurry", "me")])
        row = proj.store.candidates.get(victim)
        arr = PixelArray(proj.arrays_dir, str(row.array_name))
        n = int(np.prod(arr.shape))
    r = _run(*ev, "-r", "r1", ok=False)
    assert r.exit_code == 1 and "no longer eligible" in r.output and victim in r.output
    r = _run(*ev, ok=False)  # default: every revision fit to evaluate; none here
    assert r.exit_code == 1 and "no revision is fit to evaluate" in r.output
    _run(*ev, "-r", "r1", "--force")
    with open(arr.data_path, "r+b") as f:  # damage the member's stored pixels
        f.seek(int(row.array_row) * n + n // 2)
        f.write(b"\x07" * 8)
    r = _run(*ev, "-r", "r1", "--force", ok=False)
    assert r.exit_code == 1 and "content hash" in r.output and victim in r.output


def test_heavy_automatic_losses_flag_a_class_the_rule_guts() -> None:
    from retest.project import Eligibility, heavy_automatic_losses

    reasons = {f"t{i}": ("near_original",) if i < 3 else () for i in range(10)}
    reasons |= {f"s{i}": ("exact_copy", "near_original") if i < 5 else () for i in range(10)}  # fmt: skip
    reasons |= {"u0": ("near_original",)} | {f"u{i}": () for i in range(1, 20)}
    class_of = {c: {"t": 1, "s": 2, "u": 3}[c[0]] for c in reasons}
    # 30 % of class 1 taken automatically; exact copies (class 2) are copies, not
    # a sign of a loose threshold; class 3 loses 5 %
    assert heavy_automatic_losses(Eligibility(reasons), class_of) == {1: 0.3}


def test_status_of_a_candidate_by_the_short_id_retest_prints(project) -> None:
    """Messages show ids shortened to 12 characters: ``status --candidate`` takes
    a unique prefix; an original image's id or an unknown one is one line."""
    root, imgs = project
    p = str(root)
    _run("dedup", "--metrics", "l2", "--k", "5", "--project", p)
    ids = _ids(root)
    exact = ids[imgs["exact"][0].tobytes()]
    for given in (exact, exact[:12], exact[:12].upper()):
        info = json.loads(
            _run("status", "--candidate", given, "--project", p, "--json").stdout
        )
        assert info["id"] == exact and info["reasons"][0] == "exact_copy"
    cases = [("train:0", "is an original image"), ("abcdef" * 2, "is not in")]
    for given, msg in cases:
        r = _run("status", "--candidate", given, "--project", p, ok=False)
        assert r.exit_code != 0
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and msg in lines[0], r.stderr


def test_an_interrupted_dedup_run_is_refused_until_finished(project) -> None:
    """Ctrl-C in a dedup run that replaces earlier lists (here: against the
    training originals only) leaves lists of two runs; sample and status say so
    and name the command that finishes it."""
    from retest.stages.dedup import run_dedup

    root, _ = project
    p = str(root)
    _run("dedup", "--metrics", "l2", "--k", "5", "--project", p)

    def stop(task: str, done: int, total: int) -> None:
        if done == 1:
            raise KeyboardInterrupt

    with Project.open(root) as proj, pytest.raises(KeyboardInterrupt):
        run_dedup(proj, metrics=["l2"], against=["original-train"], k=5,
                  chunk_size=10, backend="numpy", progress=stop)  # fmt: skip
    cmd = "retest dedup --metrics l2 --against original-train --k 5"
    r = _run("sample", "--strategy", "class-balanced", "--per-class", "2",
             "--seed", "0", "--project", p, ok=False)  # fmt: skip
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 1 and len(lines) == 1, r.output
    assert "dedup run of l2 was interrupted" in lines[0] and cmd in lines[0]
    st = json.loads(_run("status", "--project", p, "--json").stdout)
    assert cmd in st["stale"]
    _run(*cmd.split()[1:], "--project", p)
    _run("sample", "--strategy", "class-balanced", "--per-class", "2",
         "--seed", "0", "--project", p)  # fmt: skip
