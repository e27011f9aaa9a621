"""Collection rules for the whole repository (pytest runs tests/ and src/retest doctests).

``--doctest-modules`` (pyproject.toml) imports every module under ``src/retest``;
none imports an optional extra (torch, onnxruntime, faiss) at import time, so
collection works without them. Examples that need something a machine may lack
are listed in ``_NEEDS`` and skipped, with the reason, when it is missing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

# Never collected: benchmark scripts and the screenshot script run on their own.
collect_ignore = ["benchmarks", "docs", "scripts"]


def _fashion_mnist() -> str | None:
    from retest.datasets.fashion_mnist import FashionMNIST

    src = FashionMNIST()
    if all((src.root / f).is_file() for f in src.files):
        return None
    return (
        f"Fashion-MNIST is not in {src.root}: apt-get install dataset-fashion-mnist "
        "or run `retest datasets fetch fashion_mnist`"
    )


# Doctest (``module.object``) → a check giving the reason to skip, or None to run.
_NEEDS: dict[str, Callable[[], str | None]] = {
    "retest.datasets.base.load_dataset": _fashion_mnist,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reasons: dict[str, str | None] = {}
    for item in items:
        if not isinstance(item, pytest.DoctestItem) or item.name not in _NEEDS:
            continue
        if item.name not in reasons:
            reasons[item.name] = _NEEDS[item.name]()
        reason = reasons[item.name]
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
