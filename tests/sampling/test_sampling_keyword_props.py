"""Properties of the CIFAR keyword-count sampler and the train/test builder."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from retest.sampling.eligibility import CandidateInfo
from retest.sampling.keyword_counts import sample_keyword_counts
from retest.sampling.split import build_train_test

KWS = [("cat", "tabby"), ("cat", "siamese"), ("dog", "pug")]


@st.composite
def keyword_case(draw: st.DrawFn):
    pool = []
    for cls, kw in KWS:
        for i in range(draw(st.integers(0, 12))):
            pool.append(
                CandidateInfo(
                    f"{kw}{i:02d}",
                    cls,
                    keyword=kw,
                    blacklisted=draw(st.integers(0, 5)) == 0,
                    nn_distance=draw(st.sampled_from([None, 500.0, 1000.0, 3000.0])),
                )
            )
    plan = {}
    for cls, kw in KWS:
        plan.setdefault(cls, {})[kw] = draw(st.integers(0, 8))
    ids = [c.id for c in pool]
    previous = draw(st.lists(st.sampled_from(ids), unique=True)) if ids else []
    return pool, plan, previous


def _ok(c: CandidateInfo) -> bool:
    return not c.blacklisted and (c.nn_distance is None or c.nn_distance > 1000)


@settings(max_examples=50, deadline=None)
@given(case=keyword_case(), seed=st.integers(0, 1000), v6=st.booleans())
def test_keyword_sampler_properties(case, seed: int, v6: bool) -> None:
    pool, plan, previous = case
    prev = previous if v6 else None
    r = sample_keyword_counts(pool, plan, random_state=seed, previous=prev)
    by_id = {c.id: c for c in pool}
    assert len(set(r.ids)) == len(r.ids)
    assert all(_ok(by_id[i]) for i in r.ids)
    got = Counter((m.class_name, m.keyword) for m in r.members)
    short = {s.class_name for s in r.shortfall}
    for cls, kw in KWS:
        n = plan[cls][kw]
        avail = [c.id for c in pool if c.keyword == kw and _ok(c)]
        assert got[(cls, kw)] == min(n, len(avail))
        if len(avail) < n:
            assert cls in short
        if v6:  # v6: previous eligible members are kept as far as n allows
            kept_prev = [i for i in avail if i in set(previous)]
            chosen = {m.id for m in r.members if m.keyword == kw}
            assert len(chosen & set(kept_prev)) == min(n, len(kept_prev))
    assert r.is_valid == (not short)
    assert r == sample_keyword_counts(pool, plan, random_state=seed, previous=prev)


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 30), min_size=1, max_size=3),
    per_class=st.integers(1, 20),
    frac=st.sampled_from([0.5, 0.8, 1.0]),
    overlap_mod=st.integers(2, 5),
    seed=st.integers(0, 1000),
)
def test_train_test_properties(sizes, per_class, frac, overlap_mod, seed) -> None:
    pool = [
        CandidateInfo(f"k{k}-{i:02d}", f"k{k}")
        for k, n in enumerate(sizes)
        for i in range(n)
    ]
    overlap = {c.id for c in pool if int(c.id[-2:]) % overlap_mod == 0}
    r = build_train_test(
        pool,
        per_class=per_class,
        train_fraction=frac,
        in_original_train=overlap,
        random_state=seed,
        classes=[f"k{k}" for k in range(len(sizes))],
    )
    for k, n in enumerate(sizes):
        cls = f"k{k}"
        mine = [m for m in r.members if m.class_name == cls]
        assert len(mine) == min(n, per_class)
        fresh = [c.id for c in pool if c.class_name == cls and c.id not in overlap]
        # overlap is used only once the non-overlapping images are exhausted
        used_overlap = sum(m.id in overlap for m in mine)
        assert used_overlap == max(0, len(mine) - len(fresh))
        n_train = sum(m.split == "train" for m in mine)
        assert n_train == round(frac * len(mine))
        assert (cls in {s.class_name for s in r.shortfall}) == (n < per_class)
