"""The near-duplicate read side (retest.project) agrees with the metric registry of
the dedup stage without importing it."""

from __future__ import annotations

import pytest

from retest.project._neardup import (
    _BUILTIN_ORDER,
    BUILTIN_METRICS,
    _builtin_default_target,
    _metric_key,
)
from retest.stages.dedup import DEDUP_METRICS, metric_names


def test_builtin_kind_and_order_match_the_registry() -> None:
    assert tuple(_BUILTIN_ORDER) == BUILTIN_METRICS
    for name, (kind, order) in _BUILTIN_ORDER.items():
        m = DEDUP_METRICS.get(name)
        assert (m.kind, m.order) == (kind, order)
    builtin = [n for n in metric_names() if n in BUILTIN_METRICS]
    assert builtin == sorted(BUILTIN_METRICS, key=lambda n: _metric_key(n, None))


@pytest.mark.parametrize("shape", [(32, 32, 3), (256, 256, 3), (28, 28, 1)])
def test_builtin_default_targets_match_the_registry(shape: tuple[int, ...]) -> None:
    for name in BUILTIN_METRICS:
        expected = DEDUP_METRICS.get(name).default_target(shape)
        assert _builtin_default_target(name, shape) == pytest.approx(expected)


def test_a_plugin_metric_is_ordered_by_its_stored_kind() -> None:
    stored = {"kind": "exact", "order": 5}
    assert _metric_key("plug", stored) < _metric_key("dssim", None)
    assert _metric_key("plug", {"kind": "shortlist", "order": 9}) > _metric_key(
        "warp", None
    )
    assert _metric_key("gone", None) > _metric_key("warp", None)  # unknown: last
