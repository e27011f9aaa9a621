"""The keyword pages read the candidate pool per keyword (keyword index, the
labelled and blacklisted candidates only), never every candidate: their
counts and lists must equal the definition over every candidate — unblacklisted
candidates of the keyword whose class is the keyword's or none."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retest.project import Project
from retest.store.rows import (
    AnnotationEvent,
    BlacklistEvent,
    CandidateRow,
    KeywordRow,
)
from retest.web.views import candidate_pool, keyword_progress


def test_keyword_progress_equals_the_pass_over_every_candidate(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    proj = Project.init(tmp_path / "p", name="kw", classes=["cat", "dog", "ship"])
    try:
        store = proj.store
        kws = ["tabby", "kitten", "puppy", "cruiser"]
        store.classes.put_keywords(
            [KeywordRow(0, "tabby", 5), KeywordRow(0, "kitten", 5),
             KeywordRow(1, "puppy", 5), KeywordRow(2, "cruiser", 5),
             KeywordRow(1, "cruiser", 5)]
        )  # fmt: skip
        rows = []
        for i in range(400):
            kw = kws[int(rng.integers(len(kws)))] if rng.random() < 0.9 else None
            k = int(rng.integers(3)) if rng.random() < 0.8 else None  # some classless
            rows.append(CandidateRow(f"{i:064x}", "s", str(i), k, kw))
        store.candidates.add(rows)
        ids = [r.id for r in rows]
        black = set(rng.choice(ids, 40, replace=False).tolist())
        store.blacklist.add(BlacklistEvent(i, "bad", "me") for i in black)
        labelled = rng.choice(ids, 150, replace=False).tolist()
        selected = {i: int(rng.integers(2)) for i in labelled}
        verdicts = dict.fromkeys(labelled[::3], 1)
        store.annotations.add(
            [AnnotationEvent("w", "select", 0, i, v) for i, v in selected.items()]
        )
        pool = candidate_pool(store)
        got, _ = keyword_progress(
            proj, selected=selected, verdicts=verdicts, verified={}, pool=pool
        )
        assert len(got) == 5
        for row in got:
            want = [
                r.id
                for r in rows
                if r.keyword == row.keyword
                and r.class_id in (None, row.class_id)
                and r.id not in black
            ]
            assert pool.ids(store, row.keyword, row.class_id) == want
            yes = [i for i in want if selected.get(i) == 1]
            assert (row.selected, row.to_select, row.to_verify) == (
                len(yes),
                sum(1 for i in want if i not in selected),
                sum(1 for i in yes if i not in verdicts),
            )
        # blacklisted and classless candidates exist among every keyword's rows
        assert any(r.class_id is None and r.keyword for r in rows)
    finally:
        proj.close()
