"""One replication whose decisions hold together, checked only through the CLI.

Every check reads what ``retest`` prints (``--json``) and the files it writes
(exports, split files); nothing imports retest. So this file runs unchanged
against any version of the command, and each test names a guarantee a user
relies on: no copy of an original image and no second member of a near-identical
group is released; ``status`` counts what ``sample`` uses and says why a
candidate is out; ``sample`` refuses state older than the last ingest; the
review queue keeps every metric's pairs and the default embedder queues few
ordinary images; a reviewed MTurk results file re-imports with the rejected work
(and a worker's second assignment of a task) not counted; ``retest.toml`` keys
are honoured or refused; the published steps (evaluate, split, Flickr) are
commands; samplers and dedup metrics come from registries, plug-ins included.

The project: real Fashion-MNIST (3,000 training and 1,000 test originals), a
pool of 240 with planted exact, 1-px shifted and brightened copies of originals
and groups of near-identical pool images (``conftest.build_inputs``), crowd
tasks answered by ten honest simulated workers and one spammer (``mturk``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_checks import one_error_line
from mturk import (
    CLASS_NAMES,
    HONEST,
    mturk_time,
    reviewed,
    seen_images,
    write_csv,
    write_results,
)

pytestmark = pytest.mark.slow

GRID, CONTROLS = 64, 20  # 24 candidates + 20 originals of the class + 20 of another
ALL = 24  # --per-class that asks for every candidate of a class
STRATEGIES = ("class-balanced", "matched-frequency")


def candidate_id(px: np.ndarray) -> str:
    """The id retest gives an array candidate: the sha256 of ``uint8:H,W:`` and
    its pixel bytes (its content id, shown by ``status`` and in exports)."""
    head = b"uint8:" + ",".join(map(str, px.shape)).encode() + b":"
    return hashlib.sha256(head + np.ascontiguousarray(px).tobytes()).hexdigest()


@dataclass
class CliProject:
    """The project built by CLI calls, its inputs and each call's result."""

    root: Path
    project: Path
    inputs: Any
    run_cli: Any
    runs: dict[str, Any] = field(default_factory=dict)
    spammer: str = ""
    rows: list[dict[str, str]] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)
    revisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    exports: dict[str, Path] = field(default_factory=dict)

    def cli(
        self, key: str, *args: str, project: Path | None = None, ok: bool = True,
        env: dict[str, str] | None = None, kill_ingest_after: int | None = None,
    ) -> Any:  # fmt: skip
        where = self.project if project is None else project
        r = self.run_cli(*args, "--project", str(where), cwd=self.root, env=env,
                         kill_ingest_after=kill_ingest_after)  # fmt: skip
        self.runs[key] = r
        if ok:
            assert r.returncode == 0, r.describe()
        return r

    def copy(self, name: str) -> Path:
        """A copy of the finished project to make a mistake in."""
        dst = self.root / name
        shutil.copytree(self.project, dst)
        return dst

    def planted(self, *kinds: str) -> list[Any]:
        return [p for p in self.inputs.planted if p.kind in kinds]


def _json(run: Any) -> Any:
    assert run.stdout.strip(), run.describe()
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory, fm_inputs: Any, retest_cli: Any):
    root = tmp_path_factory.mktemp("cli-only")
    p = CliProject(root, root / "fm", fm_inputs, retest_cli)
    init = retest_cli(
        "init", str(p.project), "--classes-from", "fashion-mnist", cwd=root
    )
    assert init.returncode == 0, init.describe()
    d = fm_inputs.train_file.parent
    p.cli("reference train", "reference", "add", "idx", str(fm_inputs.train_file),
          "--labels", str(d / "train-labels-idx1-ubyte.gz"), "--split", "train")  # fmt: skip
    p.cli("reference test", "reference", "add", "idx", str(fm_inputs.test_file),
          "--labels", str(d / "t10k-labels-idx1-ubyte.gz"), "--split", "test")  # fmt: skip
    p.cli("source add", "source", "add", "arrays", str(fm_inputs.pool_file))
    p.cli("dedup", "dedup", "--json")
    p.cli("crowd tasks", "crowd", "tasks", "--images-per-task", str(GRID),
          "--controls", str(CONTROLS), "--seed", "3")  # fmt: skip
    batch = root / "batch"
    p.cli("crowd export", "crowd", "export", "--out", str(batch),
          "--base-url", "https://example.org/fm")  # fmt: skip
    known = np.concatenate([fm_inputs.pool, fm_inputs.test])
    labels = np.concatenate([fm_inputs.pool_labels, fm_inputs.test_labels])
    p.rows, p.spammer = write_results(batch, known, labels)
    # an honest worker's earlier second assignment of the first task, selecting
    # every image: one worker holds one vote per task, their latest
    first = p.rows[0]
    p.extra = {**first, "AssignmentId": "3" + "X" * 29, "AcceptTime": mturk_time(0),
               "SubmitTime": mturk_time(1), "Answer.selected": "|".join(
                   v for k, v in first.items() if k.startswith("Input.token_") and v)}  # fmt: skip
    rows = [*p.rows, p.extra]
    p.cli("crowd import 1", "crowd", "import",
          str(write_csv(root / "Batch_1_batch_results.csv", rows)), "--json")  # fmt: skip
    second = write_csv(
        root / "Batch_1_batch_results (1).csv", reviewed(rows, p.spammer)
    )
    p.cli("crowd import 2", "crowd", "import", str(second), "--json", ok=False)
    for strategy in STRATEGIES:
        # every candidate asked for: the revision holds all that sample lets in
        r = p.cli(f"sample {strategy}", "sample", "--strategy", strategy,
                  "--per-class", str(ALL), "--seed", "1", "--keep-invalid", "--json",
                  ok=False)  # fmt: skip
        p.revisions[strategy] = _json(r)
        name = p.revisions[strategy]["name"]
        out = root / "release" / strategy
        r = p.cli(f"export {strategy}", "export", name, "--out", str(out), ok=False)
        if r.returncode != 0:  # a short revision is refused unless forced
            out = root / "release-forced" / strategy
            p.cli(f"export --force {strategy}", "export", name, "--out", str(out),
                  "--force")  # fmt: skip
        p.exports[strategy] = out
    return p


# ------------------------------------------------------------------ 1. eligibility


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_no_copy_of_an_original_and_one_image_per_group_is_released(
    cp: CliProject, strategy: str
) -> None:
    out = cp.exports[strategy]
    data = np.load(next(out.glob("*_data.npy")))
    released = Counter(x.tobytes() for x in data)
    assert len(data) >= 100, f"{strategy}: only {len(data)} images released"
    leaked = sorted(
        f"{p.kind} copy of {p.of}"
        for p in cp.planted("exact", "shift", "bright")
        if p.pixels.tobytes() in released
    )
    assert not leaked, f"{strategy}: released {len(leaked)} copies: {leaked}"
    groups: dict[str, int] = Counter()
    for p in cp.planted("group"):
        groups[p.of] += released[p.pixels.tobytes()]
    assert all(n <= 1 for n in groups.values()), f"{strategy}: {dict(groups)}"


# ------------------------------------------------------------------ 2. stale state


def test_sample_refuses_candidates_ingested_after_dedup(cp: CliProject) -> None:
    proj = cp.copy("added-after-dedup")
    cp.cli("add more", "source", "add", "arrays", str(cp.inputs.more_file),
           "--name", "more", project=proj)  # fmt: skip
    r = cp.cli("sample stale", "sample", "--strategy", "class-balanced",
               "--per-class", "3", "--seed", "2", project=proj, ok=False)  # fmt: skip
    assert "retest dedup" in one_error_line(r)
    listed = _json(cp.cli("revisions stale", "revisions", "--json", project=proj))
    assert len(listed) == len(STRATEGIES), "a revision was made from stale state"


def test_sample_refuses_after_an_interrupted_ingest(cp: CliProject) -> None:
    proj = cp.copy("interrupted-ingest")
    killed = cp.cli("add killed", "source", "add", "arrays", str(cp.inputs.more_file),
                    "--name", "more", "--batch-size", "1", project=proj, ok=False,
                    kill_ingest_after=2)  # fmt: skip
    assert killed.returncode != 0, killed.describe()
    r = cp.cli("sample interrupted", "sample", "--strategy", "class-balanced",
               "--per-class", "3", "--seed", "2", project=proj, ok=False)  # fmt: skip
    assert "retest source add" in one_error_line(r)
    # dedup would search an incomplete pool (and run again once it is complete)
    r = cp.cli("dedup interrupted", "dedup", project=proj, ok=False)
    assert "retest source add" in one_error_line(r)


# ------------------------------------------------------------------ 3. status


def test_status_counts_what_sample_let_in(cp: CliProject) -> None:
    status = _json(cp.cli("status", "status", "--json"))
    # every planted copy of an original is out as a copy (near-duplicate column)
    copies = sum(c["near_duplicates"] for c in status["classes"])
    assert copies >= len(cp.planted("exact", "shift", "bright")), copies
    members = Counter(
        m["class_name"] for m in cp.revisions["class-balanced"]["members"]
    )
    eligible = {c["class"]: c["eligible"] for c in status["classes"]}
    assert eligible == {n: members[n] for n in CLASS_NAMES}
    excluded = sum(c["candidates"] - c["eligible"] for c in status["classes"])
    counts = status["eligibility"]["counts"]
    assert sum(v for k, v in counts.items() if k != "eligible") == excluded


def test_status_of_a_candidate_names_why_it_is_out(cp: CliProject) -> None:
    expected = {
        "exact": {"exact_copy"},
        "shift": {"near_original", "near_duplicate", "unreviewed"},
        "bright": {"near_original", "near_duplicate", "unreviewed"},
    }
    wrong = []
    for p in cp.planted(*expected):
        r = cp.cli("status --candidate", "status", "--candidate",
                   candidate_id(p.pixels), "--json", ok=False)  # fmt: skip
        info = (
            _json(r) if r.returncode == 0 else {"eligible": None, "reasons": [r.stderr]}
        )
        first = (info["reasons"] or [None])[0]
        if info["eligible"] is not False or first not in expected[p.kind]:
            wrong.append(
                f"{p.kind} copy of {p.of}: {info['eligible']} {info['reasons']}"
            )
    assert not wrong, "\n".join(wrong)


# ------------------------------------------------------------------ 4. dedup queue


def _queue(cp: CliProject, proj: Path, key: str) -> set[tuple[str, str]]:
    rows = _json(cp.cli(key, "dedup-queue", "--json", project=proj))
    return {(q["candidate"], q["metric"]) for q in rows}


def test_a_later_run_of_other_metrics_keeps_the_queued_pairs(cp: CliProject) -> None:
    proj = cp.copy("features-again")
    before = _queue(cp, proj, "queue before")
    pixel = {x for x in before if x[1] != "features"}
    assert pixel, "no pixel-metric pair queued: the test would prove nothing"
    cp.cli("dedup features", "dedup", "--metrics", "features", project=proj)
    after = _queue(cp, proj, "queue after")
    assert pixel <= after, f"{len(pixel - after)} of {len(pixel)} pairs vanished"


def test_the_default_embedder_is_calibrated_and_queues_few_images(
    cp: CliProject,
) -> None:
    queued = {c for c, m in _queue(cp, cp.project, "queue") if m == "features"}
    n = len(cp.inputs.pool)
    assert len(queued) <= 0.15 * n, f"features queues {len(queued)} of {n} images"
    run = _json(cp.runs["dedup"])  # the target and how it was found are reported
    assert run["features"]["target_source"] == "calibrated", run["features"]
    assert 0 < run["review_targets"]["features"] < float("inf")


# ------------------------------------------------------------------ 5. crowd truth


def test_reimport_applies_the_review_and_reports_it(cp: CliProject) -> None:
    second = cp.runs["crowd import 2"]
    assert second.returncode == 0, second.describe()
    out = _json(second)
    bad = out.get("rejected", out.get("rejected_rows"))
    assert bad == [], f"{len(bad)} rows refused, e.g. {bad[:2]}"
    assert out["new"] == 0, out
    changed = Counter(c["new"] for c in out["status_changes"])
    assert changed == {"Rejected": 10, "Approved": len(cp.rows) + 1 - 10}, changed


def _honest_votes(cp: CliProject) -> tuple[dict[str, list[bool]], set[str]]:
    """Candidate id → the ten honest workers' answers (the spammer's rejected work
    and the extra assignment left out), and the ids the extra assignment showed."""
    pool, test = cp.inputs.pool, cp.inputs.test
    known = np.concatenate([pool, test])
    labels = np.concatenate([cp.inputs.pool_labels, cp.inputs.test_labels])
    seen = {
        tok: j
        for tok, j in seen_images(cp.root / "batch", known, labels).items()
        if j < len(pool)  # not a control (an original test image)
    }
    # (a control may show a test image that the pool holds an exact copy of)
    # copies of originals get no task; `crowd tasks` says how many it left out
    said = cp.runs["crowd tasks"].stdout.split("left out ")[1:]
    left_out = int(said[0].split()[0]) if said else 0
    unseen = set(range(len(pool))) - set(seen.values())
    assert len(unseen) <= left_out, f"{len(unseen)} pool images went unseen"
    ids = [candidate_id(x) for x in pool]
    votes: dict[str, list[bool]] = defaultdict(list)
    for row in cp.rows:
        if row["WorkerId"] == cp.spammer:
            continue
        picked = set(row["Answer.selected"].split("|"))
        for k, tok in row.items():
            if k.startswith("Input.token_") and tok in seen:
                votes[ids[seen[tok]]].append(tok in picked)
    extra = {ids[seen[v]] for k, v in cp.extra.items() if k.startswith("Input.token_") and v in seen}  # fmt: skip
    return votes, extra


def _released_frequencies_wrong(cp: CliProject, *, first_task: bool) -> list[str]:
    """Exported images whose selection frequency or annotation count in the
    manifest is not that of the honest workers (:func:`_honest_votes`): the
    images of the task with the extra assignment (``first_task``) or the others."""
    votes, extra = _honest_votes(cp)
    wrong, checked = [], 0
    for strategy, out in cp.exports.items():
        manifest = json.loads((out / "manifest.json").read_text())
        for entry in manifest["images"]:
            if (entry["item_id"] in extra) != first_task:
                continue
            v = votes[entry["item_id"]]
            if len(v) != HONEST:  # a copy of a control: the copy test's concern
                continue
            want = (round(sum(v) / len(v), 9), len(v))
            got = (round(entry["selection_frequency"], 9), entry["annotation_count"])
            checked += 1
            if got != want:
                wrong.append(f"{strategy} {entry['item_id'][:12]}: {got} != {want}")
    assert checked >= 10, f"only {checked} released images to check"
    return wrong


def test_sample_counts_one_vote_per_honest_worker_and_task(cp: CliProject) -> None:
    """The revision statistics (``status REVISION``: the frequencies sample used)
    are the honest workers' answers: not the rejected spammer's, and of the worker
    with two assignments of a task only the latest (the extra is earlier)."""
    votes, extra = _honest_votes(cp)
    for strategy, rev in cp.revisions.items():
        st = _json(cp.cli(f"status {strategy}", "status", rev["name"], "--json"))
        by_class = defaultdict(list)
        for m in rev["members"]:
            by_class[m["class_name"]].append(votes[m["id"]])
        for c in st["revision_statistics"]["classes"]:
            v = by_class[c["class_name"]]
            if not v:
                continue
            mean = np.mean([sum(x) / len(x) for x in v])
            got = (round(c["mean_frequency"], 9), c["min_assignments"])
            assert got == (round(mean, 9), HONEST), (strategy, c["class_name"], got)
    first = {cp.extra["Input.class_name"]}
    assert any(m["id"] in extra for m in cp.revisions["class-balanced"]["members"])
    assert first <= {m["class_name"] for m in cp.revisions["class-balanced"]["members"]}


def test_released_frequencies_leave_out_rejected_work(cp: CliProject) -> None:
    wrong = _released_frequencies_wrong(cp, first_task=False)
    assert not wrong, f"{len(wrong)} images: " + "; ".join(wrong[:5])


def test_released_frequencies_count_one_assignment_per_worker_and_task(
    cp: CliProject,
) -> None:
    wrong = _released_frequencies_wrong(cp, first_task=True)
    assert not wrong, f"{len(wrong)} images: " + "; ".join(wrong[:5])


# ------------------------------------------------------------------ 6. retest.toml


def _with_toml(cp: CliProject, name: str, section: str, lines: str) -> Path:
    proj = cp.copy(name)
    toml = proj / "retest.toml"
    text = toml.read_text()
    assert f"[{section}]\n" in text
    toml.write_text(text.replace(f"[{section}]\n", f"[{section}]\n{lines}\n"))
    return proj


def test_a_misspelt_key_is_refused_with_a_suggestion(cp: CliProject) -> None:
    proj = _with_toml(cp, "misspelt", "thresholds", "near_orignal = 1000")
    line = one_error_line(cp.cli("status misspelt", "status", project=proj, ok=False))
    assert "near_orignal" in line and "near_original" in line and "retest.toml" in line


def test_configured_seed_and_threshold_are_used(cp: CliProject) -> None:
    proj = _with_toml(cp, "seeded", "seeds", "sample = 5")
    args = ("sample", "--strategy", "class-balanced", "--per-class", "3", "--json")
    by_config = _json(cp.cli("sample seeded", *args, project=proj))
    by_flag = _json(cp.cli("sample --seed 5", *args, "--seed", "5", project=proj))
    assert by_config["seed"] == 5
    assert [m["id"] for m in by_config["members"]] == [
        m["id"] for m in by_flag["members"]
    ]
    default = _json(cp.cli("status", "status", "--json"))["eligibility"]
    proj = _with_toml(cp, "exact-only", "thresholds", "near_original = 0")
    tight = _json(cp.cli("status exact-only", "status", "--json", project=proj))
    tight = tight["eligibility"]
    assert tight["near_original_threshold"] == 0 < default["near_original_threshold"]
    # at 0 only copies identical after the best small warp are taken automatically
    assert tight["counts"]["near_original"] < default["counts"]["near_original"]


# ------------------------------------------------------------------ 7. commands


def test_evaluate_writes_the_comparison_of_a_revision(cp: CliProject) -> None:
    name = cp.revisions["class-balanced"]["name"]
    out = cp.root / "evaluated"
    cp.cli("evaluate", "evaluate", "--model", "logreg-c0.001", "--model",
           "gaussian-nb", "--revision", name, "--force", "--bootstrap", "200",
           "--figure", "png", "--out", str(out))  # fmt: skip
    table = json.loads((out / name / "comparison.json").read_text())
    text = json.dumps(table)
    assert "logreg-c0.001" in text and "gaussian-nb" in text


def test_split_keeps_copies_of_test_images_out(cp: CliProject) -> None:
    out = cp.root / "split.json"
    r = cp.cli("split", "split", "--per-class", "8", "--seed", "4", "--out", str(out),
               ok=False)  # fmt: skip
    assert out.is_file(), r.describe()
    split = json.loads(out.read_text())
    ids = {*split["train"], *split["test"]}
    assert len(split["test"]) >= 10 and len(split["train"]) >= 40, split["per_class"]
    copies = {candidate_id(p.pixels): p for p in cp.planted("exact", "shift", "bright")}
    assert not [p.of for c, p in copies.items() if c in ids and p.of.startswith("test")]
    assert not [p.of for c, p in copies.items() if c in split["test"]]


def test_flickr_search_and_download_are_commands(cp: CliProject) -> None:
    for sub in ("search", "download"):
        r = cp.run_cli("flickr", sub, "--help", cwd=cp.root)
        assert r.returncode == 0, r.describe()
        assert "--rate" in r.stdout or sub == "download", r.stdout
    r = cp.run_cli("flickr", "search", "--help", cwd=cp.root)
    assert "plan" in r.stdout.lower()


# ------------------------------------------------------------------ 8. registries


PLUGIN = '''
"""first-n: the first per_class eligible candidates of each class, by id."""
from retest.stages.dedup import DEDUP_METRICS, DedupMetric, Space
from retest.sampling.base import SampleMember, finish, register_sampler


@register_sampler("first-n", summary="first per_class eligible ids of each class",
                  revision=True, tag="fn", inputs=("per_class",))
def first_n(pool, *, random_state, per_class=10):
    members = []
    for name in sorted({c.class_name for c in pool}):
        ids = sorted(c.id for c in pool if c.class_name == name
                     and not (c.blacklisted or c.near_duplicate))
        members += [SampleMember(i, name) for i in ids[:per_class]]
    return finish("first-n", members, [], random_state=random_state,
                  parameters={"per_class": per_class}, metadata={})


class Mean(DedupMetric):
    kind, summary = "exact", "squared difference of the mean grey level"

    def default_target(self, shape):
        return 1.0

    def space(self, ctx):
        def f(px):
            return px.reshape(len(px), -1).mean(axis=1, keepdims=True)
        return Space(f(ctx.cand_px), f(ctx.ref_px))


DEDUP_METRICS.add("grey-mean", Mean())
'''


def test_plugins_are_listed_and_run_from_their_registries(cp: CliProject) -> None:
    site = cp.root / "plugin-site"
    dist = site / "retest_first_n-0.1.dist-info"
    dist.mkdir(parents=True)
    (site / "retest_first_n.py").write_text(textwrap.dedent(PLUGIN))
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: retest-first-n\nVersion: 0.1\n")  # fmt: skip
    (dist / "entry_points.txt").write_text(
        "[retest.samplers]\nfirst-n = retest_first_n\n\n"
        "[retest.dedup_metrics]\ngrey-mean = retest_first_n\n"
    )
    path = os.pathsep.join(x for x in (str(site), os.environ.get("PYTHONPATH")) if x)
    env = {"PYTHONPATH": path}
    sample_help = cp.cli("sample help", "sample", "--help", env=env).stdout
    dedup_help = cp.cli("dedup help", "dedup", "--help", env=env).stdout
    assert "first-n" in sample_help and "grey-mean" in dedup_help
    proj = cp.copy("plugin")
    out = _json(cp.cli("sample first-n", "sample", "--strategy", "first-n",
                       "--per-class", "2", "--seed", "0", "--json", project=proj,
                       env=env))  # fmt: skip
    assert out["name"].endswith("-first-n-0") and out["valid"], out  # one spelling
    per_class = Counter(m["class_name"] for m in out["members"])
    assert per_class == dict.fromkeys(CLASS_NAMES, 2)
    status = _json(cp.cli("status plugin", "status", "--json", project=proj))
    eligible = {c["class"]: c["eligible"] for c in status["classes"]}
    assert all(eligible[n] >= 2 for n in CLASS_NAMES)
