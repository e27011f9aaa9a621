"""People's names are compared NFC-normalised: "Ána" typed composed (U+00E1) or
decomposed (A + U+0301) is one person and one reviewer; "Ana" is another.

People (labelers with links) were already keyed by NFC + case-fold. Reviewer
names (``dedup-verdict --who``, ``record_review``) were stored as typed, so the
two spellings of one name were two reviewers.
"""

from __future__ import annotations

import numpy as np
import pytest

from retest.errors import InputValidationError
from retest.names import validate_person_name
from retest.project import Project, add_person, record_review
from retest.project._people import find_person
from retest.store.artifacts import PixelArray
from retest.store.rows import CandidateRow, ReferenceRow, content_id

COMPOSED = "\u00c1na"  # Ána
DECOMPOSED = "A\u0301na"  # the same name, as some keyboards and macOS type it


def test_the_two_spellings_are_different_strings() -> None:
    assert COMPOSED != DECOMPOSED and len(DECOMPOSED) == 4


def test_validate_person_name_returns_nfc() -> None:
    assert validate_person_name(DECOMPOSED) == COMPOSED
    assert validate_person_name("Ana") == "Ana"  # not accent-stripped


def _project(tmp_path):
    rng = np.random.default_rng(3)
    imgs = rng.integers(0, 256, (3, 8, 8), dtype=np.uint8)
    p = Project.init(tmp_path / "p", name="p", classes=["a", "b"])
    px = PixelArray.create(p.arrays_dir, "px", shape=(8, 8))
    rows = px.append(imgs)
    ids = [content_id(x) for x in imgs]
    p.store.references.add(
        [ReferenceRow("train", 0, 0, ids[0], array_name="px", array_row=rows[0])]
    )
    p.store.candidates.add(
        CandidateRow(ids[i], "s", str(i), 0, array_name="px", array_row=rows[i])
        for i in (1, 2)
    )
    return p, ids


def test_reviews_under_both_spellings_are_one_reviewer(tmp_path) -> None:
    p, ids = _project(tmp_path)
    with p:
        ref = "train:0"
        record_review(p, ids[1], "l2", reviewer=COMPOSED, shown=[ref])
        record_review(p, ids[2], "l2", reviewer=DECOMPOSED, shown=[ref])
        record_review(p, ids[2], "l2", reviewer="Ana", shown=[ref])
        reviewers = [v.who for v in p.store.neardup.verdicts()]
    assert reviewers.count(COMPOSED) == 2
    assert reviewers.count("Ana") == 1
    assert DECOMPOSED not in reviewers


def test_people_ana_and_ana_accented(tmp_path) -> None:
    p, _ = _project(tmp_path)
    with p:
        add_person(p, COMPOSED, "labeler", by="owner")
        with pytest.raises(InputValidationError):  # the same person again
            add_person(p, DECOMPOSED, "labeler", by="owner")
        assert find_person(p, DECOMPOSED).name == COMPOSED
        add_person(p, "Ana", "labeler", by="owner")  # another person
        assert find_person(p, "ana").name == "Ana"
