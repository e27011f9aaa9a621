"""Errors, registry, records and validation: the contracts every layer relies on."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from retest import (
    InputValidationError,
    LabeledSet,
    Predictions,
    Registry,
    UnknownNameError,
)
from retest._validation import check_pred_probs, check_random_state, check_topk
from retest.errors import ConfigError

SRC = Path(__file__).resolve().parents[2] / "src" / "retest"


def test_registry_suggests_close_names() -> None:
    reg: Registry[int] = Registry("sampler")
    reg.add("matched-frequency", 1)
    reg.add("threshold", 2)
    with pytest.raises(UnknownNameError, match="Did you mean 'matched-frequency'"):
        reg.get("matched-frequncy")
    with pytest.raises(KeyError):  # also a KeyError for callers that expect one
        reg.get("zzz")
    with pytest.raises(ConfigError, match="already registered"):
        reg.add("threshold", 3)
    reg.add("threshold", 3, replace=True)
    assert reg.get("threshold") == 3
    reg.add("model10", 0)
    reg.add("model9", 0)
    assert reg.names("model*") == ["model9", "model10"]  # natural sort


def test_predictions_validate_rows_and_ranges() -> None:
    with pytest.raises(InputValidationError, match=r"row 1 is \[2, 2\]"):
        Predictions("m", "d", np.array([[0, 1], [2, 2]]))
    with pytest.raises(InputValidationError, match=r"in \[0, 3\)"):
        Predictions("m", "d", np.array([[0], [3]]), n_classes=3)
    with pytest.raises(InputValidationError, match="negative"):
        Predictions.from_scores("m", "d", np.array([[1.2, -0.2], [0.5, 0.5]]))
    with pytest.raises(InputValidationError, match="NaN"):
        Predictions.from_scores(
            "m", "d", np.array([[np.nan, 1.0]]), probabilities=False
        )
    p = Predictions.from_scores(
        "m", "d", np.array([[0.1, 0.6, 0.3], [0.5, 0.5, 0.0]]), k=2
    )
    assert p.topk.tolist() == [[1, 2], [0, 1]]  # tie → lower class id first
    assert p.n_classes == 3 and not p.topk.flags.writeable


def test_labeled_set_checks_lengths() -> None:
    with pytest.raises(InputValidationError, match="3 images but 2 labels"):
        LabeledSet("x", np.array([0, 1]), images=np.zeros((3, 2, 2), np.uint8))
    ls = LabeledSet("x", [0, 1, 1], class_names=("a", "b"))
    assert ls.n == 3 and ls.n_classes == 2


def test_validation_helpers() -> None:
    assert check_topk([1, 2, 0]).shape == (3, 1)
    with pytest.raises(ConfigError):
        check_random_state(None)  # type: ignore[arg-type]
    g = check_random_state(3)
    assert check_random_state(g) is g
    with pytest.raises(InputValidationError, match="sum to 1"):
        check_pred_probs([[0.2, 0.2]], require_normalized=True)


# Layers (DESIGN.md): imports point one way only.
_LAYER = {
    "errors": 0,
    "_atomic": 0,
    "_native": 0,
    "_parallel": 0,
    "records": 0,
    "registry": 0,
    "_validation": 0,
    "_output": 0,
    "_progress": 0,
    "_gc": 0,
    "dedup": 1,
    "sampling": 1,
    "labeling": 1,
    "evaluate": 1,
    "label_errors": 1,
    "datasets": 2,
    "sources": 2,
    "models": 2,
    "store": 2,
    "pipeline": 3,
    "stages": 3,
    "cli": 4,
    "web": 4,
    "demo": 4,
    "api": 4,
    "extend": 4,
}


def _layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "retest" or len(parts) < 2:
        return None
    return _LAYER.get(parts[1])


@pytest.mark.parametrize(
    "path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC))
)
def test_imports_point_one_way(path: Path) -> None:
    rel = path.relative_to(SRC).with_suffix("")
    own = _layer_of("retest." + ".".join(rel.parts))
    if own is None:
        return
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            layer = _layer_of(name)
            assert layer is None or layer <= own, (
                f"{rel} (layer {own}) imports {name} (layer {layer}); imports must point "
                "towards the core"
            )
