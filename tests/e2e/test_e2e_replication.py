"""A whole replication through the CLI, on real Fashion-MNIST with planted copies.

``retest init`` → ``reference add`` (train, test) → ``source add`` (a pool with
planted exact, 1-px shifted and brightened copies of original images and groups
of near-identical pool images) → ``dedup`` (defaults) → ``crowd tasks`` →
``crowd export`` → ``crowd import`` of an MTurk batch-results file (ten honest
simulated workers and one who selects everything) → ``crowd import`` of the same
file downloaded again after the spammer's work was rejected → ``sample``
(matched-frequency and class-balanced) → ``export``; then ``status``.

The project is built once by CLI calls only; the library is used to write input
files and to read results for the checks. What must hold: no planted copy in any
revision or export, at most one image of a near-identical group per revision,
rejected work not counted, ``status`` agreeing with ``sample``, and ``sample``
refusing candidates that arrived after the last ``dedup``.
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mturk import CLASS_NAMES, HONEST, reviewed, write_csv, write_results
from typer.testing import CliRunner

pytestmark = pytest.mark.slow

GRID, CONTROLS = 64, 20  # 24 candidates + 20 originals of the class + 20 of another
PER_CLASS_MATCHED, PER_CLASS_BALANCED = 8, 12


@dataclass
class Replication:
    """The finished project, its inputs (``conftest.Inputs``) and every CLI call's
    result (``conftest.Run``)."""

    root: Path
    project: Path
    inputs: Any
    run_cli: Any
    runs: dict[str, Any] = field(default_factory=dict)
    results_first: Path | None = None
    results_second: Path | None = None
    spammer: str = ""
    revisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    exports: dict[str, Path] = field(default_factory=dict)
    freq_first_import: dict[Any, Any] = field(default_factory=dict)

    def cli(self, key: str, *args: str, ok: bool = True) -> Any:
        r = self.run_cli(*args, "--project", str(self.project), cwd=self.root)
        self.runs[key] = r
        if ok:
            assert r.returncode == 0, r.describe()
        return r


# ------------------------------------------------------------------ MTurk results


def _class_names() -> list[str]:
    return list(CLASS_NAMES)


# ------------------------------------------------------------------ the project


@pytest.fixture(scope="module")
def rep(
    tmp_path_factory: pytest.TempPathFactory, fm_inputs: Any, retest_cli: Any
) -> Replication:
    root = tmp_path_factory.mktemp("e2e")
    inputs = fm_inputs
    rep = Replication(root, root / "fm-replication", inputs, retest_cli)
    init = retest_cli(
        "init", str(rep.project), "--classes-from", "fashion-mnist", cwd=root
    )
    assert init.returncode == 0, init.describe()
    rep.runs["init"] = init
    d = inputs.train_file.parent
    rep.cli("reference train", "reference", "add", "idx", str(inputs.train_file),
            "--labels", str(d / "train-labels-idx1-ubyte.gz"), "--split", "train")  # fmt: skip
    rep.cli("reference test", "reference", "add", "idx", str(inputs.test_file),
            "--labels", str(d / "t10k-labels-idx1-ubyte.gz"), "--split", "test")  # fmt: skip
    rep.cli("source add", "source", "add", "arrays", str(inputs.pool_file), "--json")
    rep.cli("dedup", "dedup", "--json")
    rep.cli("crowd tasks", "crowd", "tasks", "--images-per-task", str(GRID),
            "--controls", str(CONTROLS), "--seed", "3", "--json")  # fmt: skip
    batch = root / "mturk-batch"
    rep.cli("crowd export", "crowd", "export", "--out", str(batch),
            "--base-url", "https://example.org/fashion")  # fmt: skip
    known = np.concatenate([inputs.pool, inputs.test])
    known_labels = np.concatenate([inputs.pool_labels, inputs.test_labels])
    rows, rep.spammer = write_results(batch, known, known_labels)
    rep.results_first = write_csv(root / "Batch_5237716_batch_results.csv", rows)
    rep.cli("crowd import 1", "crowd", "import", str(rep.results_first), "--json")
    rep.results_second = write_csv(
        root / "Batch_5237716_batch_results (1).csv", reviewed(rows, rep.spammer)
    )
    with _project(rep) as proj:  # read-only: the votes counted after the first import
        from retest.project import selection_frequencies

        rep.freq_first_import = selection_frequencies(proj)
    rep.cli("crowd import 2", "crowd", "import", str(rep.results_second), "--json")
    for strategy, per_class in (
        ("matched-frequency", PER_CLASS_MATCHED),
        ("class-balanced", PER_CLASS_BALANCED),
    ):
        r = rep.cli(f"sample {strategy}", "sample", "--strategy", strategy,
                    "--per-class", str(per_class), "--seed", "11",
                    "--include-unreviewed", "--keep-invalid", "--json",
                    ok=False)  # fmt: skip
        assert r.stdout.strip(), r.describe()
        rep.revisions[strategy] = json.loads(r.stdout)
        out = root / "release" / strategy
        r = rep.cli(f"export {strategy}", "export", rep.revisions[strategy]["name"],
                    "--out", str(out), "--json", ok=False)  # fmt: skip
        if r.returncode != 0:
            # refused (checked in its own test); the pixels are still checked
            out = root / "release-forced" / strategy
            rep.cli(f"export --force {strategy}", "export",
                    rep.revisions[strategy]["name"], "--out", str(out), "--force",
                    "--json")  # fmt: skip
        rep.exports[strategy] = out
    # shown with `pytest -s`: where the time goes
    print("\n".join(f"{k:>28}: {r.seconds:5.1f} s" for k, r in rep.runs.items()))
    return rep


def _project(rep: Replication):
    from retest.project import Project

    return Project.open(rep.project)


def _candidate_ids(rep: Replication) -> dict[bytes, str]:
    """Pixel bytes → candidate id, read from the project."""
    with _project(rep) as proj:
        rows = list(proj.store.candidates.iter())
        px = proj.pixels([r.id for r in rows])
    return {
        np.asarray(p).reshape(28, 28).tobytes(): r.id
        for r, p in zip(rows, px, strict=True)
    }


def _planted_ids(rep: Replication) -> dict[str, list[Any]]:
    """kind → [(candidate id, planted record)] for the planted pool images."""
    ids = _candidate_ids(rep)
    out: dict[str, list[Any]] = defaultdict(list)
    for p in rep.inputs.planted:
        out[p.kind].append((ids[p.pixels.tobytes()], p))
    return out


def _members(rep: Replication, strategy: str) -> list[dict[str, Any]]:
    return list(rep.revisions[strategy]["members"])


def _shift_any(img: np.ndarray, dy: int, dx: int) -> np.ndarray:
    out = np.zeros_like(img)
    h, w = img.shape
    out[max(dy, 0) : h + min(dy, 0), max(dx, 0) : w + min(dx, 0)] = img[
        max(-dy, 0) : h - max(dy, 0), max(-dx, 0) : w - max(dx, 0)
    ]
    return out


def _near_original_threshold(rep: Replication) -> float:
    # CIFAR-10.1's plain L2 <= 1000 on 32x32x3, squared, per value, times 28*28
    return 1000.0**2 / 3072 * 784


# ------------------------------------------------------------------ the checks


def test_every_step_succeeds_and_revisions_are_valid(rep: Replication) -> None:
    for strategy, out in rep.revisions.items():
        run = rep.runs[f"sample {strategy}"]
        assert run.returncode == 0, run.describe()
        summary = {k: v for k, v in out.items() if k != "members"}
        assert out["valid"], json.dumps(summary)[:3000]
        per_class = (
            PER_CLASS_MATCHED if strategy == "matched-frequency" else PER_CLASS_BALANCED
        )
        counts = Counter(m["class_name"] for m in out["members"])
        assert counts == dict.fromkeys(_class_names(), per_class)
    first, second = (
        json.loads(rep.runs[k].stdout) for k in ("crowd import 1", "crowd import 2")
    )
    assert _bad_rows(first) == [] and _new_assignments(first) == 10 * (HONEST + 1)
    # the second file holds the same assignments with their review outcome: no bad
    # row, and no assignment imported a second time
    assert _bad_rows(second) == [], _bad_rows(second)[:3]
    assert _new_assignments(second) == 0, second


def _bad_rows(out: dict[str, Any]) -> list[Any]:
    rows = out.get("rejected_rows", out.get("rejected"))
    assert isinstance(rows, list), sorted(out)
    return rows


def _new_assignments(out: dict[str, Any]) -> int:
    return int(out.get("new", out.get("assignments", -1)))


def test_no_planted_copy_in_any_revision_or_export(rep: Replication) -> None:
    planted = _planted_ids(rep)
    copies = {cid: p for k in ("exact", "shift", "bright") for cid, p in planted[k]}
    assert len(copies) == 6 * 5
    refs = np.concatenate([rep.inputs.train, rep.inputs.test])
    ref_bytes = {x.tobytes() for x in refs}
    copy_bytes = {p.pixels.tobytes() for p in copies.values()}
    pixels_of = {v: k for k, v in _candidate_ids(rep).items()}
    limit = _near_original_threshold(rep)
    moved = np.stack(
        [_shift_any(x, dy, dx) for x in refs for dy, dx in ((0, 1), (0, -1), (1, 0), (-1, 0))]
    ).reshape(-1, 784).astype(np.float64)  # fmt: skip
    flat_refs = refs.reshape(-1, 784).astype(np.float64)
    for strategy in rep.revisions:
        members = _members(rep, strategy)
        leaked = sorted(
            f"{copies[m['id']].kind} copy of {copies[m['id']].of}"
            for m in members
            if m["id"] in copies
        )
        assert not leaked, f"{strategy} revision holds planted copies: {leaked}"
        out = rep.exports[strategy]
        manifest = json.loads((out / "manifest.json").read_text())
        data = np.load(next(out.glob("*_data.npy")))
        labels = np.load(next(out.glob("*_labels.npy")))
        ids = [e["item_id"] for e in manifest["images"]]
        assert sorted(ids) == sorted(m["id"] for m in members)
        assert data.shape == (len(ids), 28, 28) and data.dtype == np.uint8
        names = _class_names()
        for img, label, cid in zip(data, labels, ids, strict=True):
            assert img.tobytes() == pixels_of[cid], f"{cid}: exported pixels differ"
            assert img.tobytes() not in copy_bytes and img.tobytes() not in ref_bytes
            assert names[int(label)] == next(
                m["class_name"] for m in members if m["id"] == cid
            )
        x = data.reshape(len(data), 784).astype(np.float64)  # exact: integers < 2**53
        for block in (flat_refs, moved):
            d = (x**2).sum(1)[:, None] - 2 * x @ block.T + (block**2).sum(1)[None, :]
            near = np.argwhere(d <= limit)
            assert not len(near), (
                f"{strategy} export: {len(near)} images within squared L2 {limit:.0f} "
                f"of an original (or its 1-px shift), e.g. {ids[near[0][0]]}"
            )


def test_each_pool_group_gives_at_most_one_image(rep: Replication) -> None:
    groups: dict[str, set[str]] = defaultdict(set)
    for cid, p in _planted_ids(rep)["group"]:
        groups[p.of].add(cid)
    assert len(groups) == 6 and all(len(g) in (2, 3) for g in groups.values())
    for strategy in rep.revisions:
        ids = {m["id"] for m in _members(rep, strategy)}
        for name, g in sorted(groups.items()):
            assert len(g & ids) <= 1, f"{strategy}: {name} gives {len(g & ids)} images"


def _token_map(rep: Replication) -> dict[tuple[str, str], tuple[str, int]]:
    """(task id, token) → (item id, class id), read from the project."""
    from retest.labeling.tasks import image_token
    from retest.stages.crowd import project_secret

    out = {}
    with _project(rep) as proj:
        secret = project_secret(proj)
        for t in proj.store.tasks.list():
            for item in t.items:
                out[(t.id, image_token(f"{t.id}|{item}", secret))] = (item, t.class_id)
    return out


def _expected_frequencies(
    rep: Replication, path: Path, *, drop_worker: str | None
) -> dict[tuple[str, int], tuple[float, int]]:
    """Selection frequency and assignment count per (item, class) from a results
    file, counting every assignment except those of ``drop_worker``."""
    tokens = _token_map(rep)
    shown: Counter[tuple[str, int]] = Counter()
    chosen: Counter[tuple[str, int]] = Counter()
    for row in csv.DictReader(path.open(newline="")):
        if row["WorkerId"] == drop_worker:
            continue
        task = row["Input.task_id"]
        picked = set(row["Answer.selected"].split("|"))
        for k, tok in row.items():
            if k.startswith("Input.token_") and tok:
                key = tokens[(task, tok)]
                shown[key] += 1
                chosen[key] += tok in picked
    return {k: (chosen[k] / n, n) for k, n in shown.items()}


def _stats(freq: dict[Any, Any]) -> dict[tuple[str, int], tuple[float, int]]:
    return {k: (round(v.frequency, 9), v.n_assignments) for k, v in freq.items()}


def _rounded(d: dict[Any, tuple[float, int]]) -> dict[Any, tuple[float, int]]:
    return {k: (round(f, 9), n) for k, (f, n) in d.items()}


def test_rejected_worker_votes_do_not_count(rep: Replication) -> None:
    from retest.project import selection_frequencies

    assert rep.results_first is not None and rep.results_second is not None
    everyone = _expected_frequencies(rep, rep.results_first, drop_worker=None)
    honest = _expected_frequencies(rep, rep.results_second, drop_worker=rep.spammer)
    assert len(everyone) == 10 * GRID and everyone != honest
    # before the review every submitted vote counts, the spammer's too
    assert _stats(rep.freq_first_import) == _rounded(everyone)
    with _project(rep) as proj:
        now = _stats(selection_frequencies(proj))
    wrong = {k: (now.get(k), v) for k, v in _rounded(honest).items() if now.get(k) != v}
    assert not wrong, (
        f"{len(wrong)} of {len(honest)} (item, class) frequencies still count the "
        f"rejected worker; (stored, expected) e.g. {list(wrong.items())[:3]}"
    )
    assert set(now) == set(honest)


def test_status_agrees_with_sample(rep: Replication) -> None:
    latest = json.loads(rep.cli("status", "status", "--json").stdout)
    for strategy, out in rep.revisions.items():
        st = json.loads(
            rep.cli(f"status {strategy}", "status", out["name"], "--json").stdout
        )
        for view in (latest, st):
            e_status, e_sample = view["eligibility"], out["eligibility"]
            # every exclusion reason is counted alike ...
            assert {k: v for k, v in e_status["counts"].items() if k != "eligible"} == {
                k: v for k, v in e_sample["counts"].items() if k != "eligible"
            }
            # ... and sample let in exactly the unreviewed-only candidates on top
            assert e_sample["include_unreviewed"] and not e_status["include_unreviewed"]
            assert (
                e_sample["counts"]["eligible"]
                == e_status["counts"]["eligible"] + e_sample["unreviewed_included"]
            )
            assert (
                sum(c["eligible"] for c in view["classes"])
                == e_status["counts"]["eligible"]
            )
            assert e_status["near_original_threshold"] == pytest.approx(
                _near_original_threshold(rep)
            )
        members = Counter(m["class_name"] for m in out["members"])
        assert {c["class"]: c["sampled"] for c in st["classes"]} == {
            n: members[n] for n in _class_names()
        }
    assert latest["revision"] == rep.revisions["class-balanced"]["name"]


def _candidate_status(rep: Replication, cid: str) -> dict[str, Any]:
    from retest.cli.main import app

    r = CliRunner().invoke(
        app, ["status", "--candidate", cid, "--project", str(rep.project), "--json"]
    )
    assert r.exit_code == 0, r.output
    return dict(json.loads(r.stdout))


def test_status_of_a_planted_copy_names_its_reason(rep: Replication) -> None:
    expected = {
        "exact": {"exact_copy"},
        "shift": {"near_original", "near_duplicate"},
        "bright": {"near_original", "near_duplicate"},
    }
    problems = []
    planted = _planted_ids(rep)
    for kind, allowed in expected.items():
        for cid, p in planted[kind]:
            info = _candidate_status(rep, cid)
            if info["eligible"] or not allowed & set(info["reasons"]):
                problems.append(
                    f"{kind} copy of {p.of} ({cid[:12]}): eligible={info['eligible']} "
                    f"reasons={info['reasons']}, expected one of {sorted(allowed)}"
                )
            elif kind == "exact" and info["reasons"][0] != "exact_copy":
                problems.append(
                    f"exact copy of {p.of} ({cid}): first reason "
                    f"{info['reasons'][0]!r}, expected 'exact_copy'"
                )
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for cid, p in planted["group"]:
        groups[p.of].append(_candidate_status(rep, cid))
    for name, infos in sorted(groups.items()):
        with_original = any("near_duplicate" in i["reasons"] for i in infos)
        dropped = [
            i for i in infos if {"pool_duplicate", "near_duplicate"} & set(i["reasons"])
        ]
        kept = [i for i in infos if i["kept_from_group"]]
        if with_original:
            ok = len(dropped) == len(infos)
        else:
            ok = len(kept) == 1 and len(dropped) == len(infos) - 1
            ok = ok and "pool_duplicate" not in kept[0]["reasons"]
        if not ok:
            problems.append(
                f"{name}: " + "; ".join(
                    f"{i['id'][:12]} reasons={i['reasons']} kept={i['kept_from_group']}"
                    for i in infos
                )
            )  # fmt: skip
    assert not problems, "\n".join(problems)


def test_export_takes_the_revision_as_it_was_sampled(rep: Replication) -> None:
    """A revision sampled with --include-unreviewed, with nothing changed since,
    exports without --force: its members are as eligible as when it was drawn,
    and the export is that revision: the same ids, labels and stored pixels."""
    pixels_of = {v: k for k, v in _candidate_ids(rep).items()}
    names = _class_names()
    for strategy, revision in rep.revisions.items():
        run = rep.runs[f"export {strategy}"]
        assert run.returncode == 0, run.describe()
        out = rep.root / "release" / strategy
        assert rep.exports[strategy] == out
        members = {m["id"]: m["class_name"] for m in _members(rep, strategy)}
        reported = json.loads(run.stdout)
        assert Path(reported["out"]) == out and reported["n_images"] == len(members)
        manifest = json.loads((out / "manifest.json").read_text())
        ids = [e["item_id"] for e in manifest["images"]]
        assert len(ids) == len(set(ids)) and set(ids) == set(members), strategy
        (data_file,) = out.glob(f"{revision['name']}_data.npy")
        data = np.load(data_file)
        labels = np.load(out / f"{revision['name']}_labels.npy")
        assert data.shape == (len(ids), 28, 28) and labels.shape == (len(ids),)
        for img, label, cid in zip(data, labels, ids, strict=True):
            assert names[int(label)] == members[cid], cid
            assert img.tobytes() == pixels_of[cid], f"{cid}: exported pixels differ"


def _copy_project(rep: Replication, name: str) -> Path:
    import shutil

    dst = rep.root / name
    shutil.copytree(rep.project, dst)
    return dst


def test_review_targets_in_retest_toml_are_used(rep: Replication) -> None:
    """`[thresholds]` l2/features/dssim/warp are documented review targets: at 0
    they leave no pair to review (copies are excluded by the automatic rule)."""
    proj = _copy_project(rep, "tight-targets")
    toml = proj / "retest.toml"
    text = toml.read_text()
    assert "[thresholds]\n" in text
    toml.write_text(
        text.replace(
            "[thresholds]\n",
            "[thresholds]\nl2 = 0\nfeatures = 0\ndssim = 0\nwarp = 0\n",
        )
    )
    r = rep.run_cli("status", "--project", str(proj), "--json", cwd=rep.root)
    assert r.returncode == 0, r.describe()
    counts = json.loads(r.stdout)["eligibility"]["counts"]
    assert counts["unreviewed"] == 0, counts


def test_sample_refuses_candidates_added_after_dedup(rep: Replication) -> None:
    proj = _copy_project(rep, "stale")
    add = rep.run_cli("source", "add", "arrays", str(rep.inputs.more_file), "--name",
                      "more", "--project", str(proj), cwd=rep.root)  # fmt: skip
    assert add.returncode == 0, add.describe()
    r = rep.run_cli("sample", "--strategy", "class-balanced", "--per-class", "5",
                    "--seed", "1", "--include-unreviewed", "--project", str(proj),
                    cwd=rep.root)  # fmt: skip
    assert r.returncode != 0, r.describe()
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.describe()
    assert "retest dedup" in lines[0] and "Traceback" not in r.stderr
    before = {x["name"] for x in rep.revisions.values()}
    listed = rep.run_cli("revisions", "--json", "--project", str(proj), cwd=rep.root)
    assert {x["name"] for x in json.loads(listed.stdout)} == before
