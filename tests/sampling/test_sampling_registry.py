"""The sampler registry carries what the pipeline needs: revision or not, the
revision-name tag, the declared inputs; a new sampler is one registration."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest

import retest.sampling.base as base
from retest.errors import ConfigError, UnknownNameError
from retest.sampling.base import (
    SAMPLER_INPUTS,
    SAMPLERS,
    SampleMember,
    SampleResult,
    describe_samplers,
    finish,
    register_sampler,
    revision_strategies,
    run_sampler,
    sampler_spec,
    strategy_tag,
    strategy_tags,
)
from retest.sampling.basic import (
    sample_class_balanced,
    sample_threshold,
    sample_top_images,
)
from retest.sampling.eligibility import CandidateInfo
from retest.sampling.keyword_counts import sample_keyword_counts
from retest.sampling.matched_frequency import sample_matched_frequency
from retest.sampling.selection_frequency import TargetHistogram

POOL = [
    CandidateInfo(f"{k}{i:02d}", k, (i % 10) / 9, 12, keyword=f"kw{i % 2}")
    for k in ("cat", "dog")
    for i in range(30)
]
TARGETS = {k: TargetHistogram(k, (2, 3, 5, 6, 4), 20, True) for k in ("cat", "dog")}
KEYWORDS = {"cat": {"kw0": 2, "kw1": 1}, "dog": {"kw1": 3}}


@pytest.fixture
def scratch_registry() -> Iterator[None]:
    """Let a test register samplers without leaking them into other tests."""
    entries = dict(SAMPLERS._entries)
    specs = dict(base._SPECS)
    yield
    SAMPLERS._entries.clear()
    SAMPLERS._entries.update(entries)
    base._SPECS.clear()
    base._SPECS.update(specs)


def test_builtin_specs_match_what_the_pipeline_hard_codes_today() -> None:
    assert set(revision_strategies()) == {
        "threshold",
        "matched-frequency",
        "top-images",
        "class-balanced",
        "keyword-count",
    }
    assert "train-test" in SAMPLERS and "train-test" not in revision_strategies()
    # one spelling of new revision names; ImageNetV2's letters are still read
    assert strategy_tag("threshold") == "threshold"
    assert strategy_tags("threshold") == ("threshold", "a")
    assert strategy_tags("matched-frequency") == ("matched-frequency", "b")
    assert strategy_tags("top-images") == ("top-images", "c")
    assert strategy_tags("class-balanced") == ("class-balanced",)
    assert sampler_spec("keyword-count").verified_only
    assert not any(sampler_spec(n).verified_only for n in ("threshold", "top-images"))
    assert sampler_spec("matched-frequency").required_inputs() == ("targets",)
    assert sampler_spec("keyword-count").required_inputs() == ("keyword_counts",)
    assert sampler_spec("threshold").required_inputs() == ()


def test_pipeline_constants_agree_while_they_exist() -> None:
    from retest.stages.revisions import _revisions as revisions
    from retest.stages.sample import _sample as sample

    if hasattr(sample, "REVISION_STRATEGIES"):
        assert set(sample.REVISION_STRATEGIES) == set(revision_strategies())
    for name, tag in getattr(revisions, "STRATEGY_TAGS", {}).items():
        assert strategy_tag(name) == tag


def test_every_declared_input_is_a_parameter_and_known() -> None:
    for name in SAMPLERS.names():
        spec = sampler_spec(name)
        params = inspect.signature(SAMPLERS.get(name)).parameters
        assert "random_state" in params
        for i in spec.inputs:
            assert i in SAMPLER_INPUTS and i in params, (name, i)
        if spec.revision:
            assert spec.summary, name


def test_unknown_names_get_suggestions() -> None:
    with pytest.raises(UnknownNameError, match="Did you mean 'threshold'"):
        sampler_spec("treshold")
    with pytest.raises(UnknownNameError, match="Did you mean 'top-images'"):
        strategy_tag("top-image")


def _kw(**extra: Any) -> dict[str, Any]:
    return {"random_state": 5, "per_class": 4, "classes": ["cat", "dog"], **extra}


@pytest.mark.parametrize(
    ("name", "direct"),
    [
        ("threshold", lambda: sample_threshold(POOL, threshold=0.5, **_kw())),
        ("class-balanced", lambda: sample_class_balanced(POOL, **_kw())),
        ("top-images", lambda: sample_top_images(POOL, **_kw())),
        (
            "matched-frequency",
            lambda: sample_matched_frequency(
                POOL, TARGETS, allow_upward=False, **_kw()
            ),
        ),
        (
            "keyword-count",
            lambda: sample_keyword_counts(POOL, KEYWORDS, random_state=5),
        ),
    ],
)
def test_run_sampler_passes_exactly_the_declared_inputs(name: str, direct: Any) -> None:
    # the caller offers everything; each sampler takes only what it declares
    offered = {
        "per_class": 4,
        "previous": None,
        "classes": ["cat", "dog"],
        "threshold": 0.5,
        "class_thresholds": None,
        "min_annotations": None,
        "allow_upward": False,
        "targets": TARGETS,
        "keyword_counts": KEYWORDS,
    }
    got = run_sampler(name, POOL, random_state=5, **offered)
    want = direct()
    assert got.as_dict() == want.as_dict() and got.members


def test_run_sampler_names_a_missing_required_input() -> None:
    with pytest.raises(ConfigError, match="'matched-frequency' needs targets"):
        run_sampler("matched-frequency", POOL, random_state=0, per_class=3)
    with pytest.raises(ConfigError, match="needs keyword_counts: the keyword plan"):
        run_sampler("keyword-count", POOL, random_state=0, keyword_counts=None)
    with pytest.raises(ConfigError, match="unknown sampler inputs"):
        run_sampler("threshold", POOL, random_state=0, tau=0.5)


def test_none_means_the_samplers_own_default() -> None:
    # class-balanced needs no annotations by default, threshold needs 10
    pool = [CandidateInfo(f"x{i}", "cat", 1.0, 0) for i in range(5)]
    a = run_sampler("class-balanced", pool, random_state=0, per_class=2,
                    min_annotations=None)  # fmt: skip
    b = run_sampler(
        "threshold", pool, random_state=0, per_class=2, min_annotations=None
    )
    assert a.is_valid and len(a.members) == 2
    assert not b.is_valid and not b.members
    c = run_sampler("threshold", pool, random_state=0, per_class=2, min_annotations=0)
    assert c.is_valid


def _first(
    pool: list[CandidateInfo],
    *,
    random_state: int,
    per_class: int = 1,
    classes: list[str] | None = None,
) -> SampleResult:
    members = []
    for k in sorted(classes or {c.class_name for c in pool}):
        ids = sorted(c.id for c in pool if c.class_name == k)[:per_class]
        members += [SampleMember(i, k) for i in ids]
    return finish("first", members, [], parameters={"per_class": per_class},
                  metadata={}, random_state=random_state)  # fmt: skip


@pytest.mark.usefixtures("scratch_registry")
def test_a_new_sampler_is_one_registration() -> None:
    register_sampler(
        "first", summary="the first ids per class", revision=True, tag="f",
        inputs=("per_class", "classes"),
    )(_first)  # fmt: skip
    assert "first" in revision_strategies() and strategy_tags("first") == ("first", "f")
    assert "first: the first ids per class" in describe_samplers()
    r = run_sampler("first", POOL, random_state=1, per_class=2, threshold=0.9,
                    keyword_counts=KEYWORDS)  # fmt: skip
    assert r.ids == ["cat00", "cat01", "dog00", "dog01"] and r.seed == 1


@pytest.mark.usefixtures("scratch_registry")
def test_registration_checks_what_it_declares() -> None:
    with pytest.raises(ConfigError, match=r"unknown inputs \['tau'\]"):
        register_sampler("x1", summary="s", inputs=("tau",))
    with pytest.raises(ConfigError, match=r"does not take: \['threshold'\]"):
        register_sampler("x2", summary="s", inputs=("threshold",))(_first)
    with pytest.raises(ConfigError, match="tag 'a' is already used by 'threshold'"):
        register_sampler("x3", summary="s", revision=True, tag="a")
    with pytest.raises(ConfigError, match="already registered"):
        register_sampler("threshold", summary="s")(_first)
    assert "x2" not in SAMPLERS


@pytest.mark.usefixtures("scratch_registry")
def test_plain_registration_makes_no_revision() -> None:
    SAMPLERS.add("plain", _first)
    assert sampler_spec("plain").revision is False
    assert "plain" not in revision_strategies()
    assert strategy_tag("plain") == "plain"
