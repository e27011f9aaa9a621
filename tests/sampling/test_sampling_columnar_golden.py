"""Golden revisions: every revision strategy on a generated project gives the
same revisions, byte for byte, as the record-per-candidate samplers did.

The digests were recorded once with the code of main at 728d293 (the samplers
that take one ``CandidateInfo`` per candidate), by running
``python tests/sampling/test_sampling_columnar_golden.py`` there; the columnar
pool must reproduce them. The project is generated from a fixed seed: content
ids (64 hex characters, a few sharing their 64-bit prefix, which the columnar
read orders by), or in the second project also plain-text ids, crowd votes of
every selection-frequency bin with repeated and rejected assignments,
originals for the target histograms, blacklisted candidates, candidates
sharing a source id (blocked by the project's eligibility), verified
candidates with keywords, and a parent revision whose members partly become
ineligible before the child is drawn.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retest.project._project import Project
from retest.stages.revisions._revisions import create_revision
from retest.store import open_store
from retest.store.base import Store
from retest.store.rows import (
    AnnotationEvent,
    BlacklistEvent,
    CandidateRow,
    ClassRow,
    ReferenceRow,
)

CLASSES = ["ant", "bee", "cat", "dog", "eel"]
KEYWORDS = [f"kw{i}" for i in range(6)]
N_CANDIDATES = 20_000
STRATEGIES = (
    "class-balanced",
    "keyword-count",
    "matched-frequency",
    "threshold",
    "top-images",
)


def _ids(rng: np.random.Generator, n: int, plain: bool) -> list[str]:
    """Content ids; every 500th shares its first 16 hex digits with the next
    one (equal ``kp``); with ``plain``, every 7th is a text id instead."""
    raw = rng.integers(0, 256, size=(n, 32), dtype=np.uint8)
    raw[1::500, :8] = raw[0:-1:500, :8]
    out = [bytes(r).hex() for r in raw]
    if plain:
        for i in range(0, n, 7):
            out[i] = f"img-{i:05d}" if i % 2 else f"Z{i}"
    return out


def _votes(
    rng: np.random.Generator, item: str, cid: int, k: int, n: int, task: str
) -> list[AnnotationEvent]:
    ev = []
    for j in range(n):
        ev.append(
            AnnotationEvent(
                "crowd", "task", cid, item, int(j < k), task_id=task,
                assignment_id=f"{task}-{item[:12]}-{j}", worker=f"w{j}",
                assignment_status="Approved" if j % 5 else "Submitted",
                when=f"2024-01-01T00:{j:02d}:00",
            )
        )  # fmt: skip
    if rng.random() < 0.3:  # a rejected assignment that selected it
        ev.append(
            AnnotationEvent(
                "crowd", "task", cid, item, 1, task_id=task,
                assignment_id=f"{task}-{item[:12]}-r", worker="wr",
                assignment_status="Rejected",
            )
        )  # fmt: skip
    if rng.random() < 0.2:  # the same worker again, earlier: does not count
        ev.append(
            AnnotationEvent(
                "crowd", "task", cid, item, 1, task_id=task,
                assignment_id=f"{task}-{item[:12]}-x", worker="w0",
                assignment_status="Approved", when="2023-12-31T00:00:00",
            )
        )  # fmt: skip
    return ev


def populate(store: Store, seed: int, plain: bool) -> list[str]:
    """Fill ``store``; returns the candidate ids in insertion order."""
    rng = np.random.default_rng(seed)
    store.classes.put([ClassRow(i, n) for i, n in enumerate(CLASSES)])
    ids = _ids(rng, N_CANDIDATES, plain)
    cls = rng.integers(0, len(CLASSES), N_CANDIDATES)
    kws = rng.integers(0, len(KEYWORDS), N_CANDIDATES)
    rows = []
    for i, (cid, c, k) in enumerate(zip(ids, cls, kws, strict=True)):
        # every 300th shares its source id with the one before: eligibility blocks both
        ref = f"r{i - 1}" if i % 300 == 1 else f"r{i}"
        klass = None if i % 997 == 5 else int(c)  # a few without a class
        rows.append(CandidateRow(cid, "gen", ref, klass, KEYWORDS[int(k)]))
    store.candidates.add(rows)
    refs, events = [], []
    for c in range(len(CLASSES)):
        for j in range(40):
            idx = c * 100 + j
            refs.append(ReferenceRow("test", idx, c, f"ref{idx}"))
            n = int(rng.integers(8, 14))
            events += _votes(rng, f"test:{idx}", c, int(rng.integers(0, n + 1)), n,
                             f"o{c}")  # fmt: skip
    store.references.add(refs)
    annotated = rng.choice(N_CANDIDATES, 2_000, replace=False)
    for i in annotated:
        if rows[i].class_id is None:
            continue
        n = int(rng.integers(1, 13))
        # frequencies cluster on a few values, so ties in (frequency, n) are common
        k = int(rng.integers(0, n + 1)) if rng.random() < 0.5 else n - int(n > 4)
        events += _votes(rng, ids[i], int(rows[i].class_id), k, n, f"t{i % 40}")
        if rng.random() < 0.02:  # votes for another class count for nothing here
            events += _votes(rng, ids[i], (int(rows[i].class_id) + 1) % 5, n, n, "tx")
    verified = rng.choice(N_CANDIDATES, 1_500, replace=False)
    for i in verified:
        if rows[i].class_id is not None:
            events.append(
                AnnotationEvent("v", "verify", int(rows[i].class_id), ids[i], 1)
            )
    store.annotations.add(events)
    black = rng.choice(N_CANDIDATES, 400, replace=False)
    store.blacklist.add([BlacklistEvent(ids[i], "bad", "rev") for i in black])
    return ids


def _parent(store: Store, name: str | None) -> list[Any] | None:
    """The parent by what it is (strategy, seed, size), not by its name: revision
    names changed spelling (``-b-0`` became ``-matched-frequency-0``) after the
    digests were recorded."""
    if name is None:
        return None
    p = store.revisions.get(name)
    return [p.strategy, p.seed, len(store.revisions.members(name))]


def _digest(store: Store, name: str) -> str:
    rev = store.revisions.get(name)
    members = [
        [m.item_id, m.class_id, m.bin, m.origin, m.from_bin]
        for m in store.revisions.members(name)
    ]
    doc = {
        "strategy": rev.strategy, "params": rev.params, "seed": rev.seed,
        "parent": _parent(store, rev.parent), "valid": rev.valid,
        "shortfall": rev.shortfall,
        "members": members,
    }  # fmt: skip
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def run_all(root: Path, seed: int, plain: bool) -> dict[str, str]:
    """Every strategy, two seeds, then a child of each first revision after a
    quarter of its members were blacklisted; digest of every revision."""
    out: dict[str, str] = {}
    with open_store(root / "retest.db") as st:
        populate(st, seed, plain)
        project = Project.from_store(root, st, name="gold")
        kc = {c: dict.fromkeys(KEYWORDS[:4], 4) for c in CLASSES}
        for strategy in STRATEGIES:
            opts: dict[str, Any] = {"keep_invalid": True}
            if strategy == "keyword-count":
                opts["keyword_counts"] = kc
            if strategy == "threshold":
                opts["class_thresholds"] = {"bee": 0.5}
            if strategy in ("threshold", "top-images"):
                opts["min_annotations"] = 3
            first = None
            for s in (0, 7):
                rev = create_revision(
                    project, strategy=strategy, seed=s, per_class=40, **opts
                ).revision
                out[f"{strategy}/{s}"] = _digest(st, rev.name)
                first = first or rev.name
            assert first is not None
            members = sorted(m.item_id for m in st.revisions.members(first))
            st.blacklist.add([BlacklistEvent(i, "review", "rev") for i in members[::4]])
            child = create_revision(
                project, strategy=strategy, seed=3, per_class=40, parent=first, **opts
            ).revision
            out[f"{strategy}/child"] = _digest(st, child.name)
            small = create_revision(
                project, strategy=strategy, seed=4, per_class=25, parent=child.name,
                **opts,
            ).revision  # fmt: skip
            out[f"{strategy}/shrunk"] = _digest(st, small.name)
    return out


GOLDEN: dict[str, dict[str, str]] = {
    "content": {
        "class-balanced/0": (
            "ca62f6dccd34f8795f6fd0b843d71e7c13fc2deede72c092969d7f5239447428"
        ),
        "class-balanced/7": (
            "3aaa531e73c0e623255f66be4c6c267be548f24ea69d5676371d8b834322ca25"
        ),
        "class-balanced/child": (
            "afe3be9efd902ed65b1b2f7069a660381f72bfa778a94944e34fceda4d66d265"
        ),
        "class-balanced/shrunk": (
            "46be1859b4df35302478463b6ee6a93622b1799fd4365ce881a818bda3bbf696"
        ),
        "keyword-count/0": (
            "6c8ca5d089cefbb7dc6958e9766e4f069799eba7c1de28151b83f8a859c09e4e"
        ),
        "keyword-count/7": (
            "84935c515f65a8309003810c3a13cb2e0e72f0afe50d4d7ee27188c6b2651409"
        ),
        "keyword-count/child": (
            "bf318973727a3fb3b270e4d366bea51dd7d5f5c9e439d37cefb485cb3672c9d7"
        ),
        "keyword-count/shrunk": (
            "db965b72d93be2c8640e23b9a3563b3857f31772ff297639b79d56b25945839d"
        ),
        "matched-frequency/0": (
            "8c1bd889e98da40eb03bfd416d7dd64d935fa870d6531eb1e0c5426b11b23394"
        ),
        "matched-frequency/7": (
            "d78da797f06b2205c7026d5267a8f51b6d2b058770b588b250c838c6ddc982ee"
        ),
        "matched-frequency/child": (
            "752fbf083f7bc2e71539baacaff30425d2d90afe46e606800fa1dd49a301c288"
        ),
        "matched-frequency/shrunk": (
            "17343a9520367a5911b166645c22bd87e0cf46673270dadae51aac0427789a93"
        ),
        "threshold/0": (
            "8bc7b8195aeca861a62fdd47c5b45951df0d519d1351f97d0efef85f9aeb59b8"
        ),
        "threshold/7": (
            "34d1dd1d1787f309c46a6962396fb8077cc89b5459e718fb6d968da0b788831e"
        ),
        "threshold/child": (
            "669764cd54c915e8e238d65b2776d757b65355b88ffd6e039249e2be49b50482"
        ),
        "threshold/shrunk": (
            "6b6dd5e946efa25d6cc1eb7b8cc179ef537662c1cc17b341b465bfcc0ddc9efc"
        ),
        "top-images/0": (
            "85056aa7b1fb491e4f6dd5e2f219a5c83d7385f4a47d84bf74391a2e7cfa033f"
        ),
        "top-images/7": (
            "3894d63551529202454556466770ae141c796900a96265ed9ddbf878da6dd5d6"
        ),
        "top-images/child": (
            "7120cd819594d5cbd9aea96ef015e47779972e661cc3a824684661da31e6277b"
        ),
        "top-images/shrunk": (
            "e532092fd9a134094072cca6cfe040ae0bc04802d225d8c21369d443d03e9778"
        ),
    },
    "mixed": {
        "class-balanced/0": (
            "a8ebafd71e0a6927141fe7b405024bf9a63ceeeea5180c63b830569cec238ed1"
        ),
        "class-balanced/7": (
            "fca6a5fb84c623bcd99ae01f591a8737be8feaf09a7e536e88db388aa3a72bae"
        ),
        "class-balanced/child": (
            "a74b4cf09d9e9d39f175a72b25b1a7333cbe5708152c1e9432b30b2242479f55"
        ),
        "class-balanced/shrunk": (
            "f4bd2bedc944b42f357d677ffbe9e75bc036179af228449a3acb046074b575e2"
        ),
        "keyword-count/0": (
            "0bcff7498337d7443fc88d682de38ad7e5cca8b3d4964f601b7b3fad29451f19"
        ),
        "keyword-count/7": (
            "ba3f89917eae59d115ff1c5f2a4970c59ea394eb0e1a3985675f2b14da06151d"
        ),
        "keyword-count/child": (
            "2966eed41804445e6128c7533fb5590873253d00b9b14b1e5ecd900ea97fc525"
        ),
        "keyword-count/shrunk": (
            "d3cfc323be6b57ad35beb6906563058ede6ef5ec00cb58e85f149083a5dcd411"
        ),
        "matched-frequency/0": (
            "a16e6a18d85edd38562764ecf054ea3d38f4435e8baccc86741c94f7633c1bbd"
        ),
        "matched-frequency/7": (
            "8d4f0467165a3615c0524e1f8da5f468109bc405c819f3be426807c5b4544406"
        ),
        "matched-frequency/child": (
            "f5caa50b085f6c1f3bf38c32aff42c827af1e42c7c67d9996657fd7e7c391577"
        ),
        "matched-frequency/shrunk": (
            "a2369bee997ecf858ba6d2c5c22c15b21219af9baab0035c8540485f9f00526d"
        ),
        "threshold/0": (
            "96d5ea1f1a54ab3aa8d9336fa5e5072d015b44ff36960693dab86d7b1cc133c4"
        ),
        "threshold/7": (
            "1a8211047828b329553ac99dcf36c85cf7f19cb3f9fdd6b0d4634ee421b3d397"
        ),
        "threshold/child": (
            "eb98fa706f1dae9cc8ee1ae2929c4b7d8f917e8b9e8eea2232a04d30d7dcfbcd"
        ),
        "threshold/shrunk": (
            "dfb331b488fd779a3b5331194a771cc8d3f887f5becd429d95c29a8c528f1c66"
        ),
        "top-images/0": (
            "cfc6fc89454f2dafeed967609aa176087cab5bdcf6f48c950751620e0e8b8b34"
        ),
        "top-images/7": (
            "c3747dd82ba2afe6e6c0ed18bd20840ea540f3d65a3c07ca5ed82290e0157da4"
        ),
        "top-images/child": (
            "beccc10f28e8960cd4579d9639a8b31e10cec662611f1e518f21eaf269b74734"
        ),
        "top-images/shrunk": (
            "9d7218d9be3bb8f2564235814fca510568df63d10661282002c5870415acb248"
        ),
    },
}


@pytest.mark.parametrize("plain", [False, True], ids=["content-ids", "mixed-ids"])
def test_revisions_match_golden_digests(tmp_path: Path, plain: bool) -> None:
    got = run_all(tmp_path, 11, plain)
    assert got == GOLDEN["mixed" if plain else "content"]


if __name__ == "__main__":  # record the digests (run once on the reference code)
    import tempfile

    rec = {}
    for plain in (False, True):
        with tempfile.TemporaryDirectory() as d:
            rec["mixed" if plain else "content"] = run_all(Path(d), 11, plain)
    json.dump(rec, sys.stdout, indent=4, sort_keys=True)
